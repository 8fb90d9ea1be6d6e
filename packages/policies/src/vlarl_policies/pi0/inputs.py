"""From an env observation batch to the model's stored inputs, and the checks on ``forward_inputs``.

The stored inputs are CPU tensors small enough to keep in a rollout buffer:

    images       uint8  [B, N, 3, S, S]   resized cameras (N = len(camera_keys))
    image_masks  bool   [B, N]            False for an optional camera the env did not provide
    tokens       int64  [B, L]            the prompt (pi0.5: with the discretized state)
    token_masks  bool   [B, L]
    states       float32 [B, max_state_dim]  normalized, zero-padded

``act`` adds ``chains`` float32 [B, K + 1, H, max_action_dim] and ``denoise_inds`` int64 [B, n].
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vlarl_policies.pi0.configuration_pi0 import Pi0Config
from vlarl_policies.processors import (
    StateNormalizer,
    as_tensor,
    build_prompts,
    check_states,
    check_task_descriptions,
    demonstration_actions,
    discretize_state,
    normalize_images,
    stack_cameras,
)
from vlarl_policies.tokenizer import PromptTokenizer

FORWARD_INPUT_KEYS = ("images", "image_masks", "tokens", "token_masks", "states", "chains", "denoise_inds",
                      "noise_levels")


class ObservationEncoder(nn.Module):
    """Validates an obs batch and turns it into stored inputs; owns the state statistics (buffers)."""

    def __init__(self, config: Pi0Config, tokenizer: PromptTokenizer) -> None:
        super().__init__()
        self.config = config
        self.tokenizer = tokenizer
        self.state_normalizer = StateNormalizer(config.state_dim)

    def set_state_stats(self, *, mean: Any = None, std: Any = None, q01: Any = None, q99: Any = None) -> None:
        """Either ``mean`` and ``std`` or ``q01`` and ``q99``, each of length state_dim."""
        if mean is not None and std is not None and q01 is None and q99 is None:
            self.state_normalizer.set_mean_std(mean, std)
        elif q01 is not None and q99 is not None and mean is None and std is None:
            self.state_normalizer.set_quantiles(q01, q99)
        else:
            raise ValueError("pass either mean= and std= or q01= and q99= (state statistics)")

    def forward(self, obs_batch: Mapping[str, Any]) -> dict[str, Tensor]:
        config = self.config
        if "states" not in obs_batch:
            raise ValueError(f"obs_batch lacks 'states'; it has keys {sorted(obs_batch)}")
        if "task_description" not in obs_batch:
            raise ValueError(f"obs_batch lacks 'task_description'; it has keys {sorted(obs_batch)}")
        states = as_tensor(obs_batch["states"], "states")
        check_states(states, config.state_dim)
        batch = states.shape[0]
        descriptions = check_task_descriptions(obs_batch["task_description"], batch)
        images, image_masks = stack_cameras(obs_batch, config.camera_keys, config.image_size, batch)
        normalized = self.state_normalizer(states.to(self.state_normalizer.offset.device)).cpu()
        bins = discretize_state(normalized) if config.state_in_prompt else None
        tokens, token_masks = self.tokenizer.encode_batch(build_prompts(descriptions, bins), config.max_token_len)
        return {
            "images": images,
            "image_masks": image_masks,
            "tokens": tokens,
            "token_masks": token_masks,
            "states": F.pad(normalized, (0, config.max_state_dim - config.state_dim)),
        }

    @staticmethod
    def pixels(images: Tensor, dtype: torch.dtype) -> Tensor:
        """Stored uint8 images [B, N, 3, S, S] -> model pixels in [-1, 1]."""
        return normalize_images(images, dtype)

    def target_actions(self, batch: Mapping[str, Any], batch_size: int) -> Tensor:
        """Demonstration ``actions`` float [B, H, A] -> float32 [B, H, max_action_dim] (zero-padded)."""
        config = self.config
        return F.pad(demonstration_actions(batch, batch_size, config.action_horizon, config.action_dim),
                     (0, config.max_action_dim - config.action_dim))


def check_forward_inputs(forward_inputs: Mapping[str, Tensor], config: Pi0Config) -> None:
    """``evaluate_actions`` input must be what ``act`` produced for this config: every key, matching shapes."""
    missing = [key for key in FORWARD_INPUT_KEYS if key not in forward_inputs]
    if missing:
        raise ValueError(f"forward_inputs lacks {missing}; expected keys {list(FORWARD_INPUT_KEYS)} from act()")
    batch = forward_inputs["states"].shape[0]
    expected_chain = (batch, config.num_steps + 1, config.action_horizon, config.max_action_dim)
    if tuple(forward_inputs["chains"].shape) != expected_chain:
        raise ValueError(f"forward_inputs['chains'] must have shape {list(expected_chain)} for this config, "
                         f"got {list(forward_inputs['chains'].shape)}")
    steps = forward_inputs["denoise_inds"]
    if steps.ndim != 2 or steps.shape[0] != batch:
        raise ValueError(f"forward_inputs['denoise_inds'] must have shape [B={batch}, n], got {list(steps.shape)}")
    levels = forward_inputs["noise_levels"]
    if tuple(levels.shape) != (batch,):
        raise ValueError(f"forward_inputs['noise_levels'] must have shape [B={batch}], got {list(levels.shape)}")
