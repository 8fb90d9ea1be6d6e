"""The two transformers of pi0: a PaliGemma-style VLM over the prefix and a Gemma action expert.

Prefix tokens (image patches, then the instruction) attend to each other bidirectionally and never
to the suffix, so the VLM runs once per observation and leaves a key/value cache. The expert's
suffix tokens (state and noisy actions) attend to that cache plus each other, layer by layer: the
two towers share depth, head count and head size, only their widths differ. Because the prefix
never sees the suffix, "prefix once, then suffix against the cache" is exactly the joint forward
pass of openpi, for sampling and for training alike; gradients flow into the VLM through the cache.

Shapes: B batch, P prefix length, S suffix length, W_v / W_e VLM / expert width, h heads,
g key/value heads, d head size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint
from transformers import GemmaConfig, GemmaModel, SiglipVisionConfig, SiglipVisionModel
from transformers.models.gemma.modeling_gemma import (
    GemmaAttention,
    GemmaDecoderLayer,
    GemmaRMSNorm,
    GemmaRotaryEmbedding,
    apply_rotary_pos_emb,
    repeat_kv,
)

from vlarl_policies.pi0.configuration_pi0 import Pi0Config


def vision_config(config: Pi0Config) -> SiglipVisionConfig:
    """SigLIP without its pooling head: PaliGemma reads every patch token."""
    return SiglipVisionConfig(
        hidden_size=config.vision_width,
        intermediate_size=config.vision_mlp_dim,
        num_hidden_layers=config.vision_depth,
        num_attention_heads=config.vision_heads,
        image_size=config.image_size,
        patch_size=config.patch_size,
        hidden_act="gelu_pytorch_tanh",
        vision_use_head=False,
        attn_implementation="sdpa",
    )


class SiglipTower(nn.Module):
    """SigLIP's vision model with its parameters under ``vision_model.``, as PaliGemma's checkpoints and
    transformers 4's ``SiglipVisionModel`` name them. transformers 5's ``SiglipVisionModel`` holds them at
    its top level, so there the model itself is this module's ``vision_model``: saved policies and
    published checkpoints load the same under either version."""

    def __init__(self, config: SiglipVisionConfig) -> None:
        super().__init__()
        model = SiglipVisionModel(config)
        self.vision_model = getattr(model, "vision_model", model)
        self._pretrained = [model]
        """transformers' model (in a list, so its parameters are not registered twice): its gradient
        checkpointing switch reaches ``vision_model``'s encoder."""

    def forward(self, pixel_values: Tensor):
        return self.vision_model(pixel_values=pixel_values)

    def gradient_checkpointing_enable(self, **kwargs) -> None:
        self._pretrained[0].gradient_checkpointing_enable(**kwargs)

    def gradient_checkpointing_disable(self) -> None:
        self._pretrained[0].gradient_checkpointing_disable()


def gemma_config(config: Pi0Config, width: int, mlp_dim: int, vocab_size: int) -> GemmaConfig:
    """A Gemma config of the shared depth and heads with the given width.

    Weights start with std 1 / sqrt(width): about Gemma's 0.02 at the published width 2048, and
    large enough at tiny widths for image tokens to reach the expert early in training.
    """
    return GemmaConfig(
        initializer_range=width**-0.5,
        vocab_size=vocab_size,
        hidden_size=width,
        intermediate_size=mlp_dim,
        num_hidden_layers=config.depth,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads,
        head_dim=config.head_dim,
        hidden_act="gelu_pytorch_tanh",
        hidden_activation="gelu_pytorch_tanh",
        attn_implementation="sdpa",
    )


@dataclass
class PrefixCache:
    """What the expert needs from the VLM: per-layer keys/values [B, g, P, d] after RoPE.

    pad_mask bool [B, P] marks real prefix tokens; hidden [B, P, W_v] is the VLM's normed output,
    kept only when a critic reads it.
    """

    keys: list[Tensor]
    values: list[Tensor]
    pad_mask: Tensor
    hidden: Tensor | None

    def repeat_interleave(self, repeats: int) -> PrefixCache:
        """Each batch row repeated ``repeats`` times, to evaluate several denoising steps per sample."""
        if repeats == 1:
            return self

        def expand(tensor: Tensor) -> Tensor:
            return tensor.repeat_interleave(repeats, dim=0)

        return PrefixCache(
            keys=[expand(k) for k in self.keys],
            values=[expand(v) for v in self.values],
            pad_mask=expand(self.pad_mask),
            hidden=None if self.hidden is None else expand(self.hidden),
        )


def project_qkv(attention: GemmaAttention, hidden: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Queries [B, h, T, d] and rotated keys / values [B, g, T, d] of one attention layer."""
    batch, length, _ = hidden.shape
    shape = (batch, length, -1, attention.head_dim)
    query = attention.q_proj(hidden).view(shape).transpose(1, 2)
    key = attention.k_proj(hidden).view(shape).transpose(1, 2)
    value = attention.v_proj(hidden).view(shape).transpose(1, 2)
    query, key = apply_rotary_pos_emb(query, key, cos, sin)
    return query, key, value


def attend(attention: GemmaAttention, query: Tensor, key: Tensor, value: Tensor, mask: Tensor) -> Tensor:
    """Scaled dot-product attention with grouped key/value heads; mask bool [B, 1, T, T_k] -> [B, T, h * d]."""
    groups = attention.num_key_value_groups
    output = F.scaled_dot_product_attention(query, repeat_kv(key, groups), repeat_kv(value, groups), attn_mask=mask)
    batch, _, length, _ = query.shape
    return attention.o_proj(output.transpose(1, 2).reshape(batch, length, -1))


def run_layer(owner: nn.Module, layer_function: Callable[..., Any], *args: Any) -> Any:
    """``layer_function(*args)``, recomputed in the backward pass instead of keeping its activations
    when ``owner`` checkpoints and is training with gradients (no_grad sampling has nothing to keep)."""
    if owner.gradient_checkpointing and owner.training and torch.is_grad_enabled():
        return checkpoint(layer_function, *args, use_reentrant=False)
    return layer_function(*args)


def prefix_keys_values(layer: GemmaDecoderLayer, hidden: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    """Keys and values [B, g, P, d] of one VLM layer, all a last layer without a critic has to give."""
    _, key, value = project_qkv(layer.self_attn, layer.input_layernorm(hidden), cos, sin)
    return key, value


def prefix_layer(layer: GemmaDecoderLayer, hidden: Tensor, cos: Tensor, sin: Tensor, mask: Tensor
                 ) -> tuple[Tensor, Tensor, Tensor]:
    """One VLM layer over the prefix: its output [B, P, W_v] and its keys / values [B, g, P, d]."""
    query, key, value = project_qkv(layer.self_attn, layer.input_layernorm(hidden), cos, sin)
    hidden = hidden + attend(layer.self_attn, query, key, value, mask)
    hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
    return hidden, key, value


class PaliGemmaPrefix(nn.Module):
    """SigLIP vision tower + linear projector + Gemma language model, run over the prefix only."""

    def __init__(self, config: Pi0Config) -> None:
        super().__init__()
        self.vision_tower = SiglipTower(vision_config(config))
        self.projector = nn.Linear(config.vision_width, config.vlm_width)
        self.language_model = GemmaModel(gemma_config(config, config.vlm_width, config.vlm_mlp_dim, config.vocab_size))
        self.embedding_scale = math.sqrt(config.vlm_width)
        self.gradient_checkpointing = False

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Recompute SigLIP's encoder layers (transformers' own switch) and the language model's layers
        (this module's loop) in the backward pass."""
        self.gradient_checkpointing = enabled
        if enabled:
            self.vision_tower.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            self.vision_tower.gradient_checkpointing_disable()

    def embed(self, pixels: Tensor, image_masks: Tensor, tokens: Tensor, token_masks: Tensor) -> tuple[Tensor, Tensor]:
        """Prefix embeddings [B, P, W_v] and pad mask [B, P] from pixels [B, N, 3, S, S] in [-1, 1] and tokens [B, L].

        Image tokens come first (camera by camera), then the instruction tokens scaled by sqrt(W_v)
        as Gemma scales its input embeddings; image features are not scaled.
        """
        batch, cameras = pixels.shape[:2]
        patches = self.vision_tower(pixel_values=pixels.flatten(0, 1)).last_hidden_state
        image_embeds = self.projector(patches).view(batch, cameras * patches.shape[1], -1)
        image_pad = image_masks.repeat_interleave(patches.shape[1], dim=1)
        text_embeds = self.language_model.embed_tokens(tokens) * self.embedding_scale
        embeds = torch.cat([image_embeds, text_embeds.to(image_embeds.dtype)], dim=1)
        return embeds, torch.cat([image_pad, token_masks], 1)

    def encode(self, embeds: Tensor, pad_mask: Tensor, keep_hidden: bool) -> PrefixCache:
        """Run the language model over the prefix and collect its key/value cache.

        Without ``keep_hidden`` the last layer stops after its keys and values: its attention output
        and MLP only matter to a critic that reads the VLM.
        """
        positions = torch.cumsum(pad_mask.long(), dim=1) - 1
        cos, sin = self.language_model.rotary_emb(embeds, positions)
        mask = pad_mask[:, None, None, :]
        hidden = embeds
        keys, values = [], []
        layers = self.language_model.layers
        for index, layer in enumerate(layers):
            if index == len(layers) - 1 and not keep_hidden:
                key, value = run_layer(self, prefix_keys_values, layer, hidden, cos, sin)
                return PrefixCache(keys + [key], values + [value], pad_mask, None)
            hidden, key, value = run_layer(self, prefix_layer, layer, hidden, cos, sin, mask)
            keys.append(key)
            values.append(value)
        return PrefixCache(keys, values, pad_mask, self.language_model.norm(hidden))


class AdaRMSNorm(nn.Module):
    """pi0.5's adaptive RMSNorm: a condition [B, C] sets per-channel scale, shift and a residual gate.

    ``dense`` starts at zero weight with bias (0, 0, 1), so at initialization the block is a plain
    pre-norm residual block and the time condition is learned from there.
    """

    def __init__(self, dim: int, cond_dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.dense = nn.Linear(cond_dim, 3 * dim)
        nn.init.zeros_(self.dense.weight)
        with torch.no_grad():
            self.dense.bias.zero_()
            self.dense.bias[2 * dim :] = 1.0

    def forward(self, x: Tensor, cond: Tensor) -> tuple[Tensor, Tensor]:
        """x [B, T, dim], cond [B, C] -> (modulated x [B, T, dim], gate [B, 1, dim])."""
        x_float = x.float()
        normed = x_float * torch.rsqrt(x_float.pow(2).mean(-1, keepdim=True) + self.eps)
        scale, shift, gate = self.dense(cond)[:, None, :].float().chunk(3, dim=-1)
        return (normed * (1.0 + scale) + shift).to(x.dtype), gate.to(x.dtype)


def apply_norm(norm: nn.Module, hidden: Tensor, cond: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """Gemma RMSNorm (no gate) or adaptive RMSNorm (with a gate), behind one call."""
    if isinstance(norm, AdaRMSNorm):
        return norm(hidden, cond)
    return norm(hidden), None


def gated_residual(residual: Tensor, update: Tensor, gate: Tensor | None) -> Tensor:
    return residual + update if gate is None else residual + update * gate


def expert_layer(layer: GemmaDecoderLayer, hidden: Tensor, prefix_key: Tensor, prefix_value: Tensor, cos: Tensor,
                 sin: Tensor, mask: Tensor, cond: Tensor | None) -> Tensor:
    """One expert layer: suffix tokens [B, S, W_e] attend to the layer's prefix keys / values and each other."""
    normed, gate = apply_norm(layer.input_layernorm, hidden, cond)
    query, key, value = project_qkv(layer.self_attn, normed, cos, sin)
    key = torch.cat([prefix_key.to(key.dtype), key], dim=2)
    value = torch.cat([prefix_value.to(value.dtype), value], dim=2)
    hidden = gated_residual(hidden, attend(layer.self_attn, query, key, value, mask), gate)
    normed, gate = apply_norm(layer.post_attention_layernorm, hidden, cond)
    return gated_residual(hidden, layer.mlp(normed), gate)


class ActionExpert(nn.Module):
    """Gemma decoder layers (no embedding table) whose suffix tokens attend to the VLM cache."""

    def __init__(self, config: Pi0Config) -> None:
        super().__init__()
        expert_config = gemma_config(config, config.expert_width, config.expert_mlp_dim, vocab_size=1)
        self.layers = nn.ModuleList(GemmaDecoderLayer(expert_config, index) for index in range(config.depth))
        self.norm: nn.Module = GemmaRMSNorm(config.expert_width, eps=expert_config.rms_norm_eps)
        if config.adarms_expert:
            width = config.expert_width
            for layer in self.layers:
                layer.input_layernorm = AdaRMSNorm(width, width, eps=expert_config.rms_norm_eps)
                layer.post_attention_layernorm = AdaRMSNorm(width, width, eps=expert_config.rms_norm_eps)
            self.norm = AdaRMSNorm(width, width, eps=expert_config.rms_norm_eps)
        self.rotary_emb = GemmaRotaryEmbedding(expert_config)
        self.gradient_checkpointing = False
        """Recompute each layer in the backward pass instead of keeping its activations."""

    def forward(self, cache: PrefixCache, embeds: Tensor, blocks: Tensor, cond: Tensor | None) -> Tensor:
        """Suffix outputs [B, S, W_e] for suffix embeddings [B, S, W_e].

        blocks int [S]: suffix token i sees suffix token j when blocks[j] <= blocks[i] (pi0's state
        token does not see the actions; action tokens see everything). Every suffix token sees
        every real prefix token. cond [B, W_e] drives the adaptive norms of pi0.5, None for pi0.
        """
        batch, length, _ = embeds.shape
        positions = cache.pad_mask.sum(dim=1, keepdim=True) + torch.arange(length, device=embeds.device)
        cos, sin = self.rotary_emb(embeds, positions)
        suffix_visible = (blocks[None, :] <= blocks[:, None]).expand(batch, length, length)
        prefix_visible = cache.pad_mask[:, None, :].expand(batch, length, cache.pad_mask.shape[1])
        mask = torch.cat([prefix_visible, suffix_visible], dim=2)[:, None]
        hidden = embeds
        for layer, prefix_key, prefix_value in zip(self.layers, cache.keys, cache.values, strict=True):
            hidden = run_layer(self, expert_layer, layer, hidden, prefix_key, prefix_value, cos, sin, mask, cond)
        return apply_norm(self.norm, hidden, cond)[0]
