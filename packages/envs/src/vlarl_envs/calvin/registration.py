"""Gymnasium ids of the CALVIN family and the factory behind them."""

from __future__ import annotations

import os
from collections.abc import Sequence

import gymnasium as gym

from vlarl_envs.calvin.tasks import TASK_NAMES
from vlarl_envs.stack import CONTRACT_SPEC, wrap_contract

CALVIN_SCENE_SETS = {"ABC": ("A", "B", "C"), "D": ("D",)}
"""The id suffix (``vlarl/CALVIN-<key>-v0``) of each scene set: CALVIN's training tables and its evaluation table."""

CALVIN_REWARD_MAX = 1.0
"""The env's reward is its sparse success (1 on a success step); ``dense`` passes it through."""


def calvin_env_id(scene_set: str) -> str:
    return f"vlarl/CALVIN-{scene_set}-v0"


def chosen_tasks(env_id: str, tasks: Sequence[str] | None) -> tuple[str, ...]:
    """CALVIN's 34 tasks, or ``tasks``, a subset of them in the given order."""
    if tasks is None:
        return TASK_NAMES
    if isinstance(tasks, str) or not tasks:
        raise ValueError(f"{env_id}: tasks must be a non-empty list of task names, got {tasks!r}")
    unknown = [name for name in tasks if name not in TASK_NAMES]
    if unknown or len(set(tasks)) != len(tasks):
        raise ValueError(f"{env_id}: tasks must be distinct CALVIN tasks, got {list(tasks)}; "
                         f"{'unknown: ' + str(unknown) if unknown else 'repeated names'}; expected a subset of "
                         f"{list(TASK_NAMES)}")
    return tuple(tasks)


def make_calvin_env(
    scene_set: str,
    tasks: Sequence[str] | None = None,
    env_id: str = "vlarl/CALVIN",
    reward_mode: str = "sparse",
    action_chunk: int | None = None,
    video_dir: str | os.PathLike | None = None,
    **env_kwargs,
) -> gym.Env:
    """Build a CALVIN env with the contract's wrappers (the entry point of every id).

    Args:
        scene_set: "ABC" or "D".
        tasks: the subset of CALVIN's 34 tasks to play (default: all of them).
        env_id: the registered id, for error messages.
        reward_mode, action_chunk, video_dir: see ``vlarl_envs.stack.wrap_contract``.
        **env_kwargs: ``CalvinEnv`` arguments (horizon, obs_mode, image_size, renderer, terminate_on_success,
            split, render_mode).
    """
    from vlarl_envs.calvin.env import CalvinEnv

    if scene_set not in CALVIN_SCENE_SETS:
        raise ValueError(f"{env_id}: unknown CALVIN scene set {scene_set!r}; expected one of {list(CALVIN_SCENE_SETS)}")
    env = CalvinEnv(scenes=CALVIN_SCENE_SETS[scene_set], tasks=chosen_tasks(env_id, tasks), env_id=env_id, **env_kwargs)
    return wrap_contract(env, reward_mode=reward_mode, dense_reward_max=CALVIN_REWARD_MAX,
                         action_chunk=action_chunk, video_dir=video_dir)


def register_calvin() -> None:
    """Register ``vlarl/CALVIN-ABC-v0`` (scenes A, B and C) and ``vlarl/CALVIN-D-v0`` (scene D)."""
    for scene_set in CALVIN_SCENE_SETS:
        env_id = calvin_env_id(scene_set)
        gym.register(id=env_id, entry_point="vlarl_envs.calvin.registration:make_calvin_env",
                     kwargs={"scene_set": scene_set, "env_id": env_id}, **CONTRACT_SPEC)
