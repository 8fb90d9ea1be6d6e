"""Read and write the standard 3D Gaussian Splatting PLY format.

One ``vertex`` element with float properties: ``x y z`` (centre), optionally ``nx ny nz``
(unused, written as zeros for compatibility), ``f_dc_0..2`` (degree-0 SH per channel),
``f_rest_0..M-1`` (higher SH bands, channel-major: all of red's, then green's, then
blue's; M = 3 * (K - 1)), ``opacity`` (a logit), ``scale_0..2`` (log standard deviations)
and ``rot_0..3`` (a quaternion, w first, not necessarily unit). Files from 3DGS
trainers, viewers and the published GSEnv captures use this layout.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import numpy as np
import torch

from vlarl_envs.splats.gaussians import SH_COEFFICIENTS_BY_DEGREE, Gaussians, normalize_quats

REQUIRED_PROPERTIES = (
    ("x", "y", "z")
    + tuple(f"f_dc_{i}" for i in range(3))
    + ("opacity",)
    + tuple(f"scale_{i}" for i in range(3))
    + tuple(f"rot_{i}" for i in range(4))
)
OPACITY_EPSILON = 1e-6
"""Opacities are clamped into (eps, 1 - eps) before taking the logit, so 0 and 1 survive a round trip."""


def _load_plyfile():
    try:
        import plyfile
    except ImportError as error:
        raise ImportError(
            "reading and writing splat PLY files needs plyfile: pip install 'vlarl-envs[gsenv]'"
        ) from error
    return plyfile


def read_ply(path: str | os.PathLike) -> Gaussians:
    """The Gaussians of a 3DGS PLY file; a clear ValueError when the file is not one."""
    plyfile = _load_plyfile()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"expected a 3DGS PLY file at {path}, found nothing there")
    try:
        data = plyfile.PlyData.read(str(path), mmap=False)  # a memory map would fault if the file changed
    except Exception as error:  # plyfile raises several types for a malformed header or body
        raise ValueError(f"{path}: expected a 3DGS PLY file, could not parse it: {error}") from error
    if "vertex" not in [element.name for element in data.elements]:
        found = [element.name for element in data.elements]
        raise ValueError(f"{path}: expected a 'vertex' element of Gaussians, found elements {found}")
    vertex = data["vertex"]
    names = [prop.name for prop in vertex.properties]
    missing = [name for name in REQUIRED_PROPERTIES if name not in names]
    if missing:
        raise ValueError(
            f"{path}: expected 3DGS vertex properties {list(REQUIRED_PROPERTIES)}; missing {missing}, found {names}"
        )
    rest_names = sorted((n for n in names if re.fullmatch(r"f_rest_\d+", n)), key=lambda n: int(n[7:]))
    rest_count = len(rest_names)
    coefficients = rest_count // 3 + 1
    if rest_count % 3 or coefficients not in SH_COEFFICIENTS_BY_DEGREE.values():
        raise ValueError(
            f"{path}: expected 0, 9, 24 or 45 f_rest_* properties (SH degree 0-3), got {rest_count}"
        )
    if rest_names != [f"f_rest_{i}" for i in range(rest_count)]:
        raise ValueError(f"{path}: expected f_rest_0..f_rest_{rest_count - 1} without gaps, got {rest_names}")

    def column(*fields: str) -> np.ndarray:
        return np.stack([np.asarray(vertex[field], dtype=np.float32) for field in fields], axis=-1)

    means = column("x", "y", "z")
    dc = column("f_dc_0", "f_dc_1", "f_dc_2")
    rest = column(*rest_names) if rest_count else np.zeros((len(means), 0), np.float32)
    logits = column("opacity")[:, 0]
    log_scales = column("scale_0", "scale_1", "scale_2")
    quats = column("rot_0", "rot_1", "rot_2", "rot_3")
    for name, values in {"positions": means, "colours": dc, "SH": rest, "opacity": logits,
                         "scales": log_scales, "rotations": quats}.items():  # fmt: skip
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{path}: expected finite {name}, found NaN or inf")
    if np.any(np.linalg.norm(quats, axis=-1) < 1e-12):
        raise ValueError(f"{path}: expected non-zero rotation quaternions, found a zero one")

    # f_rest is channel-major: (N, 3, K-1) -> (N, K-1, 3)
    rest = rest.reshape(len(means), 3, coefficients - 1).transpose(0, 2, 1)
    sh = np.concatenate([dc[:, None, :], rest], axis=1)
    return Gaussians(
        means=torch.from_numpy(means),
        quats=normalize_quats(torch.from_numpy(quats)),
        scales=torch.from_numpy(np.exp(log_scales)),
        opacities=torch.sigmoid(torch.from_numpy(logits)),
        sh=torch.from_numpy(np.ascontiguousarray(sh)),
    )


def write_ply(gaussians: Gaussians, path: str | os.PathLike) -> Path:
    """Write ``gaussians`` as a binary 3DGS PLY; written to a temporary name, then renamed."""
    plyfile = _load_plyfile()
    path = Path(path)
    count = len(gaussians)
    rest_count = 3 * (gaussians.sh.shape[1] - 1)
    fields = (
        ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
        + [f"f_rest_{i}" for i in range(rest_count)]
        + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    )
    sh = gaussians.sh.detach().cpu().float().numpy()
    opacities = gaussians.opacities.detach().cpu().double().clamp(OPACITY_EPSILON, 1 - OPACITY_EPSILON)
    columns = np.concatenate(
        [
            gaussians.means.detach().cpu().float().numpy(),
            np.zeros((count, 3), np.float32),
            sh[:, 0, :],
            sh[:, 1:, :].transpose(0, 2, 1).reshape(count, rest_count),
            torch.logit(opacities).float().numpy()[:, None],
            np.log(gaussians.scales.detach().cpu().float().numpy()),
            gaussians.quats.detach().cpu().float().numpy(),
        ],
        axis=1,
    ).astype(np.float32)
    records = np.empty(count, dtype=[(name, "f4") for name in fields])
    for index, name in enumerate(fields):
        records[name] = columns[:, index]
    element = plyfile.PlyElement.describe(records, "vertex")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        plyfile.PlyData([element], text=False).write(temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
