"""The parts of the Prismatic VLM under OpenVLA, built from library classes with random weights.

- ``FusedVisionBackbone``: DINOv2 (``featurizer``) and SigLIP (``fused_featurizer``), timm's
  ``VisionTransformer`` created under their published model names with the config's sizes
  (``pretrained=False``: nothing is downloaded). Each image goes through both; the patch tokens of
  their second-to-last block (prefix tokens dropped) are concatenated along the channels.
- ``Projector``: fc1 -> GELU -> fc2 -> GELU -> fc3, from 4x the fused width down to the LM width.
- ``llama_config``: the transformers ``LlamaConfig`` of the language model.

The module and parameter names are those of the published checkpoints (``vision_backbone.featurizer``,
``projector.fc1``, ...), except that timm's LayerScale keeps its own name ``gamma``, which OpenVLA
renamed ``scale_factor``; ``checkpoint.py`` maps it.
"""

from __future__ import annotations

import timm
import torch
import torch.nn.functional as F
from timm.models.vision_transformer import VisionTransformer
from torch import Tensor, nn
from transformers import LlamaConfig

from vlarl_policies.openvla.configuration_openvla import OpenVLAConfig

DINO_MODEL = "vit_large_patch14_reg4_dinov2"
SIGLIP_MODEL = "vit_so400m_patch14_siglip_224"
# The pixel statistics each tower was pre-trained with (OpenVLA's image processor applies them).
DINO_MEAN, DINO_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
SIGLIP_MEAN, SIGLIP_STD = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)


def create_vit(model_name: str, config: OpenVLAConfig, width: int, depth: int, heads: int,
               **sizes: float) -> VisionTransformer:
    """A timm ViT of the class and recipe of ``model_name`` (registers, LayerScale, pooling) at the given size."""
    return timm.create_model(
        model_name,
        pretrained=False,
        num_classes=0,
        img_size=config.image_size,
        patch_size=config.patch_size,
        embed_dim=width,
        depth=depth,
        num_heads=heads,
        **sizes,
    )


def second_to_last_block_patches(vit: VisionTransformer, pixels: Tensor) -> Tensor:
    """Patch tokens [B, P, W] after the second-to-last block; the last block is not run."""
    return vit.forward_intermediates(
        pixels, indices=[len(vit.blocks) - 2], stop_early=True, output_fmt="NLC", intermediates_only=True
    )[0]


class FusedVisionBackbone(nn.Module):
    """DINOv2 + SigLIP features of each image: uint8 [B, 3, S, S] -> [B, P, W_dino + W_siglip]."""

    def __init__(self, config: OpenVLAConfig) -> None:
        super().__init__()
        self.featurizer = create_vit(DINO_MODEL, config, config.dino_width, config.dino_depth, config.dino_heads)
        self.fused_featurizer = create_vit(SIGLIP_MODEL, config, config.siglip_width, config.siglip_depth,
                                           config.siglip_heads, mlp_ratio=config.siglip_mlp_ratio)
        for name, (mean, std) in {"dino": (DINO_MEAN, DINO_STD), "siglip": (SIGLIP_MEAN, SIGLIP_STD)}.items():
            self.register_buffer(f"{name}_mean", torch.tensor(mean)[:, None, None], persistent=False)
            self.register_buffer(f"{name}_std", torch.tensor(std)[:, None, None], persistent=False)

    @property
    def embed_dim(self) -> int:
        return self.featurizer.embed_dim + self.fused_featurizer.embed_dim

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        self.featurizer.set_grad_checkpointing(enable)
        self.fused_featurizer.set_grad_checkpointing(enable)

    def forward(self, images: Tensor, dtype: torch.dtype) -> Tensor:
        pixels = images.float() / 255.0
        dino = ((pixels - self.dino_mean) / self.dino_std).to(dtype)
        siglip = ((pixels - self.siglip_mean) / self.siglip_std).to(dtype)
        return torch.cat([second_to_last_block_patches(self.featurizer, dino),
                          second_to_last_block_patches(self.fused_featurizer, siglip)], dim=-1)


class Projector(nn.Module):
    """Prismatic's fused-backbone projector: vision width -> 4x vision width -> LM width -> LM width."""

    def __init__(self, vision_dim: int, llm_dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(vision_dim, 4 * vision_dim)
        self.fc2 = nn.Linear(4 * vision_dim, llm_dim)
        self.fc3 = nn.Linear(llm_dim, llm_dim)

    def forward(self, patches: Tensor) -> Tensor:
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(patches)))))


class ProprioProjector(nn.Module):
    """OpenVLA-OFT's proprio projector: the normalized state [B, S] -> one LM token [B, W] (fc1, GELU, fc2)."""

    def __init__(self, state_dim: int, llm_dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(state_dim, llm_dim)
        self.fc2 = nn.Linear(llm_dim, llm_dim)

    def forward(self, states: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(states)))


def llama_config(config: OpenVLAConfig) -> LlamaConfig:
    """Llama 2 as OpenVLA's text config gives it (transformers defaults for what it leaves out)."""
    return LlamaConfig(
        vocab_size=config.vocab_size,
        hidden_size=config.llm_width,
        intermediate_size=config.llm_mlp_dim,
        num_hidden_layers=config.llm_depth,
        num_attention_heads=config.llm_heads,
        num_key_value_heads=config.llm_kv_heads,
        rms_norm_eps=config.rms_norm_eps,
        max_position_embeddings=config.max_position_embeddings,
        initializer_range=config.initializer_range,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
    )


def positions_from_mask(mask: Tensor) -> Tensor:
    """Position ids [B, T]: padding takes no position, so every row counts its real tokens from 0."""
    return (mask.long().cumsum(dim=1) - 1).clamp_min(0)


def bidirectional_mask(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """Additive 4-D attention mask [B, 1, T, T]: every token sees every real token, none sees padding."""
    blocked = torch.finfo(dtype).min
    keys = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, blocked)
    return keys[:, None, None, :].expand(-1, 1, mask.shape[1], -1)
