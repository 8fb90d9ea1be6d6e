"""Gymnasium ids of the MetaWorld family and the factory behind them."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym

from vlarl_envs.contract import validate_task_subset
from vlarl_envs.metaworld.instructions import METAWORLD_INSTRUCTIONS
from vlarl_envs.stack import make_contract_env, register_contract_env

METAWORLD_TASKS = tuple(METAWORLD_INSTRUCTIONS.sentences)
"""The 50 v3 task names (``reach-v3``, ...); a test checks them against MetaWorld's own list."""

METAWORLD_SUITES = ("MT10", "MT50", "ML45-train", "ML45-test")

METAWORLD_DENSE_REWARD_MAX = 10.0
"""MetaWorld v3's dense rewards lie in [0, 10]; the ``shaped`` reward mode scales them to [0, 1]."""


def suite_tasks(suite: str) -> tuple[str, ...]:
    """Task names of a MetaWorld benchmark suite."""
    from vlarl_envs.metaworld.tasks import load_metaworld

    metaworld = load_metaworld()
    by_suite = {
        "MT10": metaworld.MT10,
        "MT50": tuple(metaworld.ALL_V3_ENVIRONMENTS),
        "ML45-train": metaworld.ML45_TRAIN,
        "ML45-test": metaworld.ML45_TEST,
    }
    if suite not in by_suite:
        raise ValueError(f"unknown MetaWorld suite {suite!r}; expected one of {sorted(by_suite)}")
    return by_suite[suite]


def chosen_tasks(env_id: str, task: str | None, suite: str | None, tasks: Sequence[str] | None) -> tuple[str, ...]:
    """The tasks an id plays: its one task, its suite's, or ``tasks``, a subset of the suite's in the given order.

    A subset keeps the suite's id (and so its family, experts and difficulty groups) while training
    and evaluating on fewer tasks, e.g. the four MT10 tasks the demo trains on.
    """
    if (task is None) == (suite is None):
        raise ValueError(f"{env_id}: give exactly one of task or suite, got task={task!r}, suite={suite!r}")
    if task is not None:
        if tasks is not None:
            raise ValueError(f"{env_id} is the single task {task!r}; tasks={list(tasks)!r} applies to suite ids "
                             f"such as vlarl/MetaWorld-MT10-v3")
        return (task,)
    return validate_task_subset(env_id, tasks, suite_tasks(suite), suite)


def make_metaworld_env(
    task: str | None = None,
    suite: str | None = None,
    tasks: Sequence[str] | None = None,
    env_id: str = "vlarl/MetaWorld",
    **kwargs,
) -> gym.Env:
    """Build a MetaWorld env with the contract's wrappers (the entry point of every id).

    Args:
        task: one task name (``reach-v3``), or None with ``suite``.
        suite: "MT10", "MT50", "ML45-train" or "ML45-test".
        tasks: with ``suite``, the subset of its tasks to play (default: all of them).
        env_id: the registered id, for error messages.
        **kwargs: ``MetaWorldEnv`` arguments (obs_mode, image_size, fast_render, horizon, terminate_on_success,
            split, render_mode) and the wrappers' (reward_mode, action_chunk, video_dir; see
            ``vlarl_envs.stack.make_contract_env``).
    """
    from vlarl_envs.metaworld.env import MetaWorldEnv

    return make_contract_env(MetaWorldEnv, METAWORLD_DENSE_REWARD_MAX, tasks=chosen_tasks(env_id, task, suite, tasks),
                             env_id=env_id, **kwargs)


def register_metaworld() -> None:
    """Register ``vlarl/MetaWorld-<task>`` for every task and ``vlarl/MetaWorld-<suite>-v3``."""
    entry_point = "vlarl_envs.metaworld.registration:make_metaworld_env"
    for task in METAWORLD_TASKS:
        register_contract_env(f"vlarl/MetaWorld-{task}", entry_point, task=task)
    for suite in METAWORLD_SUITES:
        register_contract_env(f"vlarl/MetaWorld-{suite}-v3", entry_point, suite=suite)
