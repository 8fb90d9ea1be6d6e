"""OpenVLA-OFT as an RL policy: the whole chunk in one forward pass, as in RLinf's RL variant.

After the prompt come C * A placeholder positions whose input embeddings are zero; the language
model attends bidirectionally (OFT trains Llama without the causal mask), and position i - 1 gives
the logits of placeholder i's action token, as OFT and RLinf read them. Each token is an
independent categorical over the 256 bins, so ``act`` and ``evaluate_actions`` run the very same pass: one
samples from it, the other scores the stored tokens. Differences to OpenVLA besides that:

- the normalized state enters as one token after the image patches (``use_proprio``, OFT's proprio
  projector), and the wrist camera as a second image when the env sends one;
- the value head reads the same last prompt position and gives one value per chunk (values [B]) or
  one per chunk step (``value_type="action_level"``, values [B, C]).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor

from vlarl_policies.openvla import action_tokens
from vlarl_policies.openvla.configuration_openvla import PRESETS, OpenVLAOFTConfig
from vlarl_policies.openvla.modeling_openvla import OpenVLAPolicy
from vlarl_policies.openvla.prismatic import ProprioProjector, bidirectional_mask, positions_from_mask
from vlarl_policies.sampling import Generators


class OpenVLAOFTPolicy(OpenVLAPolicy):
    """OpenVLA-OFT: parallel decoding of C * A action tokens, optional proprio token and wrist camera."""

    name: ClassVar[str] = "openvla_oft"
    config_class: ClassVar[type[OpenVLAOFTConfig]] = OpenVLAOFTConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = PRESETS["openvla_oft"]
    reads_states: ClassVar[bool] = True
    config: OpenVLAOFTConfig

    @property
    def values_per_sample(self) -> int:
        """1 (values [B]) for ``chunk_level``, C (values [B, C]) for ``action_level``."""
        return self.config.action_chunk if self.config.value_type == "action_level" else 1

    def build_state_input(self) -> None:
        self.proprio_projector = (ProprioProjector(self.config.state_dim, self.config.llm_width)
                                  if self.config.use_proprio else None)

    def state_tokens(self, inputs: Mapping[str, Tensor]) -> list[tuple[Tensor, Tensor]]:
        """The proprio token [B, 1, W] under ``use_proprio``."""
        if self.proprio_projector is None:
            return []
        states = inputs["states"].to(self.model_dtype)
        token = self.proprio_projector(states)[:, None]
        return [(token, torch.ones(token.shape[:2], dtype=torch.bool, device=token.device))]

    def hidden_states(self, embeds: Tensor, mask: Tensor) -> Tensor:
        """The LM's final hidden states [B, T, W] with bidirectional attention over the real tokens."""
        return self.language_model.model(
            inputs_embeds=embeds, attention_mask=bidirectional_mask(mask, embeds.dtype),
            position_ids=positions_from_mask(mask), use_cache=False,
        ).last_hidden_state

    def action_hidden(self, inputs: Mapping[str, Tensor], token_ids: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Hidden states [B, C * A, W] that predict the C * A action tokens, and the prompt's last one [B, W].

        The tokens themselves are never input (placeholders are zero), so ``token_ids`` is not read.
        """
        prefix, prefix_mask = self.prefix(inputs)
        count = self.config.num_action_tokens
        placeholders = prefix.new_zeros(prefix.shape[0], count, prefix.shape[2])
        mask = torch.cat([prefix_mask, prefix_mask.new_ones(prefix.shape[0], count)], dim=1)
        hidden = self.hidden_states(torch.cat([prefix, placeholders], dim=1), mask)
        prompt_end = prefix.shape[1] - 1
        return hidden[:, prompt_end: prompt_end + count], hidden[:, prompt_end]

    def sample_bins(self, inputs: Mapping[str, Tensor], deterministic: bool, generator: Generators
                    ) -> tuple[Tensor, Tensor, Tensor]:
        """Bins [B, C * A], their log-probs [B, C * A] and the prompt's last hidden state [B, W], all drawn
        independently from one forward pass."""
        hidden, prompt_end = self.action_hidden(inputs)
        log_probs = self.bin_log_probs(hidden)
        bins = log_probs.argmax(dim=-1) if deterministic else action_tokens.sample_bins(log_probs, generator)
        return bins, log_probs.gather(-1, bins[..., None]).squeeze(-1), prompt_end
