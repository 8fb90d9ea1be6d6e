"""Gymnasium ids of the LIBERO family and the factory behind them."""

from __future__ import annotations

import os
from collections.abc import Sequence

import gymnasium as gym

from vlarl_envs.libero.suites import (
    LIBERO_SUITES,
    PERTURBATIONS,
    LiberoTask,
    available_splits,
    perturbation_tasks,
    suite_tasks,
)
from vlarl_envs.stack import CONTRACT_SPEC, wrap_contract

LIBERO_REWARD_MAX = 1.0
"""The env's own reward is its goal progress in [0, 1] (``vlarl_envs.libero.progress``), which ``dense``
pays as it stands and ``shaped`` uses as its potential."""


def libero_env_id(suite: str) -> str:
    return f"vlarl/LIBERO-{suite}-v0"


def chosen_tasks(env_id: str, suite: str, tasks: Sequence[str] | None) -> tuple[LiberoTask, ...]:
    """The suite's tasks, or ``tasks``, a subset of them by LIBERO task name, in the given order."""
    if suite not in LIBERO_SUITES:
        raise ValueError(f"{env_id}: unknown LIBERO suite {suite!r}; expected one of {list(LIBERO_SUITES)}")
    available = {task.name: task for task in suite_tasks(LIBERO_SUITES[suite].name)}
    if tasks is None:
        return tuple(available.values())
    if isinstance(tasks, str) or not tasks:
        raise ValueError(f"{env_id}: tasks must be a non-empty list of task names, got {tasks!r}")
    unknown = [name for name in tasks if name not in available]
    if unknown or len(set(tasks)) != len(tasks):
        raise ValueError(f"{env_id}: tasks must be distinct tasks of LIBERO-{suite}, got {list(tasks)}; "
                         f"{'unknown: ' + str(unknown) if unknown else 'repeated names'}; expected a subset of "
                         f"{list(available)}")
    return tuple(available[name] for name in tasks)


def chosen_perturbation_tasks(suite: str, tasks: Sequence[LiberoTask]) -> dict[str, tuple[LiberoTask, ...]]:
    """For each OOD split installed for the suite, its perturbed tasks of the same names as ``tasks``."""
    suite_name = LIBERO_SUITES[suite].name
    names = [task.name for task in tasks]
    splits = [split for split in available_splits(suite_name) if split in PERTURBATIONS]
    perturbed = {split: {task.name: task for task in perturbation_tasks(suite_name, split)} for split in splits}
    return {split: tuple(perturbed[split][name] for name in names) for split in splits}


def make_libero_env(
    suite: str,
    tasks: Sequence[str] | None = None,
    env_id: str = "vlarl/LIBERO",
    horizon: int | None = None,
    reward_mode: str = "sparse",
    action_chunk: int | None = None,
    video_dir: str | os.PathLike | None = None,
    **env_kwargs,
) -> gym.Env:
    """Build a LIBERO env with the contract's wrappers (the entry point of every id).

    Args:
        suite: "Spatial", "Object", "Goal", "10" or "90".
        tasks: the subset of the suite's tasks to play (default: all of them).
        env_id: the registered id, for error messages.
        horizon: policy steps before truncation; default the suite's (220, 280, 300, 520, 400).
        reward_mode, action_chunk, video_dir: see ``vlarl_envs.stack.wrap_contract``.
        **env_kwargs: ``LiberoEnv`` arguments (obs_mode, image_size, fast_render,
            terminate_on_success, split, settle_steps, train_shift, render_mode).
    """
    from vlarl_envs.libero.env import LiberoEnv

    base_tasks = chosen_tasks(env_id, suite, tasks)
    env = LiberoEnv(
        tasks=base_tasks,
        perturbed_tasks=chosen_perturbation_tasks(suite, base_tasks),
        horizon=LIBERO_SUITES[suite].horizon if horizon is None else horizon,
        env_id=env_id,
        **env_kwargs,
    )
    return wrap_contract(
        env,
        reward_mode=reward_mode,
        dense_reward_max=LIBERO_REWARD_MAX,
        action_chunk=action_chunk,
        video_dir=video_dir,
    )


def register_libero() -> None:
    """Register ``vlarl/LIBERO-<suite>-v0`` for Spatial, Object, Goal, 10 (Long) and 90."""
    for suite in LIBERO_SUITES:
        env_id = libero_env_id(suite)
        gym.register(id=env_id, entry_point="vlarl_envs.libero.registration:make_libero_env",
                     kwargs={"suite": suite, "env_id": env_id}, **CONTRACT_SPEC)
