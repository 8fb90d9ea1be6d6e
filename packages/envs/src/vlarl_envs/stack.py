"""Composes a simulator env with the contract's wrappers in their fixed order."""

from __future__ import annotations

import os

import gymnasium as gym

from vlarl_envs.wrappers import ActionChunk, EpisodeStatistics, RecordVideo, RewardMode

CONTRACT_SPEC = {"order_enforce": False, "disable_env_checker": True}
"""Registration settings of every vlarl id: gymnasium's OrderEnforcing and PassiveEnvChecker wrappers
stay off, since each env refuses a step before its reset and validates every action itself (the
contract's tests run gymnasium's check_env on each family); two fewer layers on every step."""


def wrap_contract(
    env: gym.Env,
    reward_mode: str = "sparse",
    dense_reward_max: float = 1.0,
    action_chunk: int | None = None,
    video_dir: str | os.PathLike | None = None,
    video_fps: int = 10,
) -> gym.Env:
    """simulator (with instruction) -> reward mode -> action chunk -> episode statistics -> video.

    Args:
        env: the simulator env, already producing the contract's observations.
        reward_mode: "sparse", "only_at_end", "dense", "shaped" or "progress" (see ``RewardMode``).
        dense_reward_max: the simulator's largest dense reward; "shaped" and "progress" divide by it.
        action_chunk: None for single actions, or C for ``(C, A)`` chunk actions.
        video_dir: where to write episode mp4s; None records nothing.
        video_fps: frames per second of those videos.
    """
    env = RewardMode(env, reward_mode, dense_reward_max)
    if action_chunk is not None:
        env = ActionChunk(env, action_chunk)
    env = EpisodeStatistics(env)
    if video_dir is not None:
        env = RecordVideo(env, video_dir, fps=video_fps)
    return env
