"""Gymnasium ids of the CALVIN family and the factory behind them."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym

from vlarl_envs.calvin.tasks import TASK_NAMES
from vlarl_envs.contract import validate_task_subset
from vlarl_envs.stack import make_contract_env, register_contract_env

CALVIN_SCENE_SETS = {"ABC": ("A", "B", "C"), "D": ("D",)}
"""The id suffix (``vlarl/CALVIN-<key>-v0``) of each scene set: CALVIN's training tables and its evaluation table."""

CALVIN_REWARD_MAX = 1.0
"""The env's reward is its sparse success (1 on a success step); ``dense`` passes it through."""


def calvin_env_id(scene_set: str) -> str:
    return f"vlarl/CALVIN-{scene_set}-v0"


def chosen_tasks(env_id: str, tasks: Sequence[str] | None) -> tuple[str, ...]:
    """CALVIN's 34 tasks, or ``tasks``, a subset of them in the given order."""
    return validate_task_subset(env_id, tasks, TASK_NAMES, "CALVIN")


def make_calvin_env(scene_set: str, tasks: Sequence[str] | None = None, env_id: str = "vlarl/CALVIN", **kwargs
                    ) -> gym.Env:
    """Build a CALVIN env with the contract's wrappers (the entry point of every id).

    Args:
        scene_set: "ABC" or "D".
        tasks: the subset of CALVIN's 34 tasks to play (default: all of them).
        env_id: the registered id, for error messages.
        **kwargs: ``CalvinEnv`` arguments (horizon, obs_mode, image_size, renderer, terminate_on_success, split,
            render_mode, max_simulators) and the wrappers' (reward_mode, action_chunk, video_dir; see
            ``vlarl_envs.stack.make_contract_env``).
    """
    from vlarl_envs.calvin.env import CalvinEnv

    if scene_set not in CALVIN_SCENE_SETS:
        raise ValueError(f"{env_id}: unknown CALVIN scene set {scene_set!r}; expected one of {list(CALVIN_SCENE_SETS)}")
    return make_contract_env(CalvinEnv, CALVIN_REWARD_MAX, scenes=CALVIN_SCENE_SETS[scene_set],
                             tasks=chosen_tasks(env_id, tasks), env_id=env_id, **kwargs)


def register_calvin() -> None:
    """Register ``vlarl/CALVIN-ABC-v0`` (scenes A, B and C) and ``vlarl/CALVIN-D-v0`` (scene D)."""
    for scene_set in CALVIN_SCENE_SETS:
        register_contract_env(calvin_env_id(scene_set), "vlarl_envs.calvin.registration:make_calvin_env",
                              scene_set=scene_set)
