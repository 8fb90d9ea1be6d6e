"""Env worker: ``pipeline_stage_num`` shards of environments, stepped on request.

Training rollouts run without autoreset: every env plays one episode per rollout epoch from
an episode id the driver chooses; an env whose episode ended is no longer stepped (its last
observation is repeated and its later steps are masked out of the loss). An episode's statistics
are the env's own (``info["episode"]`` of the contract's EpisodeStatistics wrapper, or its
``episode_so_far`` for an episode the rollout's length cut short); the worker computes none.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np

POLICY_KEYS = ("main_images", "wrist_images", "states", "task_description")
"""Observation keys the policy reads; privileged_state stays in the env worker."""


def batch_observations(observations: list[dict[str, Any]]) -> dict[str, Any]:
    """Stack single-env observations: arrays gain a leading axis, instructions become a list."""
    batch: dict[str, Any] = {}
    for key in POLICY_KEYS:
        if key not in observations[0]:
            continue
        values = [obs[key] for obs in observations]
        batch[key] = list(values) if key == "task_description" else np.stack(values)
    return batch


EPISODE_STATISTICS = ("success_once", "success_at_end", "return", "episode_len", "reward")
"""The keys of ``info["episode"]`` the worker reports per env."""


class StageRecord:
    """What one shard's episodes produced, step by step, and each finished episode's statistics."""

    def __init__(self, num_envs: int) -> None:
        self.rewards: list[np.ndarray] = []
        self.dones: list[np.ndarray] = [np.zeros(num_envs, bool)]
        self.episodes: list[dict[str, Any] | None] = [None] * num_envs
        self.tasks: list[str] = [""] * num_envs

    @property
    def done(self) -> np.ndarray:
        return self.dones[-1]


class EnvWorker:
    """Holds ``stage_num`` lists of ``envs_per_stage`` single envs built with gym.make."""

    def __init__(
        self, env_id: str, env_kwargs: dict[str, Any], action_chunk: int, envs_per_stage: int, stage_num: int
    ) -> None:
        import vlarl_envs  # noqa: F401  (registers the ids in this process)

        self.stages = [
            [gym.make(env_id, action_chunk=action_chunk, **env_kwargs) for _ in range(envs_per_stage)]
            for _ in range(stage_num)
        ]
        self.records: list[StageRecord | None] = [None] * stage_num
        self.last_obs: list[list[dict[str, Any]]] = [[] for _ in range(stage_num)]
        self.frames: list[tuple[np.ndarray, float, bool]] | None = None
        """Stage 0's first env while a video records: each image with the reward and success that came with it."""

    def pid(self) -> int:
        return os.getpid()

    def reset(self, stage: int, options: list[dict[str, Any]], record_video: bool = False) -> dict[str, Any]:
        """Start one episode per env of ``stage`` with the given reset options."""
        envs = self.stages[stage]
        if len(options) != len(envs):
            raise ValueError(f"stage {stage} has {len(envs)} envs, got {len(options)} reset options")
        record = StageRecord(len(envs))
        observations = []
        for index, (env, env_options) in enumerate(zip(envs, options)):
            obs, info = env.reset(options=env_options)
            observations.append(obs)
            record.tasks[index] = str(info.get("task", ""))
        self.records[stage] = record
        self.last_obs[stage] = observations
        if stage == 0:  # the video follows stage 0's first env; resetting the other stages leaves it alone
            self.frames = [] if record_video else None
        self._capture(observations[0], stage, 0.0, False)
        return batch_observations(observations)

    def step(self, stage: int, actions: np.ndarray) -> dict[str, Any]:
        """Run one chunk of actions ``[n, C, A]`` on the envs of ``stage`` still in their episode."""
        record = self.records[stage]
        envs = self.stages[stage]
        rewards = np.zeros(len(envs), np.float32)
        done = record.done.copy()
        first_success = False
        for index, env in enumerate(envs):
            if done[index]:
                continue
            obs, reward, terminated, truncated, info = env.step(actions[index])
            self.last_obs[stage][index] = obs
            rewards[index] = reward
            done[index] = terminated or truncated
            if done[index]:
                record.episodes[index] = info["episode"]
            if index == 0:
                first_success = bool(info["success"])
        record.rewards.append(rewards)
        record.dones.append(done)
        if not record.dones[-2][0]:
            self._capture(self.last_obs[stage][0], stage, float(rewards[0]), first_success)
        return batch_observations(self.last_obs[stage])

    def _capture(self, observation: dict[str, Any], stage: int, reward: float, success: bool) -> None:
        if self.frames is not None and stage == 0 and "main_images" in observation:
            self.frames.append((np.asarray(observation["main_images"]), reward, success))

    def results(self, stage: int) -> dict[str, Any]:
        """Rewards ``[T, n]``, dones ``[T + 1, n]`` and per-episode statistics of ``stage``."""
        record = self.records[stage]
        episodes = [episode if episode is not None else env.get_wrapper_attr("episode_so_far")()
                    for env, episode in zip(self.stages[stage], record.episodes)]
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

        instruction = str(self.last_obs[0][0].get("task_description", ""))
        frames = []
        for step, (image, reward, success) in enumerate(self.frames):
            status = f"step {step}" + (f"  reward {reward:+.2f}  {'success' if success else ''}" if info else "")
            frames.append(caption_frame(image, [instruction[:40], status.rstrip()]))
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        partial = f"{path}.partial.mp4"
        imageio.mimwrite(partial, frames, fps=fps, macro_block_size=16)
        os.replace(partial, path)
        self.frames = None
        return path

    def close(self) -> None:
        for envs in self.stages:
            for env in envs:
                env.close()
