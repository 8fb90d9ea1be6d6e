"""Depth-sorted alpha compositing of projected Gaussians in plain PyTorch, fast on a CPU.

The work is organised around (pixel, Gaussian) pairs, binned per pixel (tiles of one pixel):

1. Visible Gaussians are sorted front to back (an integer sort of the depths' bit patterns)
   and cut into blocks of consecutive depth, each with about ``PAIRS_PER_BLOCK`` candidate
   pixels. A Gaussian whose box lies only on 8x8 tiles already opaque (transmittance at or
   below 1e-4 after the nearer blocks) is skipped whole: the early cut-off.
2. Each remaining Gaussian lists its pixels row by row: on a pixel row, alpha >= 1/255 is a
   quadratic inequality in x, solved exactly, so every listed pair counts (the cut at 1/255,
   about 3 sigma, replaces a bounding box).
3. A stable integer sort by pixel id orders each pixel's pairs of the block by depth.
4. Front-to-back transmittance is a segmented cumulative sum of log(1 - alpha), started from
   the pixel's transmittance after the nearer blocks; colours are a segmented sum of
   alpha * T * feature.

Only pairs that can change a pixel are evaluated, and no Python loop runs over pixels or
Gaussians. Operations that are slow in PyTorch on a CPU (advanced indexing, ``index_add_``
of rows, batched 3x3 matmuls, exp of denormals) are replaced by ``index_select``,
``segment_reduce``, per-row gathers and clamping.

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
PAIRS_PER_BLOCK = 262144
"""Candidate pixels per depth block. Smaller blocks skip more hidden Gaussians but pay
PyTorch's per-operation overhead more often; on 2 cores this size was fastest."""
OPEN_TILE = 8
"""Side (px) of the tiles whose opacity decides whether a Gaussian is skipped whole."""


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
    log_transmittance = torch.zeros(pixel_count, device=values.device)  # per pixel, after the blocks done so far
    for pixel, source, power in _pair_blocks(projected, width, height, log_transmittance):
        pixels_hit, pairs_per_pixel = torch.unique_consecutive(pixel, return_counts=True)

        alpha = torch.where(power >= LOG_ALPHA_THRESHOLD, torch.exp(power.clamp(EXP_FLOOR, LOG_MAX_ALPHA)), 0.0)
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


def _open_regions(log_transmittance: torch.Tensor, batch: int, width: int, height: int) -> torch.Tensor:
    """Summed-area table (B, TY + 1, TX + 1) of the OPEN_TILE-pixel tiles that still have a
    pixel with transmittance above the threshold."""
    image = log_transmittance.reshape(batch, 1, height, width)
    open_tiles = (torch.nn.functional.max_pool2d(image, OPEN_TILE, ceil_mode=True) > LOG_TRANSMITTANCE_THRESHOLD)[:, 0]
    return torch.nn.functional.pad(open_tiles.to(torch.int32).cumsum(1).cumsum(2), (1, 0, 1, 0))


def _expand(counts: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For ``counts`` (K,) items of ``total`` children: each child's item (total,) and its
    position among its item's children (total,)."""
    item = torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts, output_size=total)
    position = torch.arange(total, device=counts.device) - (torch.cumsum(counts, 0) - counts).index_select(0, item)
    return item, position


def _pair_blocks(projected: ProjectedGaussians, width: int, height: int, log_transmittance: torch.Tensor):
    """Yield, block by block of nearest-first Gaussians, the (pixel, Gaussian) pairs with
    alpha >= 1/255, sorted by pixel and, within a pixel, nearest first.

    A Gaussian's pixels are found row by row: on each pixel row of its box the condition
    alpha >= 1/255 is a quadratic inequality in x, solved exactly, so every listed pixel
    counts. A Gaussian whose box lies only on tiles already opaque (per
    ``log_transmittance`` when its block is made) is skipped whole.

    Yields:
        pixel: int64 (P,) flat pixel id (b * H + row) * W + col.
        source: int64 (P,) flat Gaussian index b * N + n.
        power: float32 (P,) log(o) - d^T conic d / 2, i.e. log alpha before the 0.999 cap.
    """
    batch, count = projected.depths.shape
    visible = projected.visible.reshape(-1).nonzero().squeeze(1)
    depth_keys = projected.depths.reshape(-1).index_select(0, visible).contiguous().view(torch.int32)
    nearest = visible.index_select(0, torch.sort(depth_keys).indices)  # positive floats sort like their bits

    def gather(values: torch.Tensor) -> torch.Tensor:
        return values.reshape(-1).index_select(0, nearest)

    mean_x, mean_y = gather(projected.means2d[..., 0]), gather(projected.means2d[..., 1])
    conic_a, conic_b, conic_c = (gather(projected.conics[..., i]) for i in range(3))
    log_opacity = torch.log(gather(projected.opacities))
    budget = log_opacity - LOG_ALPHA_THRESHOLD  # alpha >= 1/255  <=>  d^T conic d / 2 <= budget
    extent_y = gather(projected.extents[..., 1])
    row_low = torch.ceil(mean_y - extent_y - 0.5).clamp_min(0)
    row_high = torch.floor(mean_y + extent_y - 0.5).clamp_max(height - 1)
    rows = (row_high - row_low + 1).clamp_min(0).to(torch.int64)
    image = torch.div(nearest, count, rounding_mode="floor")
    image_row = image * height
    extent_x = gather(projected.extents[..., 0])
    tile_box = torch.stack(
        [
            image,
            row_low.long() // OPEN_TILE,
            row_high.long() // OPEN_TILE + 1,
            torch.ceil(mean_x - extent_x - 0.5).clamp_min(0).long() // OPEN_TILE,
            torch.floor(mean_x + extent_x - 0.5).clamp(0, width - 1).long() // OPEN_TILE + 1,
        ],
        dim=1,
    )
    box_area = rows * torch.ceil(2 * extent_x + 1).long()

    _, block_sizes = torch.unique_consecutive(torch.cumsum(box_area, 0) // PAIRS_PER_BLOCK, return_counts=True)
    bounds = [0, *torch.cumsum(block_sizes, 0).tolist()]
    for start, stop in zip(bounds[:-1], bounds[1:]):
        regions = _open_regions(log_transmittance, batch, width, height)
        b, r0, r1, c0, c1 = tile_box[start:stop].unbind(1)
        is_open = (regions[b, r1, c1] - regions[b, r0, c1] - regions[b, r1, c0] + regions[b, r0, c0]) > 0
        gaussians = is_open.nonzero().squeeze(1) + start
        row_counts = rows.index_select(0, gaussians)
        row_total = int(row_counts.sum())
        if row_total == 0:
            continue
        # One entry per (Gaussian, pixel row): the columns where alpha >= 1/255 on that row.
        item, position = _expand(row_counts, row_total)
        owner = gaussians.index_select(0, item)
        a, b_, c = (v.index_select(0, owner) for v in (conic_a, conic_b, conic_c))
        dy = row_low.index_select(0, owner) + position + 0.5 - mean_y.index_select(0, owner)
        discriminant = (2 * a * budget.index_select(0, owner) - dy * dy * (a * c - b_ * b_)).clamp_min(0)
        half_width = torch.sqrt(discriminant) / a
        centre = mean_x.index_select(0, owner) - b_ * dy / a - 0.5  # in column units
        first_col = torch.ceil(centre - half_width).clamp_min(0)
        last_col = torch.floor(centre + half_width).clamp_max(width - 1)
        col_counts = (last_col - first_col + 1).clamp_min(0).to(torch.int64)
        pair_total = int(col_counts.sum())
        if pair_total == 0:
            continue
        # One entry per pixel: power = (row part) - dx * (b dy + a dx / 2), all per-row terms gathered once.
        segment, offset = _expand(col_counts, pair_total)
        dx = (first_col + 0.5 - mean_x.index_select(0, owner)).index_select(0, segment) + offset
        row_part = (log_opacity.index_select(0, owner) - 0.5 * c * dy * dy).index_select(0, segment)
        power = row_part - dx * ((b_ * dy).index_select(0, segment) + (0.5 * a).index_select(0, segment) * dx)
        row_start = (image_row.index_select(0, owner) + row_low.index_select(0, owner).long() + position) * width
        pixel = ((row_start + first_col.long()).index_select(0, segment) + offset).to(torch.int32)
        pixel, order = torch.sort(pixel, stable=True)  # stable: generated nearest first
        source = nearest.index_select(0, owner).index_select(0, segment.index_select(0, order))
        yield pixel.long(), source, power.index_select(0, order)
