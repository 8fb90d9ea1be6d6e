"""Configs of the flow-matching VLAs pi0 and pi0.5, and their named size presets.

The defaults are the published architecture (openpi's pi0 / pi0.5: SigLIP so400m/14 at 224 px,
Gemma 2B as the VLM, a Gemma 300M action expert). ``PRESETS`` adds a ``tiny`` size (about 2 M
parameters, 64 px images) that trains on a laptop CPU. RL fields mirror RLinf's OpenPI config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from vlarl_policies.base import PolicyConfig

NOISE_METHODS = ("flow_sde", "flow_noise", "flow_ode")
DTYPES = ("float32", "bfloat16")


@dataclass
class Pi0Config(PolicyConfig):
    """pi0: PaliGemma prefix (images + instruction), action expert with a state token and time MLP."""

    type: ClassVar[str] = "pi0"
    sampling_fields: ClassVar[tuple[str, ...]] = ("noise_level", "noise_anneal", "noise_params", "start_noise_scale")
    # pi0.5 switches these on: adaptive RMSNorm time conditioning and the state written into the prompt.
    adarms_expert: ClassVar[bool] = False
    state_in_prompt: ClassVar[bool] = False

    # Environment interface: A, S and the cameras read from obs_batch (the first is required).
    action_dim: int = 7
    state_dim: int = 8
    camera_keys: tuple[str, ...] = ("main_images", "wrist_images")

    # Action chunking: the model predicts H steps and the env executes the first C <= H.
    action_horizon: int = 50
    action_chunk: int = 5
    max_action_dim: int = 32
    max_state_dim: int = 32

    # Vision tower (SigLIP).
    image_size: int = 224
    patch_size: int = 14
    vision_width: int = 1152
    vision_depth: int = 27
    vision_mlp_dim: int = 4304
    vision_heads: int = 16

    # Language model (Gemma) and action expert (Gemma with another width, same depth and heads).
    vocab_size: int = 257152
    max_token_len: int = 48
    vlm_width: int = 2048
    vlm_mlp_dim: int = 16384
    depth: int = 18
    num_heads: int = 8
    num_kv_heads: int = 1
    head_dim: int = 256
    expert_width: int = 1024
    expert_mlp_dim: int = 4096
    dtype: str = "float32"

    # Flow matching: K Euler steps from noise at t = 1 to actions at t = 0; SFT samples t ~ Beta.
    num_steps: int = 10
    time_beta: tuple[float, float] = (1.5, 1.0)
    time_min_period: float = 4e-3
    time_max_period: float = 4.0

    # RL sampling and log-probabilities.
    noise_method: str = "flow_sde"
    noise_level: float = 0.5
    noise_anneal: bool = False
    noise_params: tuple[float, float, int] = (0.7, 0.3, 400)
    """flow_sde's noise level under ``noise_anneal`` (which replaces ``noise_level``): (start, end, steps),
    falling linearly from start to end over the first ``steps`` training steps, then held at end;
    wide exploration while the policy is far from the task, finer steps once it succeeds (RLinf's names
    and defaults)."""
    start_noise_scale: float = 1.0
    """Std of the flow's starting point in sampled chunks. 1 samples the distribution SFT learned; below 1
    draws closer to the deterministic chunk (0 starts at zero, as deterministic acting does), so that
    exploration comes from the noisy denoising steps alone."""
    noise_logvar_range: tuple[float, float] = (0.08, 0.16)
    noise_head_hidden: tuple[int, ...] = (128, 64)
    joint_logprob: bool = False

    # Critic.
    add_value_head: bool = True
    value_after_vlm: bool = False
    value_head_hidden: tuple[int, ...] = (512, 256, 128)
    detach_critic_input: bool = False

    # Fine-tuning: freeze the VLM, or train LoRA adapters on its language model.
    train_expert_only: bool = False
    lora_rank: int = 0
    lora_alpha: float = 16.0

    def __post_init__(self) -> None:
        positive = ("action_dim", "state_dim", "action_horizon", "action_chunk", "num_steps", "image_size",
                    "patch_size", "depth", "num_heads", "num_kv_heads", "head_dim", "max_token_len", "vocab_size")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.action_chunk > self.action_horizon:
            raise ValueError(f"action_chunk ({self.action_chunk}) must be <= action_horizon ({self.action_horizon})")
        if self.action_dim > self.max_action_dim:
            raise ValueError(f"action_dim ({self.action_dim}) must be <= max_action_dim ({self.max_action_dim})")
        if self.state_dim > self.max_state_dim:
            raise ValueError(f"state_dim ({self.state_dim}) must be <= max_state_dim ({self.max_state_dim})")
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size ({self.image_size}) must be a multiple of patch_size ({self.patch_size})")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if not self.camera_keys:
            raise ValueError("camera_keys must name at least one camera, e.g. ('main_images',)")
        if self.noise_method not in NOISE_METHODS:
            raise ValueError(f"noise_method must be one of {NOISE_METHODS}, got {self.noise_method!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.noise_level < 0:
            raise ValueError(f"noise_level must be >= 0, got {self.noise_level}")
        self._check_noise_anneal()
        if self.start_noise_scale < 0:
            raise ValueError(f"start_noise_scale must be >= 0, got {self.start_noise_scale}")
        if self.joint_logprob and self.start_noise_scale == 0:
            raise ValueError("joint_logprob scores the chain's starting point, which has no density at "
                             "start_noise_scale 0; set start_noise_scale > 0 or joint_logprob false")
        low, high = self.noise_logvar_range
        if not 0 < low <= high:
            raise ValueError(f"noise_logvar_range must be (min_std, max_std) with 0 < min <= max, got {(low, high)}")
        if self.train_expert_only and self.lora_rank > 0:
            raise ValueError("train_expert_only freezes the VLM and lora_rank > 0 trains adapters on it; choose one")

    def _check_noise_anneal(self) -> None:
        if len(self.noise_params) != 3:
            raise ValueError(f"noise_params must be (start, end, steps), got {self.noise_params!r}")
        start, end, steps = self.noise_params
        if start < 0 or end < 0 or steps <= 0 or steps != int(steps):
            raise ValueError(f"noise_params must be (start >= 0, end >= 0, whole steps > 0), got {self.noise_params!r}")
        if self.noise_anneal and self.noise_method != "flow_sde":
            raise ValueError(f"noise_anneal schedules flow_sde's noise level; noise_method is {self.noise_method!r}")

    @property
    def vlm_trainable(self) -> bool:
        """Whether any VLM parameter (full weights or LoRA adapters) receives gradients."""
        return not self.train_expert_only

    @property
    def num_image_tokens(self) -> int:
        return (self.image_size // self.patch_size) ** 2


@dataclass
class Pi05Config(Pi0Config):
    """pi0.5: adaRMSNorm time conditioning in the expert, the discretized state in the prompt."""

    type: ClassVar[str] = "pi05"
    adarms_expert: ClassVar[bool] = True
    state_in_prompt: ClassVar[bool] = True

    action_horizon: int = 10
    max_token_len: int = 200
    value_after_vlm: bool = True
    value_head_hidden: tuple[int, ...] = (1024, 512, 256)


_TINY: dict[str, Any] = {
    "camera_keys": ("main_images",),
    "action_horizon": 8,
    "action_chunk": 4,
    # Few padded action dims: each one is a velocity the small network must also learn.
    "max_action_dim": 8,
    "image_size": 64,
    "patch_size": 16,
    "vision_width": 96,
    "vision_depth": 2,
    "vision_mlp_dim": 192,
    "vision_heads": 4,
    "vocab_size": 512,
    "max_token_len": 24,
    "vlm_width": 128,
    "vlm_mlp_dim": 256,
    "depth": 3,
    "num_heads": 4,
    "num_kv_heads": 1,
    "head_dim": 32,
    "expert_width": 96,
    "expert_mlp_dim": 192,
    "num_steps": 4,
    "noise_head_hidden": (64, 32),
    "value_head_hidden": (64, 32),
}

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "pi0": {"base": {}, "tiny": dict(_TINY)},
    "pi05": {"base": {}, "tiny": {**_TINY, "max_token_len": 48}},
}
