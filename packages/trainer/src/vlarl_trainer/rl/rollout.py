"""One rollout: env shards and policy copies stepping in a pipeline, then the trajectories.

With ``pipeline_stage_num`` S, each env worker holds S shards. For every chunk step the
driver asks the rollout worker for shard s's actions and the env worker to step shard s with
them, as Ray futures; Ray runs an actor's calls in order, so while the env worker steps shard
s the rollout worker already computes shard s + 1's actions. With S = 1 they take turns.
Global env index = (env worker rank * S + stage) * envs_per_stage + index in the shard.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from vlarl_trainer.progress import write
from vlarl_trainer.rl.cluster import (
    Deadline,
    GpuPlacement,
    WorkerFailure,
    WorkerGroup,
    gpu_count,
    place_on_gpus,
    wait_in_time,
)
from vlarl_trainer.rl.workers.env_worker import EPISODE_STATISTICS

DONE_CHECK_INTERVAL = 8
"""Chunk steps between two looks at whether every episode has ended (``play_episodes``' ``stop_when_done``):
each look waits for the steps in flight, so rarer looks keep the pipeline fuller."""


@dataclass
class Shards:
    env: WorkerGroup
    rollout: WorkerGroup
    stage_num: int
    envs_per_stage: int
    max_env_restarts: int = 0
    """How often one rollout replaces an env worker whose process died before the run stops."""
    env_restarts: int = 0
    """Env workers replaced so far."""

    def keys(self) -> list[tuple[int, int]]:
        return [(rank, stage) for rank in range(len(self.env)) for stage in range(self.stage_num)]

    @property
    def num_envs(self) -> int:
        """Envs over every shard: the global env axis."""
        return len(self.keys()) * self.envs_per_stage

    def rollout_index(self, env_rank: int) -> int:
        """The rank of the rollout worker that acts for env worker ``env_rank``'s shards."""
        return env_rank % len(self.rollout)

    def rollout_worker(self, env_rank: int):
        return self.rollout.workers[self.rollout_index(env_rank)]

    def offset(self, key: tuple[int, int]) -> int:
        rank, stage = key
        return (rank * self.stage_num + stage) * self.envs_per_stage


def place_workers(placements: Mapping[str, Sequence[tuple[int, ...]]], timeout: float) -> GpuPlacement | None:
    """The GPU placement of every worker group a run starts (role -> its processes' devices; the shares of a
    device count them all), ready within ``timeout`` seconds; None on a cluster without GPUs."""
    return place_on_gpus(placements, timeout) if gpu_count() > 0 else None


def inference_placements(layout) -> dict[str, list[tuple[int, ...]]]:
    """The env and rollout processes' devices: what ``start_inference_workers`` starts."""
    return {role: layout.placement[role] for role in ("env", "rollout")}


def start_env_workers(config, layout, gpus: GpuPlacement | None, deadline: Deadline | None = None) -> WorkerGroup:
    """The env workers of ``env.*``, placed as ``cluster.component_placement`` says, their calls bound by
    ``deadline``."""
    from vlarl_trainer.rl.workers.env_worker import EnvWorker

    env_args = (config.env.id, config.env.kwargs, config.env.action_chunk, layout.envs_per_stage,
                config.rollout.pipeline_stage_num)
    return WorkerGroup("env", EnvWorker, layout.placement["env"], [(env_args, {})] * layout.env_workers, gpus,
                       deadline)


def start_inference_workers(config, layout, policy_path: str, gpus: GpuPlacement | None,
                            deadline: Deadline | None = None) -> Shards:
    """The env workers of ``env.*`` and the rollout workers holding the policy at ``policy_path``, placed
    as ``cluster.component_placement`` says: what training rollouts and every evaluation run on."""
    from vlarl_trainer.rl.workers.rollout_worker import RolloutWorker

    env = start_env_workers(config, layout, gpus, deadline)
    rollout = WorkerGroup("rollout", RolloutWorker, layout.placement["rollout"],
                          [((policy_path, config.runner.torch_threads), {})] * layout.rollout_workers, gpus,
                          deadline)
    return Shards(env, rollout, config.rollout.pipeline_stage_num, layout.envs_per_stage,
                  config.cluster.max_env_restarts)


def run_episodes(shards: Shards, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``play_episodes`` that survives env workers whose process dies (a simulator's segfault, the
    OOM killer): the dead worker is replaced by a new one built as it was, and every episode is
    played again from the same reset options and seeds, so the result is the one an unbroken run
    gets. A rollout that loses an env worker more than ``shards.max_env_restarts`` times stops the run.
    """
    failures = 0
    while True:
        try:
            return play_episodes(shards, *args, **kwargs)
        except WorkerFailure as failure:
            rank = shards.env.rank_of(failure) if failure.died and failure.role == "env" else None
            if rank is None:
                raise
            failures += 1
            if failures > shards.max_env_restarts:
                raise WorkerFailure(f"{failure}\nenv worker {rank} died {failures} times in one rollout, past "
                                    f"cluster.max_env_restarts={shards.max_env_restarts}", role="env") from None
            pid = shards.env.restart(rank)
            shards.env_restarts += 1
            write(f"env worker {rank} died; a new one (pid {pid}) replays the rollout")


def play_episodes(
    shards: Shards,
    options: list[dict[str, Any]],
    chunk_steps: int,
    sampling: str,
    seed: int,
    keep_trajectories: bool = True,
    video_path: str | None = None,
    video_info: bool = True,
    on_chunk: Callable[[], None] | None = None,
    idle: Sequence[bool] | None = None,
    stop_when_done: bool = False,
    episode_seeds: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Play one episode on every env (``options[g]`` resets global env g) for ``chunk_steps`` chunks;
    ``on_chunk`` is called as each chunk step completes on every shard (a progress bar's tick).
    ``run_episodes`` is this with env workers that may die.

    Args:
        sampling: how the policy acts, one of the rollout worker's ``SAMPLING_MODES``.
        seed: seeds the rollout workers' generators (worker i: ``seed + 7919 * i``).
        episode_seeds: per global env, the seed of a generator of its own (None: the workers' generators).
        idle: per global env, whether it sits the round out: it resets, but starts ended (None: all play).
        stop_when_done: stop before ``chunk_steps`` once every episode has ended, looking every
            ``DONE_CHECK_INTERVAL`` chunk steps (CALVIN's chains: up to 1800 steps, most end far sooner).

    Returns:
        Env results concatenated over the global env axis (``rewards`` [T, B], ``dones``
        [T + 1, B], statistics [B], ``tasks``) and, with ``keep_trajectories``, the policy
        outputs (``forward_inputs`` {k: [T, B, ...]}, ``logprobs`` [T, B, C, A], ``values``
        [T + 1, B] or None). T is ``chunk_steps``, or fewer where ``stop_when_done`` stopped early.
    """
    keys = shards.keys()
    own_seeds: dict[int, dict[tuple[int, int], list[int]]] = defaultdict(dict)
    if episode_seeds is not None:
        for key in keys:
            start = shards.offset(key)
            own_seeds[shards.rollout_index(key[0])][key] = list(episode_seeds[start : start + shards.envs_per_stage])
    shards.rollout.get([worker.begin.remote(seed + 7919 * index, keep_trajectories, own_seeds.get(index))
                        for index, worker in enumerate(shards.rollout.workers)])
    observations = {}
    for key in keys:
        start = shards.offset(key)
        env = shards.env.workers[key[0]]
        shard_options = options[start : start + shards.envs_per_stage]
        shard_idle = None if idle is None else list(idle[start : start + shards.envs_per_stage])
        observations[key] = env.reset.remote(key[1], shard_options, record_video=video_path is not None,
                                             idle=shard_idle)
    stepped = []
    for step in range(1, chunk_steps + 1):
        for key in keys:
            actions = shards.rollout_worker(key[0]).act.remote(key, observations[key], sampling)
            observations[key] = shards.env.workers[key[0]].step.remote(key[1], actions)
        if on_chunk is not None:
            stepped.append(list(observations.values()))
        if stop_when_done and step % DONE_CHECK_INTERVAL == 0 and step < chunk_steps and all_done(shards, keys):
            break
    if on_chunk is not None:  # every step is already submitted: waiting here leaves the pipeline as it is
        while stepped:
            references = stepped.pop(0)  # dropped once waited on, so Ray may free each step's observations
            wait_in_time(references, "env", shards.env.deadline)
            on_chunk()
    for key in keys:
        shards.rollout_worker(key[0]).bootstrap.remote(key, observations[key])
    env_results = shards.env.get([shards.env.workers[k[0]].results.remote(k[1]) for k in keys])
    merged: dict[str, Any] = {
        name: np.concatenate([r[name] for r in env_results], axis=1 if name in ("rewards", "dones") else 0)
        for name in ("rewards", "dones", *EPISODE_STATISTICS)
    }
    merged["tasks"] = [task for r in env_results for task in r["tasks"]]
    if video_path is not None:
        merged["video"] = shards.env.get(shards.env.workers[0].take_video.remote(video_path, info=video_info))
    if keep_trajectories:
        trajectories = shards.rollout.get([shards.rollout_worker(k[0]).trajectory.remote(k) for k in keys])
        merged["forward_inputs"] = {
            name: torch.cat([t["forward_inputs"][name] for t in trajectories], dim=1)
            for name in trajectories[0]["forward_inputs"]
        }
        merged["logprobs"] = torch.cat([t["logprobs"] for t in trajectories], dim=1)
        has_values = trajectories[0]["values"] is not None
        merged["values"] = torch.cat([t["values"] for t in trajectories], dim=1) if has_values else None
    return merged


def all_done(shards: Shards, keys: list[tuple[int, int]]) -> bool:
    """Whether every env of every shard has ended its episode; the env workers answer after the steps
    already asked of them, so this waits for those."""
    return all(shards.env.get([shards.env.workers[rank].all_done.remote(stage) for rank, stage in keys]))
