"""EWA projection of 3D Gaussians to 2D image-plane Gaussians.

Each Gaussian's covariance R diag(s^2) R^T is moved into the camera frame and pushed through
the Jacobian J of the perspective map at its centre: Sigma_2D = J Sigma_cam J^T + eps * I. The
eps (0.3 px^2) is the low-pass filter 3DGS and gsplat add, so a Gaussian covers at least
about a pixel. The constants below (frustum guard band, alpha threshold, 3.33-sigma cap)
follow gsplat so that both backends cut the same Gaussians.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vlarl_envs.splats.gaussians import quat_to_matrix

ALPHA_THRESHOLD = 1.0 / 255.0
"""A Gaussian adds nothing to a pixel where its alpha is below this (one 8-bit level)."""
MAX_EXTENT_SIGMAS = 3.33
"""Bounding boxes never reach further than this many standard deviations."""
FRUSTUM_GUARD = 0.3
"""Centres beyond the image by more than this fraction of the half field of view are clamped
before linearising, so the Jacobian of a Gaussian far off-screen stays tame."""


@dataclass(frozen=True)
class ProjectedGaussians:
    """2D Gaussians of B images, N per image.

    Attributes:
        means2d: float32 (B, N, 2) centres in pixels (x = column, y = row).
        conics: float32 (B, N, 3) the inverse 2D covariance as (a, b, c) of [[a, b], [b, c]].
        depths: float32 (B, N) camera-frame z of the centres.
        extents: float32 (B, N, 2) half-widths in pixels of the ellipse where alpha >= 1/255,
            along x and y; (0, 0) for a Gaussian that touches no pixel (behind the camera,
            off-screen, too faint).
        radii: int32 (B, N, 2) the extents rounded up, as gsplat reports them.
        opacities: float32 (B, N).
    """

    means2d: torch.Tensor
    conics: torch.Tensor
    depths: torch.Tensor
    extents: torch.Tensor
    radii: torch.Tensor
    opacities: torch.Tensor

    @property
    def visible(self) -> torch.Tensor:
        """bool (B, N): the Gaussian touches at least one pixel."""
        return (self.radii > 0).all(dim=-1)


def project(
    means: torch.Tensor,
    quats: torch.Tensor,
    scales: torch.Tensor,
    opacities: torch.Tensor,
    world_to_camera: torch.Tensor,
    intrinsics: torch.Tensor,
    width: int,
    height: int,
    near: float = 0.01,
    far: float = 1e10,
    eps2d: float = 0.3,
) -> ProjectedGaussians:
    """Project B sets of N world-space Gaussians into B cameras.

    Args:
        means, quats, scales: (B, N, 3), (B, N, 4), (B, N, 3) world-space Gaussians.
        opacities: (B, N).
        world_to_camera: (B, 4, 4) OpenCV view matrices; intrinsics: (B, 3, 3).
        width, height: image size shared by the B cameras.
        near, far: camera-z clipping range of the centres.
        eps2d: low-pass filter added to the 2D covariance diagonal (px^2).
    """
    # Component-wise on (B, N) tensors: many small 3x3 products are far slower as batched matmuls.
    view = [[world_to_camera[:, i, j, None] for j in range(3)] for i in range(3)]  # (B, 1) each
    mean = means.unbind(-1)
    x, y, z = (sum(view[i][k] * mean[k] for k in range(3)) + world_to_camera[:, i, 3, None] for i in range(3))
    fx, fy = intrinsics[:, 0, 0, None], intrinsics[:, 1, 1, None]
    cx, cy = intrinsics[:, 0, 2, None], intrinsics[:, 1, 2, None]
    in_depth = (z > near) & (z < far)
    inverse_z = 1.0 / torch.where(in_depth, z, torch.ones_like(z))

    guard_x = FRUSTUM_GUARD * 0.5 * width / fx
    guard_y = FRUSTUM_GUARD * 0.5 * height / fy
    slope_x = (x * inverse_z).clamp(-(cx / fx + guard_x), (width - cx) / fx + guard_x)
    slope_y = (y * inverse_z).clamp(-(cy / fy + guard_y), (height - cy) / fy + guard_y)

    # The rows of J R_view R_q diag(s), where J is the perspective Jacobian (2 x 3):
    # row_x = fx / z * (R_view[0] - slope_x * R_view[2]) R_q diag(s), and likewise for y.
    local = quat_to_matrix(quats)  # (B, N, 3, 3)
    axes = [[local[..., k, j] for j in range(3)] for k in range(3)]
    view_x = [view[0][k] - slope_x * view[2][k] for k in range(3)]
    view_y = [view[1][k] - slope_y * view[2][k] for k in range(3)]
    scale = scales.unbind(-1)
    row_x = [sum(view_x[k] * axes[k][j] for k in range(3)) * scale[j] for j in range(3)]
    row_y = [sum(view_y[k] * axes[k][j] for k in range(3)) * scale[j] for j in range(3)]
    gain_x, gain_y = fx * inverse_z, fy * inverse_z
    cov_a = gain_x * gain_x * sum(r * r for r in row_x) + eps2d
    cov_b = gain_x * gain_y * sum(r * q for r, q in zip(row_x, row_y))
    cov_c = gain_y * gain_y * sum(q * q for q in row_y) + eps2d
    determinant = cov_a * cov_c - cov_b * cov_b
    safe_determinant = torch.where(determinant > 0, determinant, torch.ones_like(determinant))
    conics = torch.stack([cov_c, -cov_b, cov_a], dim=-1) / safe_determinant[..., None]

    means2d = torch.stack([fx * x * inverse_z + cx, fy * y * inverse_z + cy], dim=-1)
    extent = torch.sqrt(2.0 * torch.log(opacities.clamp_min(ALPHA_THRESHOLD) / ALPHA_THRESHOLD)).clamp_max(
        MAX_EXTENT_SIGMAS
    )
    extents = extent[..., None] * torch.sqrt(torch.stack([cov_a, cov_c], dim=-1))
    radii = torch.ceil(extents)
    screen = torch.tensor([width, height], device=means2d.device)
    on_screen = ((means2d + radii > 0) & (means2d - radii < screen)).all(dim=-1)
    keep = (in_depth & (determinant > 0) & (opacities >= ALPHA_THRESHOLD) & on_screen)[..., None]
    return ProjectedGaussians(
        means2d=means2d,
        conics=conics,
        depths=z,
        extents=extents * keep,
        radii=(radii * keep).to(torch.int32),
        opacities=opacities,
    )
