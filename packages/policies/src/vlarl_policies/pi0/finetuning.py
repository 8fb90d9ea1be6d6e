"""What RL fine-tuning trains: the whole model, the expert only (frozen VLM), or LoRA on the VLM."""

from __future__ import annotations

from peft import LoraConfig, inject_adapter_in_model
from torch import nn

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def freeze_vlm(vlm: nn.Module) -> None:
    """train_expert_only: no VLM parameter (vision tower, projector, language model) gets gradients."""
    vlm.requires_grad_(False)


def apply_lora(vlm: nn.Module, rank: int, alpha: float) -> None:
    """Freeze the VLM and add rank-``rank`` LoRA adapters to every projection of its language model.

    Adapters have no dropout, so ``act`` and ``evaluate_actions`` see the same function in train mode.
    """
    vlm.requires_grad_(False)
    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=list(LORA_TARGETS))
    inject_adapter_in_model(config, vlm.language_model)
    for name, parameter in vlm.language_model.named_parameters():
        parameter.requires_grad_("lora_" in name)
