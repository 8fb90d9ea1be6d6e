"""Env worker: ``pipeline_stage_num`` shards of environments, stepped on request.

Each shard is the env family's ``EpisodeEnvs`` (``vlarl_envs.family_of(env_id).make_episode_envs``):
training rollouts run without autoreset, every env plays one episode per rollout epoch from an
episode id the driver chooses, and an env whose episode ended is no longer stepped (its last
observation is repeated and its later steps are masked out of the loss). An episode's statistics
are the env's own (``info["episode"]`` of the contract's EpisodeStatistics wrapper, or its
``episode_so_far`` for an episode the rollout's length cut short); the worker computes none.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from vlarl_trainer.rl.workers.process import WorkerProcess

POLICY_KEYS = ("main_images", "wrist_images", "states", "task_description")
"""Observation keys the policy reads; privileged_state stays in the env worker."""

EPISODE_STATISTICS = ("success_once", "success_at_end", "return", "episode_len", "reward")
"""The keys of ``info["episode"]`` the worker reports per env."""


def policy_inputs(batch: dict[str, Any]) -> dict[str, Any]:
    """The keys of a batched observation that the policy reads."""
    return {key: batch[key] for key in POLICY_KEYS if key in batch}


class StageRecord:
    """What one shard's episodes produced, step by step."""

    def __init__(self, tasks: list[str], idle: np.ndarray) -> None:
        self.rewards: list[np.ndarray] = []
        self.dones: list[np.ndarray] = [idle]
        """Whether each env's episode has ended, before the first step and after each; an idle env's from the start."""
        self.tasks = tasks

    @property
    def done(self) -> np.ndarray:
        return self.dones[-1]


class EnvWorker(WorkerProcess):
    """Holds ``stage_num`` episode envs of ``envs_per_stage`` envs each."""

    def __init__(
        self, env_id: str, env_kwargs: dict[str, Any], action_chunk: int, envs_per_stage: int, stage_num: int
    ) -> None:
        self.prepare_process()
        from vlarl_envs import family_of

        family = family_of(env_id)
        self.stages = [family.make_episode_envs(env_id, envs_per_stage, action_chunk=action_chunk, **env_kwargs)
                       for _ in range(stage_num)]
        self.records: list[StageRecord | None] = [None] * stage_num
        self.instruction = ""
        """The instruction of stage 0's first env, which videos follow."""
        self.frames: list[tuple[np.ndarray, float, bool]] | None = None
        """Stage 0's first env while a video records: each image with the reward and success that came with it."""

    def reset(self, stage: int, options: list[dict[str, Any]], record_video: bool = False,
              idle: list[bool] | None = None) -> dict[str, Any]:
        """Start one episode per env of ``stage`` with the given reset options; an ``idle`` env resets but
        starts done and plays nothing."""
        vec = self.stages[stage]
        if len(options) != vec.num_envs:
            raise ValueError(f"stage {stage} has {vec.num_envs} envs, got {len(options)} reset options")
        from vlarl_envs.vector import idle_mask

        idle = idle_mask(idle, vec.num_envs)
        batch, infos = vec.reset(options, idle=idle)
        self.records[stage] = StageRecord([str(info.get("task", "")) for info in infos], idle)
        if stage == 0:  # the video follows stage 0's first env; resetting the other stages leaves it alone
            self.frames = [] if record_video else None
            self.instruction = str(batch["task_description"][0])
        self._capture(batch, stage, 0.0, False)
        return policy_inputs(batch)

    def step(self, stage: int, actions: np.ndarray) -> dict[str, Any]:
        """Run one chunk of actions ``[n, C, A]`` on the envs of ``stage`` still in their episode."""
        record = self.records[stage]
        first_was_running = not record.done[0]
        batch, rewards, done, infos = self.stages[stage].step(actions)
        record.rewards.append(rewards)
        record.dones.append(done)
        if first_was_running:
            self._capture(batch, stage, float(rewards[0]), bool(infos[0].get("success", False)))
        return policy_inputs(batch)

    def all_done(self, stage: int) -> bool:
        """Whether every env of ``stage`` has ended its episode (or sat this one out)."""
        return bool(self.records[stage].done.all())

    def _capture(self, batch: dict[str, Any], stage: int, reward: float, success: bool) -> None:
        if self.frames is not None and stage == 0 and "main_images" in batch:
            self.frames.append((np.asarray(batch["main_images"][0]), reward, success))

    def results(self, stage: int) -> dict[str, Any]:
        """Rewards ``[T, n]``, dones ``[T + 1, n]`` and per-episode statistics of ``stage``."""
        record = self.records[stage]
        episodes = self.stages[stage].episode_statistics()
        statistics = {name: np.array([episode[name] for episode in episodes]) for name in EPISODE_STATISTICS}
        return {"rewards": np.stack(record.rewards), "dones": np.stack(record.dones), **statistics,
                "tasks": list(record.tasks)}

    def take_video(self, path: str, fps: int = 10, info: bool = True) -> str | None:
        """Write the frames of stage 0's first env since the last reset as an mp4, captioned with the
        instruction and step, and with ``info`` the step's reward and whether success holds (RLinf's
        ``info_on_video``)."""
        if not self.frames:
            return None
        import imageio.v2 as imageio

        from vlarl_envs.wrappers.record_video import caption_frame

        frames = []
        for step, (image, reward, success) in enumerate(self.frames):
            status = f"step {step}" + (f"  reward {reward:+.2f}  {'success' if success else ''}" if info else "")
            frames.append(caption_frame(image, [self.instruction[:40], status.rstrip()]))
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        partial = f"{path}.partial.mp4"
        imageio.mimwrite(partial, frames, fps=fps, macro_block_size=16)
        os.replace(partial, path)
        self.frames = None
        return path

    def close(self) -> None:
        for vec in self.stages:
            vec.close()
