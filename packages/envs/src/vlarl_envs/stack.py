"""Composes a simulator env with the contract's wrappers in their fixed order, and registers the ids that do."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from vlarl_envs.wrappers import ActionChunk, EpisodeStatistics, RecordVideo, RewardMode

CONTRACT_SPEC = {"order_enforce": False, "disable_env_checker": True}
"""Registration settings of every vlarl id: gymnasium's OrderEnforcing and PassiveEnvChecker wrappers
stay off, since each env refuses a step before its reset and validates every action itself (the
contract's tests run gymnasium's check_env on each family); two fewer layers on every step."""

WRAPPER_KEYWORDS = ("reward_mode", "action_chunk", "video_dir")
"""The ``gym.make`` keywords of every id that configure the wrappers rather than the simulator env."""


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


def make_contract_env(env_class: Callable[..., gym.Env], dense_reward_max: float = 1.0, **kwargs: Any) -> gym.Env:
    """What every id's entry point returns: ``env_class`` built from the id's ``gym.make`` keywords and wrapped by
    ``wrap_contract``, which takes the ``WRAPPER_KEYWORDS`` among them; the env takes all others.

    Args:
        env_class: the family's simulator env, imported by the entry point (registration imports no simulator).
        dense_reward_max: the simulator's largest dense reward (see ``wrap_contract``).
    """
    wrapping = {key: kwargs.pop(key) for key in WRAPPER_KEYWORDS if key in kwargs}
    return wrap_contract(env_class(**kwargs), dense_reward_max=dense_reward_max, **wrapping)


def register_contract_env(env_id: str, entry_point: str, vector_entry_point: str | None = None, **kwargs: Any) -> None:
    """Register ``env_id`` with ``CONTRACT_SPEC``: ``gym.make`` calls ``entry_point`` with ``env_id`` (which the env
    names in its errors) and ``kwargs`` (the id's task, suite or scenes) besides the caller's keywords."""
    gym.register(id=env_id, entry_point=entry_point, vector_entry_point=vector_entry_point,
                 kwargs={"env_id": env_id, **kwargs}, **CONTRACT_SPEC)
