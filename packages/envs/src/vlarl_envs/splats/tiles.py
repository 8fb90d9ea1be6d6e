"""Tile-binned, depth-sorted alpha compositing of projected Gaussians in plain PyTorch (CPU).

The image is cut into square tiles. Every visible Gaussian is paired with each tile its
bounding box touches; the pairs are sorted by (tile, depth) with one stable integer sort;
each pair is evaluated on all pixels of its tile at once, giving a (P, tile_size^2) table
of alphas. Front-to-back compositing within each tile is a *segmented* cumulative sum of
log(1 - alpha) down that table, so tiles with 3 or 3,000 Gaussians are done in the same
few tensor operations, with no padding and no Python loop over tiles or pixels.

Compositing rules are those of 3DGS / gsplat: alpha = min(0.999, o * exp(-d^T conic d / 2));
alphas below 1/255 are skipped; a pixel stops before the Gaussian that would bring its
transmittance to 1e-4 or below.
"""

from __future__ import annotations

import math

import torch

from vlarl_envs.splats.projection import ALPHA_THRESHOLD, ProjectedGaussians

MAX_ALPHA = 0.999
TRANSMITTANCE_THRESHOLD = 1e-4
LOG_TRANSMITTANCE_THRESHOLD = math.log(TRANSMITTANCE_THRESHOLD)


def _depth_keys(depths: torch.Tensor) -> torch.Tensor:
    """int32 keys that sort like the (positive) float32 depths: their IEEE-754 bit patterns."""
    return depths.contiguous().view(torch.int32)


def composite_tiles(
    projected: ProjectedGaussians,
    features: torch.Tensor,
    width: int,
    height: int,
    tile_size: int = 8,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Alpha-composite B images of N projected Gaussians, front to back.

    Args:
        projected: the output of ``vlarl_envs.splats.projection.project`` for B cameras.
        features: float32 (B, N, D) per-Gaussian values to blend (RGB, or any channels).
        width, height: image size.
        tile_size: side of the square tiles in pixels; smaller tiles evaluate fewer empty
            pixels per Gaussian but make more (tile, Gaussian) pairs.

    Returns:
        images: float32 (B, H, W, D), the blended features (premultiplied by coverage).
        alphas: float32 (B, H, W), coverage 1 - final transmittance.
    """
    batch, _, channels = features.shape
    tiles_x, tiles_y = math.ceil(width / tile_size), math.ceil(height / tile_size)
    pixels_per_tile = tile_size * tile_size
    tile_count = batch * tiles_x * tiles_y

    visible = projected.visible.reshape(-1).nonzero().squeeze(1)
    order = torch.sort(_depth_keys(projected.depths.reshape(-1)[visible])).indices
    chosen = visible[order]  # flat (b * N + n) indices, nearest first
    image_index = torch.div(chosen, projected.depths.shape[1], rounding_mode="floor")
    means2d = projected.means2d.reshape(-1, 2)[chosen]
    radii = projected.radii.reshape(-1, 2)[chosen].to(means2d.dtype)

    # Tile rectangle [x0, x1] x [y0, y1] (inclusive) touched by each bounding box.
    low = torch.floor((means2d - radii) / tile_size).to(torch.int64)
    high = torch.floor((means2d + radii) / tile_size).to(torch.int64)
    x0, x1 = low[:, 0].clamp(0, tiles_x - 1), high[:, 0].clamp(0, tiles_x - 1)
    y0, y1 = low[:, 1].clamp(0, tiles_y - 1), high[:, 1].clamp(0, tiles_y - 1)
    span_x = x1 - x0 + 1
    pair_counts = span_x * (y1 - y0 + 1)
    pair_total = int(pair_counts.sum())
    if pair_total == 0:
        return features.new_zeros(batch, height, width, channels), features.new_zeros(batch, height, width)

    gaussian = torch.repeat_interleave(torch.arange(len(chosen)), pair_counts)
    first_pair = torch.cumsum(pair_counts, 0) - pair_counts
    offset = torch.arange(pair_total) - first_pair[gaussian]
    tile_x = x0[gaussian] + offset % span_x[gaussian]
    tile_y = y0[gaussian] + torch.div(offset, span_x[gaussian], rounding_mode="floor")
    tile = (image_index[gaussian] * tiles_y + tile_y) * tiles_x + tile_x
    # A stable sort by tile keeps the depth order of each tile's Gaussians.
    tile, by_tile = torch.sort(tile.to(torch.int32), stable=True)
    gaussian = gaussian[by_tile]
    tile = tile.to(torch.int64)

    # Pixel centres of every pair's tile: (P, T*T).
    local = torch.arange(tile_size, dtype=means2d.dtype) + 0.5
    pair_tile_x = (tile % tiles_x).to(means2d.dtype) * tile_size
    pair_tile_y = (torch.div(tile, tiles_x, rounding_mode="floor") % tiles_y).to(means2d.dtype) * tile_size
    dx = (pair_tile_x[:, None] + local[None, :] - means2d[gaussian, 0:1])[:, None, :]  # (P, 1, T)
    dy = (pair_tile_y[:, None] + local[None, :] - means2d[gaussian, 1:2])[:, :, None]  # (P, T, 1)
    conic = projected.conics.reshape(-1, 3)[chosen][gaussian]
    a, b, c = (conic[:, i, None, None] for i in range(3))
    sigma = (0.5 * a * dx * dx + 0.5 * c * dy * dy + b * dx * dy).reshape(-1, pixels_per_tile)
    opacity = projected.opacities.reshape(-1)[chosen][gaussian]
    alpha = (opacity[:, None] * torch.exp(-sigma)).clamp_max(MAX_ALPHA)
    alpha = torch.where((sigma >= 0) & (alpha >= ALPHA_THRESHOLD), alpha, torch.zeros_like(alpha))

    # Segmented front-to-back transmittance. float64 keeps the running sum over all tiles
    # exact enough that subtracting a tile's starting value leaves a precise per-tile sum.
    log_keep = torch.log1p(-alpha)
    running = torch.cumsum(log_keep, dim=0, dtype=torch.float64)
    is_first = torch.ones_like(tile, dtype=torch.bool)
    is_first[1:] = tile[1:] != tile[:-1]
    segment_start = torch.cummax(torch.where(is_first, torch.arange(len(tile)), 0), dim=0).values
    before_segment = running[segment_start] - log_keep[segment_start]
    inclusive = (running - before_segment).to(alpha.dtype)  # log T after each pair
    weights = torch.where(
        inclusive > LOG_TRANSMITTANCE_THRESHOLD, alpha * torch.exp(inclusive - log_keep), torch.zeros_like(alpha)
    )

    pair_features = features.reshape(-1, channels)[chosen][gaussian]  # (P, D)
    tile_images = features.new_zeros(channels, tile_count, pixels_per_tile)
    for channel in range(channels):
        tile_images[channel].index_add_(0, tile, weights * pair_features[:, channel : channel + 1])
    tile_alphas = features.new_zeros(tile_count, pixels_per_tile).index_add_(0, tile, weights)

    def untile(values: torch.Tensor) -> torch.Tensor:
        grid = values.reshape(batch, tiles_y, tiles_x, tile_size, tile_size, -1).permute(0, 1, 3, 2, 4, 5)
        return grid.reshape(batch, tiles_y * tile_size, tiles_x * tile_size, -1)[:, :height, :width]

    return untile(tile_images.permute(1, 2, 0)), untile(tile_alphas)[..., 0]
