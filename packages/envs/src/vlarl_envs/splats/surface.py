"""Gaussians sampled on triangle-mesh surfaces: splat assets made from simulator geometry.

Each Gaussian is a flat disc lying in the surface: its local z axis is the face normal, its
in-plane standard deviation follows the sampling density (so neighbours overlap and leave no
holes) and its thickness is a tenth of that. Colours are the triangles' colours as given.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vlarl_envs.splats.gaussians import Gaussians, matrix_to_quat
from vlarl_envs.splats.sh import rgb_to_sh_dc

SPREAD = 0.6
"""In-plane standard deviation as a fraction of the mean spacing between samples."""
FLATNESS = 0.1
"""Thickness of a disc relative to its in-plane standard deviation."""
OPACITY = 0.95


@dataclass(frozen=True)
class ColouredMesh:
    """A triangle mesh in some frame with one colour per triangle.

    Attributes:
        vertices: float (V, 3).
        triangles: int (T, 3) vertex indices, counter-clockwise seen from outside.
        colours: float (T, 3) linear RGB in [0, 1].
    """

    vertices: np.ndarray
    triangles: np.ndarray
    colours: np.ndarray

    def __post_init__(self) -> None:
        if self.vertices.ndim != 2 or self.vertices.shape[1] != 3:
            raise ValueError(f"ColouredMesh.vertices: expected (V, 3), got {self.vertices.shape}")
        if self.triangles.ndim != 2 or self.triangles.shape[1] != 3:
            raise ValueError(f"ColouredMesh.triangles: expected (T, 3), got {self.triangles.shape}")
        if self.colours.shape != (len(self.triangles), 3):
            raise ValueError(f"ColouredMesh.colours: expected ({len(self.triangles)}, 3), got {self.colours.shape}")

    def transformed(self, transform: np.ndarray) -> ColouredMesh:
        """The mesh moved by a (4, 4) transform (a mirror flips the triangle winding back)."""
        vertices = self.vertices @ transform[:3, :3].T + transform[:3, 3]
        triangles = self.triangles if np.linalg.det(transform[:3, :3]) > 0 else self.triangles[:, ::-1]
        return ColouredMesh(vertices, triangles, self.colours)

    def area(self) -> float:
        return float(_triangle_areas(self.vertices, self.triangles).sum())

    @staticmethod
    def concat(meshes: list[ColouredMesh]) -> ColouredMesh:
        offsets = np.cumsum([0] + [len(m.vertices) for m in meshes[:-1]])
        return ColouredMesh(
            np.concatenate([m.vertices for m in meshes]),
            np.concatenate([m.triangles + offset for m, offset in zip(meshes, offsets)]),
            np.concatenate([m.colours for m in meshes]),
        )


def _triangle_areas(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    corners = vertices[triangles]
    return 0.5 * np.linalg.norm(np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]), axis=1)


def subdivided(mesh: ColouredMesh, max_area: float) -> ColouredMesh:
    """The same surface with every triangle larger than ``max_area`` split into four, repeatedly."""
    vertices, triangles, colours = mesh.vertices, mesh.triangles, mesh.colours
    while True:
        large = _triangle_areas(vertices, triangles) > max_area
        if not large.any():
            return ColouredMesh(vertices, triangles, colours)
        a, b, c = triangles[large].T
        first_new = len(vertices)
        count = int(large.sum())
        midpoints = np.concatenate(
            [(vertices[a] + vertices[b]) / 2, (vertices[b] + vertices[c]) / 2, (vertices[c] + vertices[a]) / 2]
        )
        ab, bc, ca = (first_new + np.arange(count) + k * count for k in range(3))
        children = np.concatenate([np.stack(t, axis=1) for t in ((a, ab, ca), (ab, b, bc), (ca, bc, c), (ab, bc, ca))])
        vertices = np.concatenate([vertices, midpoints])
        triangles = np.concatenate([triangles[~large], children])
        colours = np.concatenate([colours[~large], np.tile(colours[large], (4, 1))])


def surface_gaussians(mesh: ColouredMesh, count: int, rng: np.random.Generator) -> Gaussians:
    """``count`` disc-shaped Gaussians spread evenly (by area) over ``mesh``, SH degree 0.

    Big triangles are first subdivided to about the area per sample, then samples are drawn
    systematically along the cumulative area, so every small triangle gets close to its
    expected share: an even, hole-free cover rather than random clumps.
    """
    if count < 1:
        raise ValueError(f"surface_gaussians: expected a positive count, got {count}")
    total = _triangle_areas(mesh.vertices, mesh.triangles).sum()
    if not total > 0:
        raise ValueError("surface_gaussians: the mesh has no area to sample")
    mesh = subdivided(mesh, 2 * total / count)
    areas = _triangle_areas(mesh.vertices, mesh.triangles)
    cumulative = np.cumsum(areas) / areas.sum()
    chosen = np.minimum(np.searchsorted(cumulative, (np.arange(count) + rng.random()) / count), len(areas) - 1)
    first, second = rng.random(count), rng.random(count)
    flip = first + second > 1
    first[flip], second[flip] = 1 - first[flip], 1 - second[flip]
    corners = mesh.vertices[mesh.triangles[chosen]]
    points = (corners[:, 0] + first[:, None] * (corners[:, 1] - corners[:, 0])
              + second[:, None] * (corners[:, 2] - corners[:, 0]))
    normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
    colours = np.clip(mesh.colours[chosen], 0.0, 1.0)
    spacing = np.sqrt(total / count)
    scales = np.tile([SPREAD * spacing, SPREAD * spacing, FLATNESS * SPREAD * spacing], (count, 1))
    return Gaussians(
        means=torch.tensor(points, dtype=torch.float32),
        quats=matrix_to_quat(torch.tensor(_frames_from_normals(normals), dtype=torch.float32)),
        scales=torch.tensor(scales, dtype=torch.float32),
        opacities=torch.full((count,), OPACITY),
        sh=rgb_to_sh_dc(torch.tensor(colours, dtype=torch.float32))[:, None, :],
    )


def _frames_from_normals(normals: np.ndarray) -> np.ndarray:
    """(N, 3, 3) rotations whose third column is each unit normal."""
    helper = np.where(np.abs(normals[:, 2:3]) < 0.9, [[0.0, 0.0, 1.0]], [[1.0, 0.0, 0.0]])
    tangent = np.cross(helper, normals)
    tangent /= np.linalg.norm(tangent, axis=1, keepdims=True)
    bitangent = np.cross(normals, tangent)
    return np.stack([tangent, bitangent, normals], axis=-1)
