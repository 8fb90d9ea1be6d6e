"""Colour splats the way a real capture does: by photographing the simulated object.

Surface samples of a mesh know their geometry but not what a camera sees there: the Panda's
links are several overlapping shells (a dark inner one under a white skin), which splats,
having no depth test, would show as dark speckles. So each body is rendered alone by
SAPIEN's own rasterizer, with the scene's lights, from views all around it; a Gaussian seen
in a view (its depth matches the rendered depth at its pixel) takes the rendered colour
there, averaged over the views; a Gaussian never seen (buried, or under another shell) is
dropped. Assets made this way look like ManiSkill's own images, shading included.
"""

from __future__ import annotations

import numpy as np
import sapien
import torch

from vlarl_envs.splats.gaussians import Gaussians
from vlarl_envs.splats.sh import rgb_to_sh_dc, sphere_directions

VIEW_COUNT = 32
IMAGE_SIZE = 256
DEPTH_TOLERANCE = 0.004
"""A Gaussian within this distance (m) of the rendered surface along the ray counts as seen."""
FIELD_OF_VIEW = 0.7
"""Vertical field of view (rad) of the photographing cameras; their distance is set to fit the body."""


def _look_at(eye: np.ndarray, target: np.ndarray) -> sapien.Pose:
    """A SAPIEN camera pose (x forward, y left, z up) at ``eye`` looking at ``target``."""
    forward = (target - eye) / np.linalg.norm(target - eye)
    up_hint = np.array([0.0, 0.0, 1.0]) if abs(forward[2]) < 0.95 else np.array([1.0, 0.0, 0.0])
    left = np.cross(up_hint, forward)
    left /= np.linalg.norm(left)
    up = np.cross(forward, left)
    matrix = np.eye(4)
    matrix[:3, :3] = np.stack([forward, left, up], axis=1)
    matrix[:3, 3] = eye
    return sapien.Pose(matrix)


class Photographer:
    """A camera added to the task's scene, for ``photograph`` calls; ``close`` removes it.

    Args:
        task: a built ``PutCubeOnPlateTask`` (its first sub-scene is used).
    """

    def __init__(self, task) -> None:
        self._scene = task.scene.sub_scenes[0]
        self._camera_entity = sapien.Entity()
        self._camera = sapien.render.RenderCameraComponent(IMAGE_SIZE, IMAGE_SIZE)
        self._camera.set_fovy(FIELD_OF_VIEW)
        self._camera.near, self._camera.far = 0.01, 20.0
        self._camera_entity.add_component(self._camera)
        self._scene.add_entity(self._camera_entity)

    def close(self) -> None:
        self._scene.remove_entity(self._camera_entity)

    def _render_bodies(self) -> list:
        return [
            body
            for entity in self._scene.entities
            if (body := entity.find_component_by_type(sapien.render.RenderBodyComponent)) is not None
        ]

    def photograph(self, entity, gaussians: Gaussians) -> Gaussians:
        """The Gaussians (in ``entity``'s frame) that cameras around the entity see, in the
        colours they see; ``entity`` is rendered alone, at its current pose."""
        bodies = self._render_bodies()
        shown = entity.find_component_by_type(sapien.render.RenderBodyComponent)
        saved = [body.visibility for body in bodies]
        for body in bodies:
            body.visibility = 1.0 if body is shown else 0.0
        try:
            colour_sums, sightings = self._look_around(entity, gaussians.means.double().numpy())
        finally:
            for body, visibility in zip(bodies, saved):
                body.visibility = visibility
        seen = sightings > 0
        colours = torch.tensor(colour_sums[seen] / sightings[seen, None], dtype=torch.float32)
        kept = gaussians.subset(torch.from_numpy(seen))
        return Gaussians(kept.means, kept.quats, kept.scales, kept.opacities, rgb_to_sh_dc(colours)[:, None, :])

    def _look_around(self, entity, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Summed RGB (N, 3) in [0, 1] of each point over the views that see it, and the view counts (N,)."""
        to_world = entity.pose.to_transformation_matrix()
        world_points = points @ to_world[:3, :3].T + to_world[:3, 3]
        centre = world_points.mean(axis=0)
        radius = float(np.linalg.norm(world_points - centre, axis=1).max()) + 1e-3
        distance = 1.15 * radius / np.sin(FIELD_OF_VIEW / 2)
        colour_sums = np.zeros((len(points), 3))
        sightings = np.zeros(len(points))
        for direction in sphere_directions(VIEW_COUNT).numpy():
            self._camera_entity.set_pose(_look_at(centre + distance * direction, centre))
            self._scene.update_render()
            self._camera.take_picture()
            colour = self._camera.get_picture("Color")  # (H, W, 4) uint8
            depth = -self._camera.get_picture("PositionSegmentation")[..., 2].astype(float) / 1000.0  # mm, -z forward
            extrinsic = self._camera.get_extrinsic_matrix()  # world -> OpenCV camera (3, 4)
            camera_points = world_points @ extrinsic[:, :3].T + extrinsic[:, 3]
            in_front = camera_points[:, 2] > 1e-6
            pixels = camera_points[:, :2] / np.where(in_front, camera_points[:, 2], 1.0)[:, None]
            pixels = pixels @ self._camera.get_intrinsic_matrix()[:2, :2].T + self._camera.get_intrinsic_matrix()[:2, 2]
            col, row = np.floor(pixels[:, 0]).astype(int), np.floor(pixels[:, 1]).astype(int)
            inside = in_front & (col >= 0) & (col < IMAGE_SIZE) & (row >= 0) & (row < IMAGE_SIZE)
            col, row = np.where(inside, col, 0), np.where(inside, row, 0)
            covered = colour[row, col, 3] > 0
            seen = inside & covered & (np.abs(depth[row, col] - camera_points[:, 2]) < DEPTH_TOLERANCE)
            colour_sums[seen] += colour[row[seen], col[seen], :3] / 255.0
            sightings += seen
        return colour_sums, sightings
