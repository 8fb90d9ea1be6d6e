"""From an env observation batch to OpenVLA's stored inputs, and the checks on ``forward_inputs``.

The stored inputs are CPU tensors small enough to keep in a rollout buffer:

    images        uint8  [B, N, 3, S, S]  resized cameras (N = len(camera_keys))
    image_masks   bool   [B, N]           False for an optional camera the env did not send
    tokens        int64  [B, L]           BOS, left padding, then the prompt, so all prompts end in column L - 1
    token_masks   bool   [B, L]
    states        float32 [B, S]          normalized state (OpenVLA-OFT only)

``act`` adds ``action_tokens`` int64 [B, C, A]: the vocabulary ids of the sampled action bins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from torch import Tensor, nn

from vlarl_policies.openvla.configuration_openvla import OpenVLAConfig
from vlarl_policies.processors import (
    StateNormalizer,
    as_tensor,
    check_states,
    check_task_descriptions,
    clean_instruction,
    demonstration_actions,
    stack_cameras,
)
from vlarl_policies.tokenizer import PromptTokenizer

OBSERVATION_KEYS = ("images", "image_masks", "tokens", "token_masks")


def build_prompts(task_descriptions: Sequence[str]) -> list[str]:
    """OpenVLA's prompt, lower-cased as it was trained. The trailing space makes the Llama tokenizer end
    the prompt with the empty token (id 29871) that OpenVLA and RLinf put after "Out:"."""
    return [f"In: What action should the robot take to {clean_instruction(text).lower()}?\nOut: "
            for text in task_descriptions]


class ObservationEncoder(nn.Module):
    """Validates an obs batch and turns it into stored inputs; owns the state statistics (buffers) when
    the policy reads the state."""

    def __init__(self, config: OpenVLAConfig, tokenizer: PromptTokenizer, reads_states: bool) -> None:
        super().__init__()
        self.config = config
        self.tokenizer = tokenizer
        self.state_normalizer = StateNormalizer(config.state_dim) if reads_states else None

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys this encoder writes."""
        return OBSERVATION_KEYS + (("states",) if self.state_normalizer is not None else ())

    def set_state_stats(self, *, mean: Any = None, std: Any = None, q01: Any = None, q99: Any = None) -> None:
        """Either ``mean`` and ``std`` or ``q01`` and ``q99`` (OFT's proprio normalization), each of length
        state_dim; a policy that reads no state accepts and ignores them."""
        if mean is not None and std is not None and q01 is None and q99 is None:
            if self.state_normalizer is not None:
                self.state_normalizer.set_mean_std(mean, std)
        elif q01 is not None and q99 is not None and mean is None and std is None:
            if self.state_normalizer is not None:
                self.state_normalizer.set_quantiles(q01, q99)
        else:
            raise ValueError("pass either mean= and std= or q01= and q99= (state statistics)")

    def forward(self, obs_batch: Mapping[str, Any]) -> dict[str, Tensor]:
        config = self.config
        if "task_description" not in obs_batch:
            raise ValueError(f"obs_batch lacks 'task_description'; it has keys {sorted(obs_batch)}")
        first_camera = config.camera_keys[0]
        if first_camera not in obs_batch:
            raise ValueError(f"obs_batch lacks the required camera {first_camera!r}; it has keys {sorted(obs_batch)}")
        batch = len(obs_batch[first_camera])
        descriptions = check_task_descriptions(obs_batch["task_description"], batch)
        images, image_masks = stack_cameras(obs_batch, config.camera_keys, config.image_size, batch)
        tokens, token_masks = self.tokenizer.encode_batch(build_prompts(descriptions), config.max_token_len,
                                                          padding_side="left")
        inputs = {"images": images, "image_masks": image_masks, "tokens": tokens, "token_masks": token_masks}
        if self.state_normalizer is not None:
            if "states" not in obs_batch:
                raise ValueError(f"obs_batch lacks 'states'; it has keys {sorted(obs_batch)}")
            states = as_tensor(obs_batch["states"], "states")
            check_states(states, config.state_dim)
            if states.shape[0] != batch:
                raise ValueError(f"obs_batch['states'] has {states.shape[0]} rows, {first_camera!r} has {batch}")
            inputs["states"] = self.state_normalizer(states.to(self.state_normalizer.offset.device)).cpu()
        return inputs

    def target_actions(self, batch: Mapping[str, Any], batch_size: int) -> Tensor:
        """Demonstration ``actions`` float [B, C, A], normalized to [-1, 1] -> float32 [B, C, A]."""
        config = self.config
        return demonstration_actions(batch, batch_size, config.action_horizon, config.action_dim)


def check_forward_inputs(forward_inputs: Mapping[str, Tensor], keys: Sequence[str], config: OpenVLAConfig) -> None:
    """``evaluate_actions`` input must be what ``act`` produced for this config: every key, matching shapes."""
    missing = [key for key in keys if key not in forward_inputs]
    if missing:
        raise ValueError(f"forward_inputs lacks {missing}; expected keys {list(keys)} from act()")
    batch = forward_inputs["tokens"].shape[0]
    expected = {
        "tokens": (batch, config.max_token_len),
        "token_masks": (batch, config.max_token_len),
        "image_masks": (batch, len(config.camera_keys)),
        "action_tokens": (batch, config.action_chunk, config.action_dim),
    }
    for key, shape in expected.items():
        if tuple(forward_inputs[key].shape) != shape:
            raise ValueError(f"forward_inputs[{key!r}] must have shape {list(shape)} for this config, "
                             f"got {list(forward_inputs[key].shape)}")
