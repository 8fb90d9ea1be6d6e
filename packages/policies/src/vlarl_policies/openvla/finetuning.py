"""What RL fine-tuning trains in OpenVLA: everything, or LoRA adapters on the VLA (RLinf's recipe: rank 32).

RLinf wraps the whole OpenVLA in peft with these target names: timm's ``qkv``, ``proj``, ``fc1``,
``fc2`` (and SigLIP's pooling ``q`` / ``kv``), the projector's ``fc1``..``fc3``, the Llama
projections and ``lm_head``. Here the same names are matched inside the three VLA modules only, so
the RL heads (value head, proprio projector) stay outside LoRA and are trained in full.
"""

from __future__ import annotations

from peft import LoraConfig, inject_adapter_in_model
from torch import nn

VISION_TARGETS = ("qkv", "proj", "fc1", "fc2", "q", "kv")
PROJECTOR_TARGETS = ("fc1", "fc2", "fc3")
LANGUAGE_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")


def apply_lora(vision_backbone: nn.Module, projector: nn.Module, language_model: nn.Module,
               rank: int, alpha: float) -> None:
    """Freeze the VLA and add rank-``rank`` adapters to its linear (and patch-embedding) layers.

    Adapters have no dropout, so ``act`` and ``evaluate_actions`` see the same function in train mode; their
    B matrices start at zero, so the model's function is unchanged until training moves them.
    """
    for module, targets in ((vision_backbone, VISION_TARGETS), (projector, PROJECTOR_TARGETS),
                            (language_model, LANGUAGE_TARGETS)):
        module.requires_grad_(False)
        config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=list(targets))
        inject_adapter_in_model(config, module)
        for name, parameter in module.named_parameters():
            parameter.requires_grad_("lora_" in name)
