"""Gymnasium ids of the MetaWorld family and the factory behind them."""

from __future__ import annotations

import os
from collections.abc import Sequence

import gymnasium as gym

from vlarl_envs.metaworld.instructions import METAWORLD_INSTRUCTIONS
from vlarl_envs.stack import CONTRACT_SPEC, wrap_contract

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
    available = suite_tasks(suite)
    if tasks is None:
        return tuple(available)
    if isinstance(tasks, str) or not tasks:
        raise ValueError(f"{env_id}: tasks must be a non-empty list of task names, got {tasks!r}")
    unknown = [name for name in tasks if name not in available]
    if unknown or len(set(tasks)) != len(tasks):
        raise ValueError(f"{env_id}: tasks must be distinct tasks of {suite}, got {list(tasks)}; "
                         f"{'unknown: ' + str(unknown) if unknown else 'repeated names'}; expected a subset of "
                         f"{list(available)}")
    return tuple(tasks)


def make_metaworld_env(
    task: str | None = None,
    suite: str | None = None,
    tasks: Sequence[str] | None = None,
    env_id: str = "vlarl/MetaWorld",
    reward_mode: str = "sparse",
    action_chunk: int | None = None,
    video_dir: str | os.PathLike | None = None,
    **env_kwargs,
) -> gym.Env:
    """Build a MetaWorld env with the contract's wrappers (the entry point of every id).

    Args:
        task: one task name (``reach-v3``), or None with ``suite``.
        suite: "MT10", "MT50", "ML45-train" or "ML45-test".
        tasks: with ``suite``, the subset of its tasks to play (default: all of them).
        env_id: the registered id, for error messages.
        reward_mode, action_chunk, video_dir: see ``vlarl_envs.stack.wrap_contract``.
        **env_kwargs: ``MetaWorldEnv`` arguments (obs_mode, image_size, fast_render,
            horizon, terminate_on_success, split, render_mode).
    """
    from vlarl_envs.metaworld.env import MetaWorldEnv

    env = MetaWorldEnv(tasks=chosen_tasks(env_id, task, suite, tasks), env_id=env_id, **env_kwargs)
    return wrap_contract(
        env,
        reward_mode=reward_mode,
        dense_reward_max=METAWORLD_DENSE_REWARD_MAX,
        action_chunk=action_chunk,
        video_dir=video_dir,
    )


def register_metaworld() -> None:
    """Register ``vlarl/MetaWorld-<task>`` for every task and ``vlarl/MetaWorld-<suite>-v3``."""
    entry_point = "vlarl_envs.metaworld.registration:make_metaworld_env"
    for task in METAWORLD_TASKS:
        env_id = f"vlarl/MetaWorld-{task}"
        gym.register(id=env_id, entry_point=entry_point, kwargs={"task": task, "env_id": env_id}, **CONTRACT_SPEC)
    for suite in METAWORLD_SUITES:
        env_id = f"vlarl/MetaWorld-{suite}-v3"
        gym.register(id=env_id, entry_point=entry_point, kwargs={"suite": suite, "env_id": env_id}, **CONTRACT_SPEC)
