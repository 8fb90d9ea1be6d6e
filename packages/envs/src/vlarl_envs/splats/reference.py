"""A slow, obviously-correct compositor: one pixel at a time, one Gaussian at a time.

It exists to check ``vlarl_envs.splats.compositor.composite`` on small scenes; it shares
nothing with it but the projected Gaussians and the compositing constants.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from vlarl_envs.splats.compositor import MAX_ALPHA, TRANSMITTANCE_THRESHOLD
from vlarl_envs.splats.projection import ALPHA_THRESHOLD, ProjectedGaussians


def composite_per_pixel(
    projected: ProjectedGaussians, features: torch.Tensor, width: int, height: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same contract as ``composite``: (B, H, W, D) images and (B, H, W) alphas."""
    batch, _, channels = features.shape
    images = np.zeros((batch, height, width, channels))
    alphas = np.zeros((batch, height, width))
    means2d = projected.means2d.double().numpy()
    conics = projected.conics.double().numpy()
    opacities = projected.opacities.double().numpy()
    radii = projected.radii.numpy()
    values = features.double().numpy()
    for b in range(batch):
        visible = [n for n in range(len(means2d[b])) if radii[b, n, 0] > 0 and radii[b, n, 1] > 0]
        visible.sort(key=lambda n: float(projected.depths[b, n]))
        for row in range(height):
            for col in range(width):
                transmittance = 1.0
                for n in visible:
                    dx, dy = col + 0.5 - means2d[b, n, 0], row + 0.5 - means2d[b, n, 1]
                    a, off, c = conics[b, n]
                    sigma = 0.5 * (a * dx * dx + c * dy * dy) + off * dx * dy
                    alpha = min(MAX_ALPHA, opacities[b, n] * math.exp(-sigma))
                    if sigma < 0 or alpha < ALPHA_THRESHOLD:
                        continue
                    if transmittance * (1 - alpha) <= TRANSMITTANCE_THRESHOLD:
                        break
                    images[b, row, col] += transmittance * alpha * values[b, n]
                    transmittance *= 1 - alpha
                alphas[b, row, col] = 1 - transmittance
    return torch.from_numpy(images).float(), torch.from_numpy(alphas).float()
