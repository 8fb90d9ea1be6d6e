"""Two interchangeable rasterizers: gsplat's CUDA kernels and our PyTorch one for CPUs.

Both take B batches of world-space Gaussians and B cameras and return (B, H, W, D) blended
features and (B, H, W) coverage, so a batch of environments renders in one call. Colours are
evaluated by the caller (``vlarl_envs.splats.scene``), which keeps the two backends to the
same job: projection, sorting and alpha compositing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Protocol

import torch

from vlarl_envs.splats.compositor import composite
from vlarl_envs.splats.projection import project

BACKENDS = ("auto", "torch", "gsplat")
NEAR_PLANE = 0.01
FAR_PLANE = 100.0
PIXELS_PER_PASS = 1 << 15
"""``TorchRasterizer`` composites a batch in passes of at most this many pixels (one image at least):
on a CPU a bigger pass saves no work and its per-pixel arrays outgrow the caches (one core, 16 GSEnv
images: in one pass 1.1x the time of one image a pass at 224 px; at 64 and 128 px passes of 2 to 16
images were within 5% of each other)."""


class Rasterizer(Protocol):
    """Renders B sets of N Gaussians, one set per camera."""

    name: str
    device: torch.device

    def rasterize(
        self,
        means: torch.Tensor,
        quats: torch.Tensor,
        scales: torch.Tensor,
        opacities: torch.Tensor,
        features: torch.Tensor,
        world_to_camera: torch.Tensor,
        intrinsics: torch.Tensor,
        width: int,
        height: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """means (B, N, 3), quats (B, N, 4), scales (B, N, 3), opacities (B, N),
        features (B, N, D), world_to_camera (B, 4, 4), intrinsics (B, 3, 3) ->
        images (B, H, W, D) premultiplied by coverage, and coverage (B, H, W)."""
        ...


class TorchRasterizer:
    """EWA projection plus per-pixel binned, depth-sorted compositing in plain PyTorch.

    Args:
        device: where the tensors live; any device works, the code is tuned for CPUs.
        retain_freed_memory: on Linux/glibc, keep freed heap memory mapped (see
            ``retain_freed_memory``). Rendering allocates and frees the same few megabytes
            every frame; without this, glibc hands them back to the kernel and each frame
            page-faults them in again, which costs up to half the frame time in a VM.
    """

    name = "torch"

    def __init__(self, device: str | torch.device = "cpu", retain_freed_memory: bool = True) -> None:
        self.device = torch.device(device)
        if retain_freed_memory and self.device.type == "cpu":
            retain_freed_heap_memory()

    @torch.no_grad()
    def rasterize(self, means, quats, scales, opacities, features, world_to_camera, intrinsics, width, height):
        per_pass = max(1, PIXELS_PER_PASS // (width * height))
        if means.shape[0] > per_pass:
            passes = [
                self.rasterize(*(tensor[start:start + per_pass] for tensor in (
                    means, quats, scales, opacities, features, world_to_camera, intrinsics)), width, height)
                for start in range(0, means.shape[0], per_pass)
            ]  # fmt: skip
            return torch.cat([image for image, _ in passes]), torch.cat([alpha for _, alpha in passes])
        projected = project(
            means, quats, scales, opacities, world_to_camera, intrinsics, width, height, NEAR_PLANE, FAR_PLANE
        )
        return composite(projected, features, width, height)


class GsplatRasterizer:
    """gsplat's ``rasterization`` (CUDA only; gsplat JIT-compiles its kernels on first use).

    Uses the same conventions as ``TorchRasterizer``: eps2d 0.3, classic (not antialiased)
    mode, pixel centres at +0.5, the same near and far planes.
    """

    name = "gsplat"

    def __init__(self, device: str | torch.device = "cuda") -> None:
        self.device = torch.device(device)
        if self.device.type != "cuda" or not torch.cuda.is_available():
            raise ValueError(
                f"the gsplat backend needs a CUDA device, got device={str(self.device)!r} "
                f"(CUDA available: {torch.cuda.is_available()}); use backend='torch' on a CPU"
            )
        try:
            from gsplat import rasterization
        except ImportError as error:
            raise ImportError("the gsplat backend needs gsplat: pip install 'vlarl-envs[gsenv]'") from error
        self._rasterization = rasterization

    @torch.no_grad()
    def rasterize(self, means, quats, scales, opacities, features, world_to_camera, intrinsics, width, height):
        colors, alphas, _ = self._rasterization(
            means=means,
            quats=quats,
            scales=scales,
            opacities=opacities,
            colors=features,
            viewmats=world_to_camera[:, None],
            Ks=intrinsics[:, None],
            width=width,
            height=height,
            near_plane=NEAR_PLANE,
            far_plane=FAR_PLANE,
            eps2d=0.3,
            packed=False,
            rasterize_mode="classic",
        )
        return colors[:, 0], alphas[:, 0, ..., 0]


def make_rasterizer(backend: str = "auto", device: str | torch.device | None = None) -> Rasterizer:
    """The rasterizer for ``backend``: "gsplat" (CUDA), "torch" (any device), or "auto"
    (gsplat when CUDA and gsplat are available, else torch on the CPU)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown splat backend {backend!r}; expected one of {BACKENDS}")
    if backend == "auto":
        backend = "gsplat" if torch.cuda.is_available() and _gsplat_installed() else "torch"
    if backend == "gsplat":
        return GsplatRasterizer(device or "cuda")
    return TorchRasterizer(device or "cpu")


def _gsplat_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("gsplat") is not None


M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
HEAP_BLOCK_LIMIT = 32 << 20
"""Blocks up to this size (glibc's maximum mmap threshold on 64-bit) come from the heap."""
RETAINED_BYTES = 1 << 30
"""Freed heap memory up to this much stays mapped for the next frame."""
_retained = False


def retain_freed_heap_memory() -> bool:
    """Ask glibc to serve blocks up to 32 MiB from the heap and to keep up to 1 GiB of freed heap.

    A process-wide malloc setting (``mallopt``); it changes how much memory the process keeps
    mapped, not what any allocation returns. Returns whether it applied: False off glibc.
    """
    global _retained
    if not _retained:
        name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(name) if name else None
            _retained = bool(
                libc is not None
                and libc.mallopt(M_MMAP_THRESHOLD, HEAP_BLOCK_LIMIT)
                and libc.mallopt(M_TRIM_THRESHOLD, RETAINED_BYTES)
            )
        except (OSError, AttributeError):
            _retained = False
    return _retained
