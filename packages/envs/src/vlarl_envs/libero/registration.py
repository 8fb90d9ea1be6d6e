"""Gymnasium ids of the LIBERO family and the factory behind them."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym

from vlarl_envs.contract import validate_task_subset
from vlarl_envs.libero.suites import (
    LIBERO_SUITES,
    PERTURBATIONS,
    LiberoTask,
    available_splits,
    perturbation_tasks,
    suite_tasks,
)
from vlarl_envs.stack import make_contract_env, register_contract_env

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
    return tuple(available[name] for name in validate_task_subset(env_id, tasks, list(available), f"LIBERO-{suite}"))


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
    **kwargs,
) -> gym.Env:
    """Build a LIBERO env with the contract's wrappers (the entry point of every id).

    Args:
        suite: "Spatial", "Object", "Goal", "10" or "90".
        tasks: the subset of the suite's tasks to play (default: all of them).
        env_id: the registered id, for error messages.
        horizon: policy steps before truncation; default the suite's (220, 280, 300, 520, 400).
        **kwargs: ``LiberoEnv`` arguments (obs_mode, image_size, fast_render, terminate_on_success, split,
            settle_steps, train_shift, render_mode) and the wrappers' (reward_mode, action_chunk, video_dir; see
            ``vlarl_envs.stack.make_contract_env``).
    """
    from vlarl_envs.libero.env import LiberoEnv

    base_tasks = chosen_tasks(env_id, suite, tasks)
    return make_contract_env(
        LiberoEnv,
        LIBERO_REWARD_MAX,
        tasks=base_tasks,
        perturbed_tasks=chosen_perturbation_tasks(suite, base_tasks),
        horizon=LIBERO_SUITES[suite].horizon if horizon is None else horizon,
        env_id=env_id,
        **kwargs,
    )


def register_libero() -> None:
    """Register ``vlarl/LIBERO-<suite>-v0`` for Spatial, Object, Goal, 10 (Long) and 90."""
    for suite in LIBERO_SUITES:
        register_contract_env(libero_env_id(suite), "vlarl_envs.libero.registration:make_libero_env", suite=suite)
