"""Observation processing that belongs to the policy: validation, image resize, state normalization, prompts.

The input is the env contract with a batch axis: ``main_images`` uint8 [B, H, W, 3], optional
``wrist_images`` uint8 [B, H, W, 3], ``states`` float32 [B, S] and ``task_description`` a list or
tuple of B strings. Arrays may be numpy arrays or torch tensors. Anything else raises ValueError
naming the key, what was expected and what came.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

STATE_BINS = 256


def as_tensor(value: Any, key: str) -> Tensor:
    """A numpy array or tensor as a CPU-or-device tensor; other types raise ValueError.

    Read-only arrays (those Ray hands over from its object store) are copied: torch cannot
    share their memory without risking writes into the store."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        if not value.flags.writeable:
            return torch.from_numpy(np.array(value, order="C"))
        return torch.from_numpy(np.ascontiguousarray(value))
    raise ValueError(f"obs_batch[{key!r}] must be a numpy array or torch tensor, got {type(value).__name__}")


def demonstration_actions(batch: Mapping[str, Any], batch_size: int, horizon: int, action_dim: int) -> Tensor:
    """An SFT batch's ``actions``: float [B, H, A] of the expected sizes, as float32; anything else raises
    ValueError naming the shape expected and the one that came."""
    if "actions" not in batch:
        raise ValueError(f"an SFT batch needs 'actions' [B, H, A]; it has keys {sorted(batch)}")
    actions = as_tensor(batch["actions"], "actions")
    expected = (batch_size, horizon, action_dim)
    if not actions.is_floating_point() or tuple(actions.shape) != expected:
        raise ValueError(f"batch['actions'] must be float [B, H, A] = {list(expected)}, "
                         f"got {actions.dtype} {list(actions.shape)}")
    return actions.float()


def check_images(images: Tensor, key: str, batch_size: int) -> None:
    """Images must be uint8 [B, H, W, 3] with the batch size of the other keys."""
    if images.dtype != torch.uint8:
        raise ValueError(f"obs_batch[{key!r}] must have dtype uint8, got {images.dtype}")
    if images.ndim != 4 or images.shape[-1] != 3 or images.shape[0] != batch_size:
        raise ValueError(f"obs_batch[{key!r}] must have shape [B={batch_size}, H, W, 3], got {tuple(images.shape)}")


def check_states(states: Tensor, state_dim: int) -> None:
    """States must be a floating tensor [B, state_dim] without NaN or inf."""
    if not states.is_floating_point():
        raise ValueError(f"obs_batch['states'] must be floating point (float32), got {states.dtype}")
    if states.ndim != 2 or states.shape[1] != state_dim:
        raise ValueError(
            f"obs_batch['states'] must have shape [B, {state_dim}] (the policy's state_dim), got {tuple(states.shape)}"
        )
    if not torch.isfinite(states).all():
        raise ValueError("obs_batch['states'] contains NaN or inf")


def check_task_descriptions(descriptions: Any, batch_size: int) -> list[str]:
    """``task_description`` must be a list or tuple of B strings."""
    if isinstance(descriptions, str) or not isinstance(descriptions, Sequence):
        raise ValueError(
            f"obs_batch['task_description'] must be a list or tuple of {batch_size} str, "
            f"got {type(descriptions).__name__}"
        )
    if len(descriptions) != batch_size or not all(isinstance(d, str) for d in descriptions):
        raise ValueError(
            f"obs_batch['task_description'] must hold {batch_size} str (one per states row), got {list(descriptions)!r}"
        )
    return list(descriptions)


def resize_with_pad(images: Tensor, size: int) -> Tensor:
    """uint8 [B, H, W, 3] -> uint8 [B, 3, size, size]: aspect-preserving bilinear resize, black padding.

    The result stays uint8 so that ``forward_inputs`` store images compactly and ``evaluate_actions`` sees
    exactly the pixels ``act`` saw.
    """
    channels_first = images.permute(0, 3, 1, 2)
    height, width = images.shape[1:3]
    if height == size and width == size:
        return channels_first.contiguous()
    scale = size / max(height, width)
    new_height, new_width = max(1, round(height * scale)), max(1, round(width * scale))
    resized = F.interpolate(
        channels_first.float(), size=(new_height, new_width), mode="bilinear", align_corners=False, antialias=True
    )
    resized = resized.round().clamp(0, 255).to(torch.uint8)
    top, left = (size - new_height) // 2, (size - new_width) // 2
    padded = torch.zeros((images.shape[0], 3, size, size), dtype=torch.uint8, device=images.device)
    padded[:, :, top : top + new_height, left : left + new_width] = resized
    return padded


def normalize_images(images: Tensor, dtype: torch.dtype) -> Tensor:
    """uint8 pixels -> floats in [-1, 1], the range SigLIP expects."""
    return images.to(dtype) / 127.5 - 1.0


class StateNormalizer(nn.Module):
    """``(states - offset) / scale`` with statistics stored as buffers, so they travel with the weights.

    Set either from mean/std (z-score) or from the 1st/99th percentiles (maps them to -1 and 1, the
    convention of pi0.5's discretized state). Starts as the identity.
    """

    def __init__(self, state_dim: int) -> None:
        super().__init__()
        self.register_buffer("offset", torch.zeros(state_dim))
        self.register_buffer("scale", torch.ones(state_dim))

    def set_mean_std(self, mean: Sequence[float] | Tensor, std: Sequence[float] | Tensor) -> None:
        self._set(torch.as_tensor(mean, dtype=torch.float32), torch.as_tensor(std, dtype=torch.float32))

    def set_quantiles(self, q01: Sequence[float] | Tensor, q99: Sequence[float] | Tensor) -> None:
        low, high = torch.as_tensor(q01, dtype=torch.float32), torch.as_tensor(q99, dtype=torch.float32)
        self._set((low + high) / 2, (high - low) / 2)

    def _set(self, offset: Tensor, scale: Tensor) -> None:
        expected = tuple(self.offset.shape)
        if tuple(offset.shape) != expected or tuple(scale.shape) != expected:
            raise ValueError(
                f"state statistics must have shape {expected}, got {tuple(offset.shape)} and {tuple(scale.shape)}"
            )
        self.offset.copy_(offset)
        self.scale.copy_(scale.clamp_min(1e-6))

    def forward(self, states: Tensor) -> Tensor:
        return (states.float() - self.offset) / self.scale


def discretize_state(normalized: Tensor) -> Tensor:
    """States normalized to [-1, 1] -> int64 bins in [0, 255] (values outside are clipped)."""
    bins = torch.floor((normalized.clamp(-1.0, 1.0) + 1.0) / 2.0 * STATE_BINS)
    return bins.clamp(0, STATE_BINS - 1).long()


def clean_instruction(text: str) -> str:
    """The instruction as PaliGemma prompts see it: stripped, underscores and newlines as spaces."""
    return text.strip().replace("_", " ").replace("\n", " ")


def build_prompts(task_descriptions: Sequence[str], state_bins: Tensor | None) -> list[str]:
    """pi0 prompts (``instruction\\n``) or, with ``state_bins`` [B, S], pi0.5 prompts with the state in text."""
    if state_bins is None:
        return [clean_instruction(text) + "\n" for text in task_descriptions]
    return [
        f"Task: {clean_instruction(text)}, State: {' '.join(str(int(b)) for b in row)};\nAction: "
        for text, row in zip(task_descriptions, state_bins.tolist(), strict=True)
    ]


def stack_cameras(obs_batch: Mapping[str, Any], camera_keys: Sequence[str], size: int, batch_size: int
                  ) -> tuple[Tensor, Tensor]:
    """Resize every configured camera; a missing optional camera becomes a black, masked-out image.

    Returns images uint8 [B, N, 3, size, size] and image_masks bool [B, N]. The first camera key is
    required; the others (e.g. ``wrist_images``) may be absent.
    """
    images, masks = [], []
    for index, key in enumerate(camera_keys):
        if key not in obs_batch:
            if index == 0:
                raise ValueError(f"obs_batch lacks the required camera {key!r}; it has keys {sorted(obs_batch)}")
            images.append(torch.zeros((batch_size, 3, size, size), dtype=torch.uint8))
            masks.append(torch.zeros(batch_size, dtype=torch.bool))
            continue
        camera = as_tensor(obs_batch[key], key)
        check_images(camera, key, batch_size)
        images.append(resize_with_pad(camera.cpu(), size))
        masks.append(torch.ones(batch_size, dtype=torch.bool))
    return torch.stack(images, dim=1), torch.stack(masks, dim=1)
