"""Blending the ``vision`` split's overlay textures into a batch of camera images (torch).

``appearance.ImageOverlay`` says what each kind does; this is the arithmetic, on whatever
device the images are (ManiSkill's GPU simulation renders into CUDA tensors, and the images
stay there). One ``grid_sample`` call serves every sub-scene at once, whatever its kind: the
sampling grid and the blend weight differ per sub-scene, the code path does not. It imports
torch, not ManiSkill, so it is testable on its own.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from vlarl_envs.maniskill.put_on_plate.appearance import OVERLAY_TEXTURES


def texture_bank(size: int = 256, device: torch.device | str = "cpu") -> torch.Tensor:
    """``OVERLAY_TEXTURES`` as one float tensor (K, 3, size, size), values in [0, 255]."""
    images = np.stack([texture.image(size) for texture in OVERLAY_TEXTURES])
    return torch.as_tensor(images, device=device).permute(0, 3, 1, 2).float()


def foreground_boxes(foreground: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounding boxes of the true pixels of (N, H, W) masks.

    Returns:
        boxes: (N, 4) float, (x_min, y_min, x_max, y_max) in pixels, inclusive; the whole
            image where a mask is empty.
        empty: (N,) bool, masks without a true pixel.
    """
    _, height, width = foreground.shape
    rows, columns = foreground.any(dim=2), foreground.any(dim=1)
    empty = ~rows.any(dim=1)
    row_index = torch.arange(height, device=foreground.device)
    column_index = torch.arange(width, device=foreground.device)
    y_min = torch.where(rows, row_index, height).min(dim=1).values
    y_max = torch.where(rows, row_index, -1).max(dim=1).values
    x_min = torch.where(columns, column_index, width).min(dim=1).values
    x_max = torch.where(columns, column_index, -1).max(dim=1).values
    boxes = torch.stack([x_min, y_min, x_max, y_max], dim=1).float()
    whole = torch.tensor([0.0, 0.0, width - 1.0, height - 1.0], device=foreground.device)
    return torch.where(empty[:, None], whole, boxes), empty


def blend_overlays(
    rgb: torch.Tensor,
    foreground: torch.Tensor,
    textures: torch.Tensor,
    strength: torch.Tensor,
    whole_image: torch.Tensor,
) -> torch.Tensor:
    """Images with their overlay blended in; a sub-scene of strength 0 comes back unchanged.

    Args:
        rgb: (N, H, W, 3) uint8 images.
        foreground: (N, H, W) bool, the robot and the objects in each image.
        textures: (N, 3, S, S) float in [0, 255], each sub-scene's texture.
        strength: (N,) float, the blend weight of the texture.
        whole_image: (N,) bool, "noise" overlays (every pixel, a window of the texture at
            twice the image's size starting at the foreground's centre); otherwise "texture"
            (foreground pixels only, the texture stretched over the foreground's box).

    Returns:
        (N, H, W, 3) uint8.
    """
    count, height, width, _ = rgb.shape
    boxes, empty = foreground_boxes(foreground)
    x = torch.arange(width, device=rgb.device, dtype=torch.float32) + 0.5
    y = torch.arange(height, device=rgb.device, dtype=torch.float32) + 0.5
    x_min, y_min, x_max, y_max = (boxes[:, index, None] for index in range(4))
    # "texture": texture coordinate 0..1 spans the foreground's box.
    box_u = (x - x_min) / (x_max + 1 - x_min)
    box_v = (y - y_min) / (y_max + 1 - y_min)
    # "noise": the image is the window [centre, centre + size) of a texture twice its size.
    centre_x = torch.where(empty[:, None], 0.0, torch.floor((x_min + x_max) / 2))
    centre_y = torch.where(empty[:, None], 0.0, torch.floor((y_min + y_max) / 2))
    window_u = (x + centre_x) / (2 * width)
    window_v = (y + centre_y) / (2 * height)
    whole = whole_image[:, None]
    u = torch.where(whole, window_u, box_u)  # (N, W)
    v = torch.where(whole, window_v, box_v)  # (N, H)
    grid = torch.stack(
        [u[:, None, :].expand(count, height, width), v[:, :, None].expand(count, height, width)], dim=-1
    )
    sampled = F.grid_sample(textures, 2 * grid - 1, mode="bilinear", padding_mode="border", align_corners=False)
    sampled = sampled.permute(0, 2, 3, 1)
    mask = torch.where(whole_image[:, None, None], torch.ones_like(foreground), foreground)
    weight = strength.float()[:, None, None, None] * mask[..., None]
    blended = rgb.float() * (1 - weight) + sampled * weight
    return blended.round().clamp(0, 255).to(torch.uint8)
