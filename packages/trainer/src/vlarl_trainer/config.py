"""The one configuration tree of every vlarl command, filled from a Hydra recipe and overrides.

    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny", "actor.lr=1e-4"])

vlarl-collect, vlarl-sft, vlarl-train, vlarl-eval and vlarl-main-job compose the same tree:
``recipe=<name>`` (``vlarl_trainer/conf/recipe/<env>_<algo>_<policy>[_variant].yaml``) picks the env,
policy and algorithm, ``job=<size>`` (``conf/job/``) the main job's stage sizes, and ``key=value``
overrides the rest. Each command reads the sections it needs, so a setting has one name everywhere:
the SFT stage trains ``policy.*`` with ``runner.seed`` and ``runner.torch_threads``, the same
policy the RL stage then loads. An unknown key is an error naming it; ``rl.validation.validate``
checks everything that can be checked before Ray starts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

CONFIG_MODULE = "vlarl_trainer.conf"
SCHEMA_NAME = "vlarl_schema"
ALGORITHMS = ("ppo", "grpo")
LR_SCHEDULES = ("constant", "linear", "cosine")
STRATEGIES = ("ddp", "fsdp")
PRECISIONS = ("fp32", "bf16-mixed", "bf16-pure")


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
    skip_no_signal: bool = True
    """A task group whose rewards are all one value (within ``vlarl_algos.SIGNAL_TOLERANCE``: a sparse reward
    without a success, say) adds nothing to the policy loss; the critic still fits its returns. PPO's group
    is the episodes of one task in one step, GRPO's its group of equal scores. A step in which no group has
    signal changes only ``value_head.*``. With a sparse 0/1 reward this drops exactly the tasks
    ``skip_unsolved_tasks`` drops; with a shaped or dense reward an unsolved task keeps its signal."""
    target_kl: float | None = None
    """Stop an update early once a global batch (one optimizer step, SB3's minibatch) measures, before its
    step and over every rank, an approximate KL from the rollout policy above this (SB3's ``target_kl``):
    that batch and every later one and epoch are skipped. None: never."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before advantages and returns (RLinf's reward_coef): it keeps a
    dense simulator reward (MetaWorld pays up to 10 a step) in the value head's range."""
    length_normalized: bool = False
    """Weight every trajectory equally instead of every step (RLinf's loss_mask_sum mode)."""
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
    tasks: list[str] | None = None
    """The tasks the training rollouts play, a subset of the env's (None: all of them); evaluations still
    score every task. On a CPU this spends a step's episodes on the tasks RL can move (those the SFT policy
    solves sometimes but not always) while the held-out score keeps every task."""
    task_repeats: dict[str, int] = field(default_factory=dict)
    """How many times a step deals the named training tasks for each time it deals the others (default 1):
    ``{door-open-v3: 2}`` gives door-open twice the episodes, so a step spends most of its episodes on the
    tasks RL can move while the others still play often enough to stay reinforced."""
    deterministic: bool = False
    """Deterministic actions in training rollouts (tests and debugging)."""
    video_interval: int = 0
    """Record a training rollout's mp4 (the first env of the first rollout epoch) every N steps; 0: never."""
    offload: bool = False
    """Move the rollout workers' policy to CPU while the actor updates (GPU only), so an actor collocated
    on the same device has its memory."""


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
    """How actor ranks share the model: ``ddp`` (a whole copy per rank) or ``fsdp`` (FSDP2: parameters,
    gradients and optimizer state sharded across ranks; on one rank too, where ``offload`` then keeps
    them in CPU memory)."""
    precision: str = "fp32"
    """``fp32``; ``bf16-mixed``: bf16 compute over fp32 master weights and optimizer state; ``bf16-pure``:
    weights, gradients and optimizer state in bf16."""
    gradient_checkpointing: bool = False
    """Recompute the policy's transformer layers in the backward pass instead of keeping their activations
    (``VLAPolicy.set_gradient_checkpointing``): pi0's SigLIP, Gemma and action expert, OpenVLA's ViTs and Llama."""
    offload: bool = False
    """Move parameters and optimizer state to CPU between training phases (GPU only). Under ``fsdp`` the
    shards, their gradients and the optimizer step stay on the CPU throughout (FSDP2's CPUOffloadPolicy)."""
    torch_threads: int | None = None
    """torch threads of the actor processes (None: runner.torch_threads). On CPU the env and rollout
    processes idle while the actor updates, so the update can take every core the others share."""


@dataclass
class ClusterConfig:
    address: str | None = None
    """None starts Ray embedded in this process; 'auto' or 'host:port' joins a `ray start` cluster."""
    num_cpus: int | None = None
    """CPUs of the embedded Ray (None: all)."""
    component_placement: dict[str, Any] = field(default_factory=lambda: {"env,rollout,actor": 0})
    """Devices of env, rollout and actor processes (rl.placement): by default one process of each on device
    0. A recipe's keys merge into this mapping, and a key naming fewer components wins, so a recipe's
    ``{env: 0-3, rollout: 4-7, actor: 0-7}`` replaces the default whole."""
    num_devices: int | None = None
    """The devices ``all`` in ``component_placement`` stands for (None: the GPUs torch sees on this
    machine, or 1 on a machine without GPUs, where every device is one CPU slot)."""
    start_timeout: float = 900.0
    """Seconds every worker process has to start and answer; a worker that does not stops the run."""
    call_timeout: float | None = None
    """Seconds the driver waits for one remote call before it stops the run with every worker's Python
    stacks (None: derived from the run's measured times, rl.cluster.Deadline: 1800 s until a rollout,
    update or evaluation has been timed, then 5 times the slowest, at least 300 s)."""
    max_env_restarts: int = 3
    """How often one rollout or evaluation replaces an env worker whose process died, replaying its
    episodes, before the run stops (0: the first death stops it)."""


EVAL_SAMPLING_MODES = ("deterministic", "sample", "zero_start")
"""The values of ``eval.sampling`` (``EvalConfig.sampling``)."""


@dataclass
class EvalConfig:
    interval: int = 0
    """Evaluate every N training steps (0: only before the first and after the last step)."""
    at_start: bool = True
    episodes_per_task: int = 5
    first_episode_id: int = 0
    """Evaluations play episode ids first_episode_id .. +episodes_per_task-1 of each task and split. A job's
    demonstrations take ``train`` ids from ``collect.first_episode_id`` (0), one per attempt, so a start past
    the last id tried scores ``train`` layouts SFT never saw (PutOnPlate: 100 after 100 of 100 attempts)."""
    splits: list[str] = field(default_factory=lambda: ["test"])
    video: bool = False
    """Record one captioned mp4 per env worker and evaluation."""
    env_id: str | None = None
    """Score on another env than ``env.id`` (None: the training env): ML45-test after ML45-train, CALVIN
    D after ABC, a policy trained on splats with another renderer. Its action and state sizes must match."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """gym.make keywords of the evaluation env, on top of ``env.kwargs`` (e.g. ``{renderer: maniskill}``)."""
    num_envs: int | None = None
    """Envs of the evaluation env (None: ``env.num_envs``); set apart from ``env.num_envs``, evaluations run
    on env workers of their own. Every env keeps a simulator of its own (a rendering MetaWorld one holds
    about 110 MB), so five held-out tasks (ML45-test) need far fewer envs than the 45 they follow."""
    checkpoint: str | None = None
    """vlarl-eval: the policy to score, as a run directory (its latest checkpoint), a checkpoint
    (``checkpoints/step_N``) or a ``save_pretrained`` directory such as an SFT checkpoint."""
    sampling: str = "deterministic"
    """How the evaluated policy acts: ``deterministic`` (RLinf's evaluation: OpenVLA's and OFT's most likely
    tokens; pi0's and pi0.5's plain ODE from random start noise), ``sample`` (exactly as the training
    rollouts sample: flow-SDE or flow-noise at the run's noise level, OpenVLA's temperature) or
    ``zero_start`` (pi0's ODE from zero start noise, the deterministic mode before vlarl-trainer 0.28; token
    policies: as ``deterministic``). Each episode draws from a generator seeded by the run's seed and the
    episode, so an evaluation replays bit-identically."""
    also_sampling: list[str] = field(default_factory=list)
    """More modes to score the same episodes in, each split reported as ``<split>_<mode>`` beside the
    split's own name, which keeps ``sampling``'s score (``[sample]`` adds ``test_sample``)."""
    training_env_splits: dict[str, str] = field(default_factory=dict)
    """Training runs scored on another env (``eval.env_id``, ``eval.env_kwargs`` or ``eval.num_envs``): also
    score these splits of the training env on its own env workers, each reported as the split of its key
    (``{abc_test: test}``: CALVIN ABC's test start states as ``abc_test`` beside scene D's ``test``), with
    ``eval.episodes_per_task`` episodes of each of its tasks under ``eval.sampling``."""
    calvin_chains: int = 0
    """vlarl-eval's, SFT's and training's evaluations on a CALVIN env: also play the first N of CALVIN's 1000
    five-task evaluation chains (``vlarl_envs.calvin.chains``) and report ``eval/chains/success_1..5`` and
    ``eval/chains/average_length``; 0 plays none. 1000 is the benchmark; the CPU experiments score the first 50."""


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
    keep_last: int = 0
    """How many of the newest checkpoints a run keeps (0: all). At least 2, so that a damaged newest
    checkpoint always has an intact one before it to resume from."""
    logger: list[str] = field(default_factory=lambda: ["tensorboard"])
    """Any of tensorboard, wandb; metrics.jsonl is always written."""
    torch_threads: int = 1
    """torch threads per worker process."""
    progress: bool = True
    video_dir: str | None = None
    """Where training and evaluation videos go (None: ``<run>/videos``)."""
    video_info: bool = True
    """Caption every video frame with the step's reward and whether success holds (RLinf's info_on_video)."""
    wandb_project: str = "vlarl"
    """W&B project of runs logged with ``runner.logger=[..., wandb]``."""
    wandb_name: str | None = None
    """W&B run name (None: the run directory's name, which also identifies the W&B run on resume)."""


@dataclass
class CollectConfig:
    """vlarl-collect and the main job's first stage: scripted-expert demonstrations of ``env.id``, at
    ``env.kwargs``' image size and horizon, written as a LeRobot dataset to ``dataset``."""

    episodes_per_task: int = 10
    task_episodes: dict[str, int] = field(default_factory=dict)
    """Another episode count for the named tasks (e.g. more of the tasks whose goal moves)."""
    tasks: list[str] | None = None
    """A subset of the env's tasks (None: all)."""
    split: str = "train"
    first_episode_id: int = 0
    """Episode ids first_episode_id, +1, ... are tried per task, so disjoint ranges share no initial state."""
    keep_failures: bool = False
    max_attempts_per_task: int | None = None
    """Episode ids tried per task (None: 3 x the task's episode count + 5)."""


@dataclass
class SFTConfig:
    """vlarl-sft and the main job's second stage: supervised pre-training of ``policy.*`` on ``dataset``.
    AdamW, linear warm-up then cosine decay to ``lr * final_lr_fraction``."""

    steps: int = 2000
    batch_size: int = 32
    lr: float = 3e-4
    weight_decay: float = 0.01
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    warmup_steps: int = 100
    final_lr_fraction: float = 0.1
    clip_grad: float = 1.0
    log_every: int = 50
    evaluate: bool = True
    """Score the trained policy with ``eval.*`` on ``env.*`` (the evaluator vlarl-train uses)."""


@dataclass
class JobConfig:
    """vlarl-main-job: demonstrations, SFT, then RL in one run directory. ``job=<size>`` sets it and the
    stage sizes; the RL stage is the recipe's."""

    size: str = "custom"
    """The job option the sizes come from (mt10_demo, mt10, mt50, ml45, libero_spatial, calvin_abc_d,
    put_on_plate, gsenv; demo and full, mt10's first names, keep theirs), or custom."""


@dataclass
class VlarlConfig:
    recipe: str = ""
    """The recipe the tree was composed from (each recipe file sets it)."""
    dataset: str | None = None
    """A LeRobot dataset directory: what vlarl-collect writes (it must not exist), what vlarl-sft reads,
    and for vlarl-main-job demonstrations to reuse instead of collecting."""
    resume: str | None = None
    """A run directory to continue from its last checkpoint (vlarl-train) or a stopped job to finish
    (vlarl-main-job); ``auto``: the run ``runner.name`` names, continued if it exists, started if not."""
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    collect: CollectConfig = field(default_factory=CollectConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    job: JobConfig = field(default_factory=JobConfig)


AUTO = "auto"
"""``resume=auto``: continue the named run when it exists, start it otherwise."""


def _names(group: str) -> list[str]:
    folder = Path(__file__).parent / "conf" / group
    return sorted(p.stem for p in folder.glob("*.yaml"))


def available_recipes() -> list[str]:
    return _names("recipe")


def available_jobs() -> list[str]:
    return _names("job")


CHOSEN_GROUPS = ("recipe", "job", "env", "policy", "algorithm")
"""The config groups a command line picks from by name (``policy=openvla_oft_tiny``)."""


OPEN_MAPPINGS = ("env.kwargs", "policy.kwargs", "eval.env_kwargs", "eval.training_env_splits",
                 "cluster.component_placement", "collect.task_episodes", "rollout.task_repeats")
"""Mappings whose keys a job or the command line may add to, where every other key of the tree is fixed by
the schema: keywords for ``gym.make`` and ``vlarl_policies.make`` (which reject unknown ones themselves),
``eval.training_env_splits={abc_test: test}`` naming a split, ``cluster.component_placement={env: "0:0-1"}``
moving env off a recipe's shared placement, and ``collect.task_episodes={reach-v3: 5}`` and
``rollout.task_repeats={reach-v3: 2}`` naming a task."""


def schema() -> Any:
    """The dataclass tree as an OmegaConf node, its ``OPEN_MAPPINGS`` open to new keys."""
    node = OmegaConf.structured(VlarlConfig)
    for key in OPEN_MAPPINGS:
        OmegaConf.set_struct(OmegaConf.select(node, key), False)
    return node


def store_schema() -> None:
    """Register the schema as ``vlarl_schema``, the first entry of conf/config.yaml's defaults."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=SCHEMA_NAME, node=schema())


def check_choices(overrides: list[str], need_recipe: bool) -> None:
    """The recipe, job, env, policy and algorithm a command line names exist (and a recipe is named where the
    command needs one): a ValueError listing the choices instead of Hydra's search path."""
    named = [o.split("=", 1) for o in overrides if o.startswith(tuple(f"{key}=" for key in (*CHOSEN_GROUPS, "resume")))]
    if need_recipe and not {key for key, _ in named} & {"recipe", "resume"}:
        raise ValueError(f"name a recipe: recipe=<name> ...; available: {available_recipes()}")
    for key, value in named:
        if key in CHOSEN_GROUPS and value not in _names(key):
            raise ValueError(f"unknown {key} {value!r}; available: {_names(key)}")


def to_config(composed: Any) -> VlarlConfig:
    """A composed DictConfig as the dataclass tree (each recipe names itself in ``recipe``)."""
    return OmegaConf.to_object(composed)


def load_config(overrides: list[str], need_recipe: bool = True) -> VlarlConfig:
    """Compose ``recipe=<name>`` (``job=<size>``) plus ``key=value`` overrides onto the schema, as the
    commands do."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    overrides = list(overrides)
    check_choices(overrides, need_recipe)
    store_schema()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base=None):
            composed = compose(config_name="config", overrides=overrides)
        return to_config(composed)
    except (HydraException, MissingConfigException, OmegaConfBaseException) as error:
        raise ValueError(f"invalid configuration: {error}") from error


def config_from_dict(saved: Any, overrides: list[str] = ()) -> VlarlConfig:
    """A saved resolved tree (a run's config.yaml, a job's job.json) with ``key=value`` overrides on top."""
    return OmegaConf.to_object(OmegaConf.merge(schema(), saved, OmegaConf.from_dotlist(list(overrides))))


def config_from_yaml(path: Path, overrides: list[str] = ()) -> VlarlConfig:
    return config_from_dict(OmegaConf.load(path), overrides)


def to_dict(config: VlarlConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def to_yaml(config: VlarlConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(to_dict(config)))
