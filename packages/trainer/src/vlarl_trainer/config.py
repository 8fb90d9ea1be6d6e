"""The training configuration: one dataclass tree, filled from a Hydra recipe and overrides.

    cfg = load_config(["recipe=metaworld_10_ppo_openpi_tiny", "actor.lr=1e-4"])

Recipes live in ``vlarl_trainer/conf/recipe/<env>_<algo>_<policy>[_variant].yaml`` and
override the defaults below; an unknown key is an error naming it. ``validate`` checks
everything that can be checked before Ray starts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

CONFIG_MODULE = "vlarl_trainer.conf"
ALGORITHMS = ("ppo", "grpo")
LR_SCHEDULES = ("constant", "linear", "cosine")
STRATEGIES = ("ddp", "fsdp")


@dataclass
class EnvConfig:
    id: str = "vlarl/MetaWorld-MT10-v3"
    """A registered vlarl env id."""
    num_envs: int = 8
    """Training envs across all env workers and pipeline stages."""
    max_steps: int = 100
    """Env steps per rollout epoch (one episode per env); a multiple of action_chunk."""
    action_chunk: int = 5
    """Actions executed per policy call (C)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """gym.make keywords: obs_mode, image_size, horizon, reward_mode, ..."""


@dataclass
class PolicyConfig:
    name: str = "pi0"
    preset: str = "tiny"
    pretrained: str | None = None
    """A save_pretrained directory (e.g. an SFT checkpoint); None builds random weights."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Config fields passed to vlarl_policies.make (action_dim and state_dim are filled from the env)."""


@dataclass
class AlgorithmConfig:
    name: str = "ppo"
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: float | None = None
    value_clip: float | None = 0.2
    value_loss: str = "huber"
    huber_delta: float = 10.0
    value_coef: float = 1.0
    entropy_coef: float = 0.0
    logprob_level: str = "chunk"
    normalize_advantages: bool = True
    normalize_per_task: bool = False
    """PPO: normalize a multi-task batch's advantages with each task's own mean and std instead of the
    batch's, so every task's better-than-usual episodes weigh alike whatever the spread of its returns."""
    skip_unsolved_tasks: bool = False
    """PPO: a task none of whose episodes succeeded in this step adds nothing to the policy loss (its
    advantages are zero, the other tasks' are normalized without it); the critic still fits its returns.
    A task the policy cannot yet solve pays only for the shaped reward's progress terms, which pull the
    shared weights towards motions that have not led to a success."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before advantages and returns (the seeds' reward_coef): it keeps a
    dense simulator reward (MetaWorld pays up to 10 a step) in the value head's range."""
    length_normalized: bool = False
    """Weight every trajectory equally instead of every step (the seeds' loss_mask_sum mode)."""
    group_size: int = 8
    """GRPO: envs sharing one initial state."""
    score_range: list[float] | None = None
    """GRPO: keep groups whose mean score lies in [low, high] (drops all-fail/all-success groups)."""
    leave_one_out: bool = False


@dataclass
class RolloutConfig:
    rollout_epoch: int = 1
    """Episodes per env per training step."""
    pipeline_stage_num: int = 1
    """Env shards per env worker whose simulation overlaps the other shards' inference."""
    deterministic: bool = False
    """Deterministic actions in training rollouts (tests and debugging)."""


@dataclass
class ActorConfig:
    global_batch_size: int = 64
    """Chunk steps per optimizer step, across actor ranks."""
    micro_batch_size: int = 32
    update_epoch: int = 1
    lr: float = 1e-4
    value_lr: float = 1e-3
    weight_decay: float = 0.0
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    adam_eps: float = 1e-8
    clip_grad: float = 1.0
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    strategy: str = "ddp"
    offload: bool = False
    """Move parameters and optimizer state to CPU between training phases (GPU only)."""
    torch_threads: int | None = None
    """torch threads of the actor processes (None: runner.torch_threads). On CPU the env and rollout
    processes idle while the actor updates, so the update can take every core the others share."""


@dataclass
class ClusterConfig:
    address: str | None = None
    """None starts Ray embedded in this process; 'auto' or 'host:port' joins a `ray start` cluster."""
    num_cpus: int | None = None
    """CPUs of the embedded Ray (None: all)."""
    component_placement: dict[str, Any] = field(default_factory=dict)
    """Devices of env, rollout and actor processes, e.g. {"env,rollout,actor": 0} (every recipe sets it:
    dict defaults would merge with, not give way to, a recipe's placement)."""


@dataclass
class EvalConfig:
    interval: int = 0
    """Evaluate every N training steps (0: only before the first and after the last step)."""
    at_start: bool = True
    episodes_per_task: int = 5
    splits: list[str] = field(default_factory=lambda: ["test"])
    video: bool = False
    """Record one captioned mp4 per env worker and evaluation."""


@dataclass
class RunnerConfig:
    max_steps: int = 10
    """Training steps (rollout + update)."""
    seed: int = 0
    output_dir: str = "runs"
    name: str | None = None
    """Run folder name under output_dir (default: the recipe name and the time)."""
    save_interval: int = 0
    """Checkpoint every N steps (0: only after the last step)."""
    logger: list[str] = field(default_factory=lambda: ["tensorboard"])
    """Any of tensorboard, wandb; metrics.jsonl is always written."""
    torch_threads: int = 1
    """torch threads per worker process."""
    progress: bool = True


@dataclass
class TrainConfig:
    recipe: str = ""
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    resume: str | None = None
    """A run directory to continue from its last checkpoint."""


def available_recipes() -> list[str]:
    folder = Path(__file__).parent / "conf" / "recipe"
    return sorted(p.stem for p in folder.glob("*.yaml"))


def load_config(overrides: list[str]) -> TrainConfig:
    """Compose ``recipe=<name>`` plus ``key=value`` overrides onto the schema."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    if not any(o.startswith("recipe=") or o.startswith("resume=") for o in overrides):
        raise ValueError(f"name a recipe: vlarl-train recipe=<name> ...; available: {available_recipes()}")
    recipe = next((o.split("=", 1)[1] for o in overrides if o.startswith("recipe=")), None)
    if recipe is not None and recipe not in available_recipes():
        raise ValueError(f"unknown recipe {recipe!r}; available: {available_recipes()}")
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="train_schema", node=TrainConfig)
    # A placement given on the command line replaces the recipe's whole mapping; merged, a
    # recipe's "env,rollout,actor" key and an override's "env" key would place env twice.
    placement_key = "cluster.component_placement="
    placement = [o[len(placement_key):] for o in overrides if o.startswith(placement_key)]
    overrides = [o for o in overrides if not o.startswith(placement_key)]
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base=None):
            composed = compose(config_name="config", overrides=list(overrides))
        if placement:
            composed.cluster.component_placement = OmegaConf.create(placement[-1])
        config = OmegaConf.to_object(composed)
    except (HydraException, MissingConfigException, OmegaConfBaseException) as error:
        raise ValueError(f"invalid configuration: {error}") from error
    config.recipe = recipe or config.recipe
    return config


def config_from_yaml(path: Path, overrides: list[str] = ()) -> TrainConfig:
    """A saved resolved config (a run's config.yaml) with ``key=value`` overrides on top."""
    schema = OmegaConf.structured(TrainConfig)
    merged = OmegaConf.merge(schema, OmegaConf.load(path), OmegaConf.from_dotlist(list(overrides)))
    return OmegaConf.to_object(merged)


def to_yaml(config: TrainConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(dataclasses.asdict(config)))
