"""View-dependent colour from real spherical harmonics, degrees 0 to 3.

The basis and its normalisation constants are the ones 3D Gaussian Splatting uses, so the
coefficients of a captured PLY give the colours its authors saw: colour = 0.5 + sum_k
Y_k(direction) * sh_k, clamped at 0.
"""

from __future__ import annotations

import torch

SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
SH_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)
SH_C3 = (
    -0.5900435899266435,
    2.890611442640554,
    -0.4570457994644658,
    0.3731763325901154,
    -0.4570457994644658,
    1.445305721320277,
    -0.5900435899266435,
)


def sh_basis(directions: torch.Tensor, coefficients: int) -> torch.Tensor:
    """The first ``coefficients`` (1, 4, 9 or 16) basis functions at unit ``directions`` (..., 3)."""
    x, y, z = directions.unbind(-1)
    basis = [torch.full_like(x, SH_C0)]
    if coefficients > 1:
        basis += [-SH_C1 * y, SH_C1 * z, -SH_C1 * x]
    if coefficients > 4:
        xx, yy, zz, xy, yz, xz = x * x, y * y, z * z, x * y, y * z, x * z
        basis += [
            SH_C2[0] * xy,
            SH_C2[1] * yz,
            SH_C2[2] * (2 * zz - xx - yy),
            SH_C2[3] * xz,
            SH_C2[4] * (xx - yy),
        ]
    if coefficients > 9:
        basis += [
            SH_C3[0] * y * (3 * xx - yy),
            SH_C3[1] * xy * z,
            SH_C3[2] * y * (4 * zz - xx - yy),
            SH_C3[3] * z * (2 * zz - 3 * xx - 3 * yy),
            SH_C3[4] * x * (4 * zz - xx - yy),
            SH_C3[5] * z * (xx - yy),
            SH_C3[6] * x * (xx - 3 * yy),
        ]
    return torch.stack(basis, dim=-1)


def sh_to_rgb(sh: torch.Tensor, directions: torch.Tensor | None = None) -> torch.Tensor:
    """RGB (..., 3) in [0, inf) from coefficients (..., K, 3) seen along ``directions`` (..., 3).

    ``directions`` run from the camera to each Gaussian, in the frame the coefficients were
    captured in; they may be None when K == 1 (no view dependence).
    """
    coefficients = sh.shape[-2]
    if coefficients == 1:
        return (SH_C0 * sh[..., 0, :] + 0.5).clamp_min(0)
    if directions is None:
        raise ValueError(f"sh_to_rgb: {coefficients} SH coefficients need view directions, got None")
    unit = directions / torch.linalg.vector_norm(directions, dim=-1, keepdim=True).clamp_min(1e-12)
    basis = sh_basis(unit, coefficients)
    return ((basis[..., None] * sh).sum(dim=-2) + 0.5).clamp_min(0)


def rgb_to_sh_dc(rgb: torch.Tensor) -> torch.Tensor:
    """The degree-0 coefficient (..., 3) that renders as ``rgb`` from every direction."""
    return (rgb - 0.5) / SH_C0


def sphere_directions(count: int) -> torch.Tensor:
    """float64 (count, 3) unit vectors spread evenly over the sphere (a Fibonacci lattice)."""
    index = torch.arange(count, dtype=torch.float64) + 0.5
    polar = torch.arccos(1 - 2 * index / count)
    azimuth = torch.pi * (1 + 5**0.5) * index
    return torch.stack([polar.sin() * azimuth.cos(), polar.sin() * azimuth.sin(), polar.cos()], dim=-1)


def rotate_sh(sh: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Coefficients (..., K, 3) of Gaussians turned by ``rotation`` (3, 3): the rotated
    coefficients seen along ``rotation @ d`` give the colour the old ones gave along ``d``.

    Each band rotates within itself, so the K x K map is found exactly by least squares over
    directions spread on the sphere (more of them than coefficients).
    """
    coefficients = sh.shape[-2]
    if coefficients == 1:
        return sh
    directions = sphere_directions(4 * coefficients)
    rotation = rotation.to(torch.float64)
    basis = sh_basis(directions, coefficients)  # Y(d)
    turned_back = sh_basis(directions @ rotation, coefficients)  # Y(R^T d), row by row
    mapping = torch.linalg.lstsq(basis, turned_back).solution  # Y(d) M = Y(R^T d)
    return torch.einsum("kj,...jc->...kc", mapping, sh.to(torch.float64)).to(sh.dtype)
