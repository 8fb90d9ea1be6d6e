"""Configs of OpenVLA and OpenVLA-OFT, and their named size presets.

The defaults are the published architecture of ``openvla/openvla-7b``: DINOv2 ViT-L/14 with four
registers and SigLIP so400m/14 at 224 px (timm), a 3-layer GELU projector, Llama 2 7B with a
32,064-row vocabulary whose ids 31,744..31,999 are the 256 action bins. ``PRESETS`` adds a ``tiny``
size (about 5 M parameters, 64 px images) that trains on a laptop CPU. RL fields follow RLinf.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from vlarl_policies.base import PolicyConfig

DTYPES = ("float32", "bfloat16")
VALUE_TYPES = ("chunk_level", "action_level")


@dataclass
class OpenVLAConfig(PolicyConfig):
    """OpenVLA: the Prismatic VLM whose Llama decodes each action dimension as one of 256 bin tokens."""

    type: ClassVar[str] = "openvla"
    sampling_fields: ClassVar[tuple[str, ...]] = ("temperature", "top_k")

    # Environment interface: A, S (OpenVLA reads no state) and the cameras read from obs_batch.
    action_dim: int = 7
    state_dim: int = 8
    camera_keys: tuple[str, ...] = ("main_images",)
    action_chunk: int = 1
    """C: actions per step; OpenVLA decodes C * A tokens one after another (1 as published)."""

    # Vision: DINOv2 and SigLIP (timm) at one resolution; patch features of the second-to-last block.
    image_size: int = 224
    patch_size: int = 14
    dino_width: int = 1024
    dino_depth: int = 24
    dino_heads: int = 16
    siglip_width: int = 1152
    siglip_depth: int = 27
    siglip_heads: int = 16
    siglip_mlp_ratio: float = 3.7362

    # Language model (Llama) and its vocabulary.
    vocab_size: int = 32064
    """Rows of the embedding and the output head (the tokenizer's ids, padded to a multiple of 64)."""
    tokenizer_vocab_size: int = 32000
    """The tokenizer's own vocabulary; its last ``n_action_bins`` ids are the action bins."""
    n_action_bins: int = 256
    max_token_len: int = 48
    llm_width: int = 4096
    llm_mlp_dim: int = 11008
    llm_depth: int = 32
    llm_heads: int = 32
    llm_kv_heads: int = 32
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 2048
    initializer_range: float = 0.02
    """Std of the LM's random initial weights (Llama 2's 0.02; the tiny preset uses 1 / sqrt(width), which
    lets OFT's zero placeholders tell their positions apart early in training)."""
    dtype: str = "float32"

    # RL sampling: temperature and top-k over the action bins (RLinf's temperature_train and top_k).
    temperature: float = 1.0
    top_k: int = 0
    """Keep the k most likely bins; 0 keeps all 256."""

    # Critic: an MLP on the LM's last hidden state at the last prompt position.
    add_value_head: bool = True
    value_head_hidden: tuple[int, ...] = (512, 128)
    detach_critic_input: bool = False

    # Fine-tuning.
    lora_rank: int = 0
    """LoRA (peft) on the ViTs, the projector and the LM (RLinf's target modules); the rest frozen."""
    lora_alpha: float | None = None
    """LoRA scale numerator; None means equal to ``lora_rank`` (scale 1, as RLinf sets it)."""
    gradient_checkpointing: bool = False
    """Build the policy with ``set_gradient_checkpointing(True)``; the method switches it either way later."""

    # The published checkpoint's dataset statistics, for un-normalizing actions to robot units.
    norm_stats: dict[str, Any] | None = None
    unnorm_key: str | None = None

    def __post_init__(self) -> None:
        positive = ("action_dim", "state_dim", "action_chunk", "image_size", "patch_size", "dino_width",
                    "dino_depth", "dino_heads", "siglip_width", "siglip_depth", "siglip_heads", "vocab_size",
                    "tokenizer_vocab_size", "n_action_bins", "max_token_len", "llm_width", "llm_mlp_dim",
                    "llm_depth", "llm_heads", "llm_kv_heads")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size ({self.image_size}) must be a multiple of patch_size ({self.patch_size})")
        if self.dino_depth < 2 or self.siglip_depth < 2:
            raise ValueError(f"dino_depth ({self.dino_depth}) and siglip_depth ({self.siglip_depth}) must be >= 2: "
                             "the features come from the second-to-last block")
        if not self.n_action_bins <= self.tokenizer_vocab_size <= self.vocab_size:
            raise ValueError(f"need n_action_bins ({self.n_action_bins}) <= tokenizer_vocab_size "
                             f"({self.tokenizer_vocab_size}) <= vocab_size ({self.vocab_size})")
        if self.llm_heads % self.llm_kv_heads:
            raise ValueError(f"llm_heads ({self.llm_heads}) must be a multiple of llm_kv_heads ({self.llm_kv_heads})")
        if not self.camera_keys:
            raise ValueError("camera_keys must name at least one camera, e.g. ('main_images',)")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not 0 <= self.top_k <= self.n_action_bins:
            raise ValueError(f"top_k must be in [0, n_action_bins={self.n_action_bins}], got {self.top_k}")
        if self.lora_rank < 0:
            raise ValueError(f"lora_rank must be >= 0, got {self.lora_rank}")
        if self.unnorm_key is not None and self.unnorm_key not in (self.norm_stats or {}):
            raise ValueError(f"unnorm_key {self.unnorm_key!r} is not in norm_stats {sorted(self.norm_stats or {})}")

    @property
    def action_horizon(self) -> int:
        """H: the actions a demonstration sample holds for ``sft_loss``; the model predicts exactly C."""
        return self.action_chunk

    @property
    def action_token_begin(self) -> int:
        """The id of the first action-bin token; the bins run up to ``tokenizer_vocab_size`` (exclusive)."""
        return self.tokenizer_vocab_size - self.n_action_bins

    @property
    def num_patches(self) -> int:
        """Image tokens per camera (DINOv2 and SigLIP features of one patch share a token)."""
        return (self.image_size // self.patch_size) ** 2

    @property
    def num_action_tokens(self) -> int:
        return self.action_chunk * self.action_dim


@dataclass
class OpenVLAOFTConfig(OpenVLAConfig):
    """OpenVLA-OFT: C * A placeholder positions decoded in one bidirectional pass, optional proprio token."""

    type: ClassVar[str] = "openvla_oft"

    camera_keys: tuple[str, ...] = ("main_images", "wrist_images")
    """The wrist camera is a second image when the env sends one; a batch without it skips it."""
    action_chunk: int = 8
    use_proprio: bool = False
    """Project the normalized state into one token after the image patches (OFT's proprio projector)."""
    value_type: str = "chunk_level"
    """``chunk_level``: one value per chunk, values [B]; ``action_level``: one per chunk step, values [B, C]."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.value_type not in VALUE_TYPES:
            raise ValueError(f"value_type must be one of {VALUE_TYPES}, got {self.value_type!r}")


_TINY: dict[str, Any] = {
    "image_size": 64,
    "patch_size": 16,
    "dino_width": 96,
    "dino_depth": 3,
    "dino_heads": 3,
    "siglip_width": 96,
    "siglip_depth": 3,
    "siglip_heads": 3,
    "vocab_size": 1024,
    "tokenizer_vocab_size": 1024,
    "max_token_len": 40,
    "llm_width": 256,
    "llm_mlp_dim": 688,
    "llm_depth": 4,
    "llm_heads": 4,
    "llm_kv_heads": 4,
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 512,
    "initializer_range": 256**-0.5,
    "value_head_hidden": (64, 32),
}

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "openvla": {"base": {}, "tiny": dict(_TINY)},
    "openvla_oft": {"base": {}, "tiny": dict(_TINY)},
}
