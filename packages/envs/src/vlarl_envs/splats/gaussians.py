"""3D Gaussians as plain tensors, and the rotation math that moves them.

A splat asset is a set of N anisotropic 3D Gaussians, each with a centre, an orientation
(unit quaternion, w first), per-axis standard deviations, an opacity in (0, 1) and
spherical-harmonic colour coefficients. Values are stored *activated* (scales, not log
scales; opacities, not logits); the PLY reader and writer convert.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Gaussians:
    """N Gaussians in one coordinate frame.

    Attributes:
        means: float32 (N, 3) centres.
        quats: float32 (N, 4) unit quaternions (w, x, y, z): local axes to the frame's axes.
        scales: float32 (N, 3) standard deviations along the local axes, > 0.
        opacities: float32 (N,) in (0, 1).
        sh: float32 (N, K, 3) spherical-harmonic coefficients per colour channel,
            K = (degree + 1) ** 2 with degree 0..3; sh[:, 0] is the view-independent colour.
    """

    means: torch.Tensor
    quats: torch.Tensor
    scales: torch.Tensor
    opacities: torch.Tensor
    sh: torch.Tensor

    def __post_init__(self) -> None:
        count = self.means.shape[0]
        expected = {
            "means": (count, 3),
            "quats": (count, 4),
            "scales": (count, 3),
            "opacities": (count,),
        }
        for name, shape in expected.items():
            if tuple(getattr(self, name).shape) != shape:
                raise ValueError(f"Gaussians.{name}: expected shape {shape}, got {tuple(getattr(self, name).shape)}")
        if self.sh.ndim != 3 or self.sh.shape[0] != count or self.sh.shape[2] != 3:
            raise ValueError(f"Gaussians.sh: expected shape ({count}, K, 3), got {tuple(self.sh.shape)}")
        if self.sh.shape[1] not in SH_COEFFICIENTS_BY_DEGREE.values():
            raise ValueError(
                f"Gaussians.sh: expected K in {sorted(SH_COEFFICIENTS_BY_DEGREE.values())} coefficients "
                f"(degree 0-3), got K={self.sh.shape[1]}"
            )

    def __len__(self) -> int:
        return int(self.means.shape[0])

    @property
    def sh_degree(self) -> int:
        return SH_DEGREE_BY_COEFFICIENTS[self.sh.shape[1]]

    def with_sh_degree(self, degree: int) -> Gaussians:
        """The same Gaussians with SH coefficients cut or zero-padded to ``degree``."""
        wanted = SH_COEFFICIENTS_BY_DEGREE[degree]
        sh = self.sh[:, :wanted]
        if sh.shape[1] < wanted:
            padding = sh.new_zeros(len(self), wanted - sh.shape[1], 3)
            sh = torch.cat([sh, padding], dim=1)
        return Gaussians(self.means, self.quats, self.scales, self.opacities, sh)

    def subset(self, index: torch.Tensor) -> Gaussians:
        """Gaussians selected by a boolean mask or an index tensor."""
        return Gaussians(
            self.means[index], self.quats[index], self.scales[index], self.opacities[index], self.sh[index]
        )

    def decimated(self, factor: int) -> Gaussians:
        """A level of detail: 1 in ``factor`` of the Gaussians, spread evenly over space, their
        two largest axes widened by sqrt(factor) so that a surface they tile stays covered
        (N r^2 constant).

        Images of a few hundred pixels cannot show detail finer than a pixel, and every
        Gaussian costs at least about a dozen pixel evaluations, so fewer, wider ones render
        the same surfaces several times faster. Every ``factor``-th Gaussian along a Z-order
        (Morton) curve is kept: neighbours on the curve are neighbours in space, so the kept
        ones leave no clumps or holes, and the choice is deterministic.
        """
        if factor < 1:
            raise ValueError(f"Gaussians.decimated: expected a factor >= 1, got {factor}")
        if factor == 1:
            return self
        keep = torch.sort(morton_codes(self.means)).indices[factor // 2 :: factor][: max(1, len(self) // factor)]
        keep = keep.sort().values
        kept = self.subset(keep)
        smallest = kept.scales.argmin(dim=1, keepdim=True)
        widen = torch.full_like(kept.scales, factor**0.5).scatter_(1, smallest, 1.0)
        return Gaussians(kept.means, kept.quats, kept.scales * widen, kept.opacities, kept.sh)

    def transformed(self, transform: torch.Tensor) -> Gaussians:
        """The Gaussians moved by a rigid (4, 4) transform.

        Spherical-harmonic coefficients are left in their original frame: callers that need
        view-dependent colour evaluate the SH with view directions mapped back into it
        (see ``vlarl_envs.splats.scene``), which avoids rotating SH bands.
        """
        rotation, translation = transform[:3, :3], transform[:3, 3]
        means = self.means @ rotation.T + translation
        quats = quat_multiply(matrix_to_quat(rotation).expand_as(self.quats), self.quats)
        return Gaussians(means, quats, self.scales, self.opacities, self.sh)

    @staticmethod
    def concat(parts: Sequence[Gaussians]) -> Gaussians:
        """One set from several; all parts are padded to the highest SH degree among them."""
        if not parts:
            raise ValueError("Gaussians.concat: expected at least one set of Gaussians, got none")
        degree = max(part.sh_degree for part in parts)
        parts = [part.with_sh_degree(degree) for part in parts]
        return Gaussians(
            torch.cat([p.means for p in parts]),
            torch.cat([p.quats for p in parts]),
            torch.cat([p.scales for p in parts]),
            torch.cat([p.opacities for p in parts]),
            torch.cat([p.sh for p in parts]),
        )


SH_COEFFICIENTS_BY_DEGREE = {0: 1, 1: 4, 2: 9, 3: 16}
SH_DEGREE_BY_COEFFICIENTS = {k: d for d, k in SH_COEFFICIENTS_BY_DEGREE.items()}
MORTON_BITS = 10


def morton_codes(points: torch.Tensor) -> torch.Tensor:
    """int64 (N,) Z-order codes of points (N, 3) quantised to 2^10 cells per axis of their box."""
    low, high = points.min(dim=0).values, points.max(dim=0).values
    cells = ((points - low) / (high - low).clamp_min(1e-12) * (2**MORTON_BITS - 1)).round().long()
    code = torch.zeros(len(points), dtype=torch.int64)
    for bit in range(MORTON_BITS):
        for axis in range(3):
            code |= ((cells[:, axis] >> bit) & 1) << (3 * bit + axis)
    return code


def normalize_quats(quats: torch.Tensor) -> torch.Tensor:
    """Unit quaternions (..., 4) with a non-negative w (q and -q are the same rotation)."""
    quats = quats / torch.linalg.vector_norm(quats, dim=-1, keepdim=True).clamp_min(1e-12)
    return torch.where(quats[..., :1] < 0, -quats, quats)


def quat_to_matrix(quats: torch.Tensor) -> torch.Tensor:
    """Rotation matrices (..., 3, 3) from quaternions (..., 4), w first; need not be unit."""
    w, x, y, z = normalize_quats(quats).unbind(-1)
    rows = (
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    )  # fmt: skip
    return torch.stack(rows, dim=-1).reshape(*quats.shape[:-1], 3, 3)


def matrix_to_quat(matrices: torch.Tensor) -> torch.Tensor:
    """Unit quaternions (..., 4), w first and non-negative, from rotation matrices (..., 3, 3).

    Uses the largest of the four candidate denominators, so it is stable near 180 degrees.
    """
    m = matrices
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    candidates = torch.stack(
        [
            torch.stack([1 + trace, m[..., 2, 1] - m[..., 1, 2],
                         m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]], -1),
            torch.stack([m[..., 2, 1] - m[..., 1, 2], 1 + m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2],
                         m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0]], -1),
            torch.stack([m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0],
                         1 - m[..., 0, 0] + m[..., 1, 1] - m[..., 2, 2], m[..., 1, 2] + m[..., 2, 1]], -1),
            torch.stack([m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0],
                         m[..., 1, 2] + m[..., 2, 1], 1 - m[..., 0, 0] - m[..., 1, 1] + m[..., 2, 2]], -1),
        ],
        dim=-2,
    )  # (..., 4, 4): row i is 4 * q * q_i, largest when q_i is the largest component
    diagonal = torch.stack([1 + trace, 1 + m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2],
                            1 - m[..., 0, 0] + m[..., 1, 1] - m[..., 2, 2],
                            1 - m[..., 0, 0] - m[..., 1, 1] + m[..., 2, 2]], -1)  # fmt: skip
    best = diagonal.argmax(dim=-1, keepdim=True)
    chosen = torch.take_along_dim(candidates, best[..., None], dim=-2).squeeze(-2)
    return normalize_quats(chosen)


def quat_multiply(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """Hamilton product (..., 4): rotating by ``second`` and then by ``first``."""
    w1, x1, y1, z1 = first.unbind(-1)
    w2, x2, y2, z2 = second.unbind(-1)
    return torch.stack(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ],
        dim=-1,
    )


def covariances(quats: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """3D covariances (..., 3, 3) = R diag(scales^2) R^T from quaternions (..., 4) and scales (..., 3)."""
    rotation = quat_to_matrix(quats)
    scaled = rotation * scales[..., None, :]
    return scaled @ scaled.transpose(-1, -2)


def pose_matrix(positions: torch.Tensor, quats: torch.Tensor) -> torch.Tensor:
    """Homogeneous transforms (..., 4, 4) from positions (..., 3) and quaternions (..., 4)."""
    matrix = torch.zeros(*positions.shape[:-1], 4, 4, dtype=positions.dtype, device=positions.device)
    matrix[..., :3, :3] = quat_to_matrix(quats)
    matrix[..., :3, 3] = positions
    matrix[..., 3, 3] = 1
    return matrix
