"""Everything about a configuration that can be checked before Ray starts.

Each problem is a ValueError naming the key, what it expected and what came; a recipe whose
env or policy this vlarl version does not have says so instead of failing deep in a worker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from vlarl_trainer.config import ALGORITHMS, EVAL_SAMPLING_MODES, LR_SCHEDULES, PRECISIONS, STRATEGIES, VlarlConfig
from vlarl_trainer.metrics import check_loggers
from vlarl_trainer.rl.eval_env import check_calvin_chains, check_eval_splits, evaluation_env
from vlarl_trainer.rl.placement import parse_component_placement
from vlarl_trainer.rl.training_episodes import dealt_tasks


@dataclass(frozen=True)
class Layout:
    """Process counts and per-shard sizes derived from a validated config."""

    placement: dict[str, list[tuple[int, ...]]]
    envs_per_stage: int
    chunk_steps: int
    """T: policy calls per rollout epoch."""
    action_dim: int
    state_dim: int
    observation_space: gym.spaces.Dict | None = None
    """The env's, as its probe reported it (what the dry run builds observations from)."""

    @property
    def env_workers(self) -> int:
        return len(self.placement["env"])

    @property
    def rollout_workers(self) -> int:
        return len(self.placement["rollout"])

    @property
    def actor_workers(self) -> int:
        return len(self.placement["actor"])


def check_env(config: VlarlConfig) -> gym.Env:
    """The env of the config, built once (cheap: simulators build on first reset)."""
    import vlarl_envs  # registers the ids

    env_id = config.env.id
    registered = sorted(i for i in gym.registry if i.startswith("vlarl/"))
    if env_id not in gym.registry:
        families = sorted({i.split("/")[1].split("-")[0] for i in registered})
        raise ValueError(
            f"env.id {env_id!r} is not available in this vlarl version (vlarl-envs {vlarl_envs.__version__}); "
            f"available families: {families}"
        )
    return gym.make(env_id, action_chunk=config.env.action_chunk, **config.env.kwargs)


def check_policy(config: VlarlConfig, estimate_only: bool = False) -> None:
    import vlarl_policies

    if config.policy.pretrained is None and config.policy.preset == "base" and not estimate_only:
        raise ValueError(
            "policy.preset 'base' (the published size) would start RL from random weights: set "
            "policy.pretrained=<checkpoint dir> (an SFT or published checkpoint)"
        )

    if config.policy.pretrained is not None:
        check_pretrained_matches(config)

    known = vlarl_policies.available_policies()
    if config.policy.pretrained is None and config.policy.name not in known:
        raise ValueError(
            f"policy.name {config.policy.name!r} is not available in this vlarl version "
            f"(vlarl-policies {vlarl_policies.__version__}); available: {known}"
        )
    if config.policy.pretrained is None:
        check_policy_settings(config)


def policy_cameras(config: VlarlConfig) -> tuple[str, ...] | None:
    """The images the run's policy reads (``camera_keys``): its preset's with ``policy.kwargs``, or its saved
    config.json's; None for a published layout without config.json, whose loader decides."""
    if config.policy.pretrained is not None:
        settings = pretrained_settings(config)
        return None if settings is None else tuple(settings[1].get("camera_keys") or ()) or None
    from vlarl_policies.registry import preset_config

    _, policy_config = preset_config(config.policy.name, config.policy.preset,
                                     **{**config.policy.kwargs, "action_chunk": config.env.action_chunk})
    return tuple(policy_config.camera_keys)


def check_cameras(config: VlarlConfig) -> None:
    """A policy that reads ``wrist_images`` (a camera it would otherwise see black and masked, as it sees an env
    without one) is not run on an env made with ``wrist_camera=False``."""
    if config.env.kwargs.get("wrist_camera", True) or config.env.kwargs.get("obs_mode", "rgb") != "rgb":
        return
    cameras = policy_cameras(config)
    require(cameras is None or "wrist_images" not in cameras,
            f"the policy reads {list(cameras or ())}, but env.kwargs.wrist_camera=false leaves wrist_images out of "
            f"{config.env.id}'s observations: set env.kwargs.wrist_camera=true")


def check_pretrained_exists(config: VlarlConfig) -> None:
    """A ``policy.pretrained`` that names no directory stops a run before Ray starts. Not part of ``validate``:
    the main job validates its RL stage before SFT has written the checkpoint it will start from."""
    pretrained = config.policy.pretrained
    require(pretrained is None or Path(pretrained).is_dir(),
            f"policy.pretrained={pretrained}: expected a saved policy directory (save_pretrained's, or a published "
            "checkpoint), found no directory there")


def check_policy_settings(config: VlarlConfig) -> None:
    """``policy.preset`` and ``policy.kwargs`` make a config of ``policy.name`` (no weights are built), so a
    misspelt or foreign setting (pi0's ``noise_level`` on OpenVLA) stops the run before any worker starts."""
    from vlarl_policies.registry import preset_config

    try:
        preset_config(config.policy.name, config.policy.preset,
                      **{**config.policy.kwargs, "action_chunk": config.env.action_chunk})
    except (TypeError, ValueError) as error:
        raise ValueError(f"policy.preset={config.policy.preset!r} with policy.kwargs={dict(config.policy.kwargs)} "
                         f"does not make a {config.policy.name!r} policy: {error}") from error


def check_pretrained_matches(config: VlarlConfig) -> None:
    """A saved policy is loaded as saved: every ``policy.kwargs`` entry and the env's action chunk must
    agree with its config.json, or the run would silently sample with other settings than asked for.
    Its sampling settings (``sampling_fields``: pi0's ``noise_level``, OpenVLA's ``temperature``) are the
    exception, which the run applies to its own copy (``sampling_overrides``).

    A directory without config.json (a published layout) is left to the policy's own loader."""
    settings = pretrained_settings(config)
    if settings is None:
        return
    asked, saved, sampling = settings
    differ = {key: (value, saved[key]) for key, value in asked.items()
              if key in saved and saved[key] != value and key not in sampling}
    if differ:
        listed = ", ".join(f"{key}: asked {asked!r}, saved {had!r}" for key, (asked, had) in sorted(differ.items()))
        raise ValueError(
            f"policy.pretrained={config.policy.pretrained} was saved with other settings than this run asks for "
            f"({listed}); train it with these settings (vlarl-main-job does) or set them to the saved values"
        )


def sampling_overrides(config: VlarlConfig) -> dict[str, Any]:
    """The ``policy.kwargs`` entries that change how the saved ``policy.pretrained`` samples: its config's
    ``sampling_fields`` whose values differ from the saved ones (none for a published layout)."""
    settings = pretrained_settings(config)
    if settings is None:
        return {}
    asked, saved, sampling = settings
    return {key: value for key, value in asked.items() if key in sampling and saved.get(key) != value}


def pretrained_settings(config: VlarlConfig) -> tuple[dict[str, Any], dict[str, Any], tuple[str, ...]] | None:
    """What the run asks of ``policy.pretrained`` (``policy.kwargs`` and the env's action chunk), what its
    config.json holds, and the fields of those that only change sampling; None without a config.json."""
    from vlarl_policies.base import CONFIG_FILE, read_config
    from vlarl_policies.registry import saved_class

    directory = Path(config.policy.pretrained)
    if not (directory / CONFIG_FILE).is_file():
        return None
    saved = read_config(directory)
    # A JSON round trip compares tuples and lists (and ints and floats) alike.
    asked = json.loads(json.dumps({**config.policy.kwargs, "action_chunk": config.env.action_chunk}))
    return asked, saved, saved_class(saved, directory).config_class.sampling_fields


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def check_training(config: VlarlConfig) -> None:
    """The settings only training reads: algorithm, actor and thread counts that evaluation never uses."""
    algorithm, actor = config.algorithm, config.actor
    require(algorithm.name in ALGORITHMS, f"algorithm.name must be one of {ALGORITHMS}, got {algorithm.name!r}")
    require(actor.lr_schedule in LR_SCHEDULES,
            f"actor.lr_schedule must be one of {LR_SCHEDULES}, got {actor.lr_schedule!r}")
    require(algorithm.target_kl is None or algorithm.target_kl > 0,
            f"algorithm.target_kl must be None or > 0, got {algorithm.target_kl}")
    require(algorithm.reward_scale > 0, f"algorithm.reward_scale must be > 0, got {algorithm.reward_scale}")
    require(
        not algorithm.normalize_per_task or (algorithm.name == "ppo" and algorithm.normalize_advantages),
        "algorithm.normalize_per_task normalizes PPO's advantages: it needs algorithm.name=ppo and "
        f"algorithm.normalize_advantages=true, got name={algorithm.name!r} and "
        f"normalize_advantages={algorithm.normalize_advantages}",
    )
    require(
        not algorithm.skip_unsolved_tasks or algorithm.name == "ppo",
        "algorithm.skip_unsolved_tasks masks PPO's advantages (GRPO filters groups with algorithm.score_range): "
        f"it needs algorithm.name=ppo, got {algorithm.name!r}",
    )
    require(
        actor.torch_threads is None or actor.torch_threads >= 1,
        f"actor.torch_threads must be >= 1 or null (runner.torch_threads), got {actor.torch_threads}",
    )
    require(actor.strategy in STRATEGIES, f"actor.strategy must be one of {STRATEGIES}, got {actor.strategy!r}")
    require(actor.precision in PRECISIONS, f"actor.precision must be one of {PRECISIONS}, got {actor.precision!r}")
    require(config.rollout.video_interval >= 0,
            f"rollout.video_interval must be >= 0 (0: no training videos), got {config.rollout.video_interval}")


def placement_devices(config: VlarlConfig) -> int | None:
    """The device count placement strings are read against: ``cluster.num_devices`` when set (every range
    must then exist), else, where a placement says ``all``, this machine's GPUs (1 without GPUs); else
    None, and ranges are taken as written (a recipe for 8 GPUs validates on a laptop)."""
    devices = config.cluster.num_devices
    if devices is not None:
        require(devices >= 1, f"cluster.num_devices must be >= 1, got {devices}")
        return devices
    if any("all" in str(value) for value in config.cluster.component_placement.values()):
        import torch

        return max(1, torch.cuda.device_count())
    return None


def check_cluster_limits(config: VlarlConfig) -> None:
    """The deadlines, the env restart limit and how many checkpoints are kept."""
    cluster = config.cluster
    require(cluster.start_timeout > 0, f"cluster.start_timeout must be > 0 seconds, got {cluster.start_timeout}")
    require(cluster.call_timeout is None or cluster.call_timeout > 0,
            f"cluster.call_timeout must be > 0 seconds or null (derived from measured times), "
            f"got {cluster.call_timeout}")
    require(cluster.max_env_restarts >= 0, f"cluster.max_env_restarts must be >= 0, got {cluster.max_env_restarts}")
    keep_last = config.runner.keep_last
    require(keep_last == 0 or keep_last >= 2,
            f"runner.keep_last must be 0 (keep every checkpoint) or >= 2 (a damaged newest checkpoint needs an "
            f"intact one before it), got {keep_last}")


def check_eval_episodes(config: VlarlConfig) -> None:
    """``eval.first_episode_id`` is an episode id; an id past a fixed split's end is the env's to name."""
    require(config.eval.first_episode_id >= 0,
            f"eval.first_episode_id must be an episode id (>= 0), got {config.eval.first_episode_id}")


def check_eval_sampling(config: VlarlConfig) -> None:
    """``eval.sampling`` and every mode of ``eval.also_sampling`` name a mode of ``EVAL_SAMPLING_MODES``."""
    require(config.eval.sampling in EVAL_SAMPLING_MODES,
            f"eval.sampling must be one of {EVAL_SAMPLING_MODES}, got {config.eval.sampling!r}")
    unknown = [mode for mode in config.eval.also_sampling if mode not in EVAL_SAMPLING_MODES]
    require(not unknown, f"eval.also_sampling: every mode must be one of {EVAL_SAMPLING_MODES}, got {unknown}")
    require(config.eval.sampling not in config.eval.also_sampling,
            f"eval.also_sampling repeats eval.sampling ({config.eval.sampling!r}), whose score the splits' own "
            "names already hold")


def validate(config: VlarlConfig, training: bool = True, estimate_only: bool = False) -> Layout:
    """Check the config and return the derived layout; ``training=False`` checks only what an evaluation
    of a saved policy reads (env, policy, placement and episode length), not batch sizes or the algorithm.
    ``estimate_only`` (the dry run) accepts a published-size policy without a checkpoint: sizes are all
    it reads."""
    actor, rollout, env, algorithm = config.actor, config.rollout, config.env, config.algorithm
    if training:
        check_training(config)
    require(config.runner.torch_threads >= 1, f"runner.torch_threads must be >= 1, got {config.runner.torch_threads}")
    check_loggers(config.runner.logger)
    check_eval_episodes(config)
    check_eval_sampling(config)
    check_cluster_limits(config)
    placement = parse_component_placement(config.cluster.component_placement, placement_devices(config))
    check_policy(config, estimate_only)
    check_cameras(config)
    probe = check_env(config)
    action_shape = probe.action_space.shape
    observation_space = probe.observation_space
    state_dim = observation_space["states"].shape[0]
    probe.close()

    require(env.action_chunk >= 1, f"env.action_chunk must be >= 1, got {env.action_chunk}")
    require(
        env.max_steps % env.action_chunk == 0,
        f"env.max_steps ({env.max_steps}) must be a multiple of env.action_chunk ({env.action_chunk})",
    )
    env_workers, rollout_workers, actor_workers = (len(placement[c]) for c in ("env", "rollout", "actor"))
    shards = env_workers * rollout.pipeline_stage_num
    require(
        env.num_envs % shards == 0,
        f"env.num_envs ({env.num_envs}) must divide into env workers x rollout.pipeline_stage_num "
        f"({env_workers} x {rollout.pipeline_stage_num} = {shards})",
    )
    require(
        env_workers % rollout_workers == 0,
        f"env workers ({env_workers}) must be a multiple of rollout workers ({rollout_workers})",
    )
    chunk_steps = env.max_steps // env.action_chunk
    if training:
        if algorithm.name == "grpo":
            require(algorithm.group_size >= 2,
                    f"algorithm.group_size must be >= 2 for GRPO, got {algorithm.group_size}")
            require(
                env.num_envs % algorithm.group_size == 0,
                f"env.num_envs ({env.num_envs}) must be a multiple of algorithm.group_size ({algorithm.group_size})",
            )
        samples = env.num_envs * rollout.rollout_epoch * chunk_steps
        require(
            samples % actor.global_batch_size == 0,
            f"a rollout's chunk steps (num_envs {env.num_envs} x rollout_epoch {rollout.rollout_epoch} x "
            f"{chunk_steps} = {samples}) must be a multiple of actor.global_batch_size ({actor.global_batch_size})",
        )
        per_rank = actor.micro_batch_size * actor_workers
        require(
            actor.global_batch_size % per_rank == 0,
            f"actor.global_batch_size ({actor.global_batch_size}) must be a multiple of micro_batch_size x actor "
            f"workers ({actor.micro_batch_size} x {actor_workers} = {per_rank})",
        )
        require(config.runner.max_steps >= 1, f"runner.max_steps must be >= 1, got {config.runner.max_steps}")
        dealt_tasks(config)
        require(
            not (actor.offload and actor.strategy == "ddp" and actor_workers > 1),
            f"actor.offload with actor.strategy=ddp moves each rank's whole policy off the GPU between updates, "
            f"which DDP's buckets cannot follow on several ranks: use actor.strategy=fsdp (its shards stay in CPU "
            f"memory) or one actor rank, got ddp on {actor_workers} ranks",
        )
    return Layout(
        placement=placement,
        envs_per_stage=env.num_envs // shards,
        chunk_steps=chunk_steps,
        action_dim=int(action_shape[-1]),
        state_dim=int(state_dim),
        observation_space=observation_space,
    )


def validate_evaluation_env(config: VlarlConfig, layout: Layout, estimate_only: bool = False) -> Layout:
    """The layout of the env evaluations play (``eval.env_id``/``eval.env_kwargs``): ``layout`` itself when
    they play the training env. Its actions and states must have the training env's sizes, since one
    policy acts in both. ``estimate_only``: as ``validate``'s (the dry run of a published-size recipe)."""
    check_eval_splits(config)
    scored = evaluation_env(config)
    check_training_env_splits(config, scored)
    if scored is config:
        return layout
    require(scored.env.num_envs >= 1, f"eval.num_envs must be >= 1, got {scored.env.num_envs}")
    try:
        eval_layout = validate(scored, training=False, estimate_only=estimate_only)
    except ValueError as error:
        raise ValueError(
            f"the evaluation env ({scored.env.id}, eval.num_envs={scored.env.num_envs}): {error}"
        ) from None
    require(
        (eval_layout.action_dim, eval_layout.state_dim) == (layout.action_dim, layout.state_dim),
        f"eval.env_id {scored.env.id} has action_dim={eval_layout.action_dim}, state_dim={eval_layout.state_dim}; "
        f"the policy trains on {config.env.id} with action_dim={layout.action_dim}, state_dim={layout.state_dim}",
    )
    return eval_layout


def validate_run(config: VlarlConfig, estimate_only: bool = False) -> tuple[Layout, Layout]:
    """Everything a training run checks before a worker starts, as the trainer, its dry run and the main job
    check it: the config's layout, the evaluation env's layout (``validate_evaluation_env``) and CALVIN's
    chains. ``estimate_only``: as ``validate``'s."""
    layout = validate(config, estimate_only=estimate_only)
    eval_layout = validate_evaluation_env(config, layout, estimate_only)
    check_calvin_chains(config)
    return layout, eval_layout


def check_training_env_splits(config: VlarlConfig, scored: VlarlConfig) -> None:
    """``eval.training_env_splits`` maps new split names to splits of the training env, and only where the
    evaluation plays another env: without one, ``eval.splits`` already scores the training env."""
    named = config.eval.training_env_splits
    if not named:
        return
    require(scored is not config,
            f"eval.training_env_splits ({dict(named)}) scores the training env beside another evaluation env, but "
            f"the evaluation plays the training env {config.env.id}; name its splits in eval.splits instead, or set "
            "eval.env_id")
    from vlarl_envs import family_of

    available = family_of(config.env.id).splits(config.env.id)
    unknown = {name: split for name, split in named.items() if split not in available}
    require(not unknown, f"eval.training_env_splits: {config.env.id} has no split(s) {sorted(unknown.values())}; "
                         f"expected any of {list(available)}")
    taken = set(config.eval.splits) | {f"{split}_{mode}" for split in config.eval.splits
                                       for mode in config.eval.also_sampling}
    clashing = sorted(set(named) & taken)
    require(not clashing, f"eval.training_env_splits: the name(s) {clashing} are the evaluation env's own splits' "
                          f"({sorted(taken)}); choose other names")
    malformed = sorted(name for name in named if not name or "/" in name)
    require(not malformed, f"eval.training_env_splits: a split name is a metric key's part, non-empty and without "
                           f"'/', got {malformed}")
