"""Weights as a published checkpoint stores them, for ``save_published`` of each policy family.

A published checkpoint has no LoRA adapters: fine-tuning merges them (OFT's merged checkpoints,
openpi's). ``merged_weights`` does the same to a policy in place.
"""

from __future__ import annotations

from peft.tuners.lora import LoraLayer
from torch import Tensor, nn


def merged_weights(policy: nn.Module) -> dict[str, Tensor]:
    """The policy's state dict with every LoRA adapter merged into its base layer (peft's ``merge``,
    done in place: the policy keeps computing the same function), under the base layers' own names,
    adapters left out, as contiguous CPU tensors that safetensors can write."""
    for module in policy.modules():
        if isinstance(module, LoraLayer) and not module.merged:
            module.merge()
    return {key.replace(".base_layer.", "."): value.detach().to("cpu").contiguous().clone()
            for key, value in policy.state_dict().items() if ".lora_" not in key}
