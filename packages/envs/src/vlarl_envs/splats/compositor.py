"""Depth-sorted alpha compositing of projected Gaussians in plain PyTorch, fast on a CPU.

The work is organised around (pixel, Gaussian) pairs, binned per pixel:

1. Visible Gaussians are sorted front to back (an integer sort of the depths' bit patterns)
   and cut into blocks of consecutive depth, each giving about ``PAIRS_PER_BLOCK`` pairs.
2. Each Gaussian of a block lists the pixels whose centres fall in its exact (not rounded-up)
   bounding box. Pairs are dropped on the spot when their alpha is under 1/255 or when the
   pixel is already opaque (transmittance at or below 1e-4) from nearer blocks: the early
   cut-off that spares most of what lies behind the first surface.
3. A stable integer sort by pixel id orders each pixel's pairs of the block by depth.
4. Front-to-back transmittance is a segmented cumulative sum of log(1 - alpha), started from
   the pixel's transmittance after the nearer blocks; colours are a segmented sum of
   alpha * T * feature.

Only pairs that can change a pixel are evaluated, and every temporary is block-sized (cache
friendly). The operations that cost most in PyTorch on a CPU (advanced indexing,
``index_add_`` of rows, exp of denormals) are avoided or replaced by ``index_select``,
``segment_reduce`` and clamping.

Compositing rules are those of 3DGS and gsplat: alpha = min(0.999, o * exp(-d^T conic d / 2));
alphas under 1/255 are skipped; a pixel stops before the Gaussian that would bring its
transmittance to 1e-4 or below.
"""

from __future__ import annotations

import math

import torch

from vlarl_envs.splats.projection import ALPHA_THRESHOLD, ProjectedGaussians

MAX_ALPHA = 0.999
TRANSMITTANCE_THRESHOLD = 1e-4
LOG_TRANSMITTANCE_THRESHOLD = math.log(TRANSMITTANCE_THRESHOLD)
LOG_ALPHA_THRESHOLD = math.log(ALPHA_THRESHOLD)
LOG_MAX_ALPHA = math.log(MAX_ALPHA)
EXP_FLOOR = -30.0
"""exp arguments are clamped here first: such results are discarded anyway, and exp of very
negative floats takes a slow denormal path on x86 (up to 40x slower)."""
PAIRS_PER_BLOCK = 65536
"""Candidate pairs per depth block: small enough for the cache, large enough to amortise
the per-operation overhead of PyTorch."""


def composite(
    projected: ProjectedGaussians, features: torch.Tensor, width: int, height: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Alpha-composite B images of N projected Gaussians, front to back.

    Args:
        projected: the output of ``vlarl_envs.splats.projection.project`` for B cameras.
        features: float32 (B, N, D) per-Gaussian values to blend (RGB, or any channels).
        width, height: image size.

    Returns:
        images: float32 (B, H, W, D), the blended features (premultiplied by coverage).
        alphas: float32 (B, H, W), coverage = 1 - final transmittance.
    """
    batch, count, channels = features.shape
    values = torch.cat([features.reshape(-1, channels), features.new_ones(batch * count, 1)], dim=1)
    output = _composite_blocks(projected, values.T.contiguous(), width, height)
    output = output.T.reshape(batch, height, width, channels + 1)
    return output[..., :channels].contiguous(), output[..., channels].contiguous()


def _composite_blocks(projected: ProjectedGaussians, values: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """Blend ``values`` (C, B*N), channel-major, into (C, B*H*W)."""
    batch, count = projected.depths.shape
    pixel_count = batch * height * width
    output = values.new_zeros(values.shape[0], pixel_count)
    log_transmittance = torch.zeros(pixel_count)  # per pixel, after the blocks done so far
    for pixel, source, power in _pair_blocks(projected, width, height, log_transmittance):
        pixel, order = torch.sort(pixel, stable=True)  # stable: the block's pairs stay nearest first
        source = source.index_select(0, order)
        power = power.index_select(0, order)
        pixels_hit, pairs_per_pixel = torch.unique_consecutive(pixel, return_counts=True)
        pixels_hit = pixels_hit.to(torch.int64)

        alpha = torch.exp(power.clamp_max(LOG_MAX_ALPHA))
        log_keep = torch.log1p(-alpha)
        # Segmented inclusive scan; float64 keeps the running sum over the block exact enough
        # that removing the part before a pixel's first pair leaves that pixel's own sum.
        running = torch.cumsum(log_keep, dim=0, dtype=torch.float64)
        last = torch.cumsum(pairs_per_pixel, dim=0) - 1
        first = last - pairs_per_pixel + 1
        # offset: what to subtract from the running sum to get the pixel's log T, nearer blocks included
        offset = running.index_select(0, first) - log_keep.index_select(0, first)
        offset -= log_transmittance.index_select(0, pixels_hit).double()
        inclusive = (running - torch.repeat_interleave(offset, pairs_per_pixel, output_size=len(pixel))).float()
        transmittance = torch.exp((inclusive - log_keep).clamp_min(EXP_FLOOR))  # in front of each pair
        weights = torch.where(inclusive > LOG_TRANSMITTANCE_THRESHOLD, alpha * transmittance, 0.0)

        for channel in range(values.shape[0]):
            weighted = weights * values[channel].index_select(0, source)
            output[channel].index_add_(0, pixels_hit, torch.segment_reduce(weighted, "sum", lengths=pairs_per_pixel))
        log_transmittance.index_copy_(0, pixels_hit, inclusive.index_select(0, last))
    return output


def _pair_blocks(projected: ProjectedGaussians, width: int, height: int, log_transmittance: torch.Tensor):
    """Yield, block by block of nearest-first Gaussians, the (pixel, Gaussian) pairs with
    alpha >= 1/255 on pixels still transparent according to ``log_transmittance`` (read when
    each block is made, so it sees the blocks composited before it).

    Yields:
        pixel: int32 (P,) flat pixel id (b * H + row) * W + col.
        source: int64 (P,) flat Gaussian index b * N + n.
        power: float32 (P,) log(o) - d^T conic d / 2, i.e. log alpha before the 0.999 cap.
    """
    count = projected.depths.shape[1]
    visible = projected.visible.reshape(-1).nonzero().squeeze(1)
    depth_keys = projected.depths.reshape(-1).index_select(0, visible).contiguous().view(torch.int32)
    nearest = visible.index_select(0, torch.sort(depth_keys).indices)  # positive floats sort like their bits

    def gather(values: torch.Tensor) -> torch.Tensor:
        return values.reshape(-1).index_select(0, nearest)

    mean_x, mean_y = gather(projected.means2d[..., 0]), gather(projected.means2d[..., 1])
    conic_a, conic_b, conic_c = (gather(projected.conics[..., i]) for i in range(3))
    log_opacity = torch.log(gather(projected.opacities))
    extent_x, extent_y = gather(projected.extents[..., 0]), gather(projected.extents[..., 1])
    col_low = torch.ceil(mean_x - extent_x - 0.5).clamp_min(0)
    col_high = torch.floor(mean_x + extent_x - 0.5).clamp_max(width - 1)
    row_low = torch.ceil(mean_y - extent_y - 0.5).clamp_min(0)
    row_high = torch.floor(mean_y + extent_y - 0.5).clamp_max(height - 1)
    span = (col_high - col_low + 1).clamp_min(0)
    pair_counts = (span * (row_high - row_low + 1).clamp_min(0)).to(torch.int64)
    image_row = torch.div(nearest, count, rounding_mode="floor") * height

    # Consecutive Gaussians whose candidate pairs fall in the same PAIRS_PER_BLOCK window form a block.
    _, block_sizes = torch.unique_consecutive(torch.cumsum(pair_counts, 0) // PAIRS_PER_BLOCK, return_counts=True)
    bounds = [0, *torch.cumsum(block_sizes, 0).tolist()]
    for start, stop in zip(bounds[:-1], bounds[1:]):
        counts = pair_counts[start:stop]
        total = int(counts.sum())
        if total == 0:
            continue
        local = torch.repeat_interleave(torch.arange(stop - start), counts, output_size=total)
        index = local + start
        offset = (torch.arange(total) - (torch.cumsum(counts, 0) - counts).index_select(0, local)).float()
        span_i = span.index_select(0, index)
        row_offset = torch.floor((offset + 0.5) / span_i)
        col = col_low.index_select(0, index) + (offset - row_offset * span_i)
        row = row_low.index_select(0, index) + row_offset
        pixel = (image_row.index_select(0, index) + row.to(torch.int64)) * width + col.to(torch.int64)
        dx = col + 0.5 - mean_x.index_select(0, index)
        dy = row + 0.5 - mean_y.index_select(0, index)
        power = log_opacity.index_select(0, index) - (
            0.5 * (conic_a.index_select(0, index) * dx * dx + conic_c.index_select(0, index) * dy * dy)
            + conic_b.index_select(0, index) * dx * dy
        )
        open_pixel = log_transmittance.index_select(0, pixel) > LOG_TRANSMITTANCE_THRESHOLD
        keep = ((power >= LOG_ALPHA_THRESHOLD) & open_pixel).nonzero().squeeze(1)
        if len(keep) == 0:
            continue
        yield (
            pixel.index_select(0, keep).to(torch.int32),
            nearest.index_select(0, index.index_select(0, keep)),
            power.index_select(0, keep),
        )
