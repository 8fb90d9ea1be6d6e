"""The episodes of a training step: which episode and task each env plays (its reset options), and the
per-task success they give, the training twin of the evaluation's table."""

from __future__ import annotations

from typing import Any

import numpy as np

from vlarl_trainer.config import VlarlConfig
from vlarl_trainer.rl.eval_env import env_tasks


def training_options(config: VlarlConfig, step: int, epoch: int) -> list[dict[str, Any]]:
    """Reset options of every env for one rollout epoch: episode ids drawn from (seed, step, epoch);
    GRPO groups of ``group_size`` consecutive envs share one id (one initial state).

    A multi-task env's tasks are dealt out in turn (a GRPO group shares one): every step plays
    each task as often as the env count allows, with less variance than tasks drawn at random,
    and when the env count (GRPO: group count) is a multiple of the task count each env keeps
    one task, so it builds one simulator instead of one per task (20 MT10 envs holding all 200
    MetaWorld simulators take 19 GB). Otherwise the deal rotates from step to step over all tasks. Only
    ``rollout.tasks`` are dealt where it names some, each as many times in a deal as
    ``rollout.task_repeats`` says (the env count then keeps one task per env at a multiple of the deal's
    length)."""
    rng = np.random.default_rng([config.runner.seed, step, epoch])
    num_envs = config.env.num_envs
    group = config.algorithm.group_size if config.algorithm.name == "grpo" else 1
    ids = np.repeat(rng.integers(0, 2**31, num_envs // group), group)
    tasks = dealt_tasks(config)
    units, deal = num_envs // group, step * config.rollout.rollout_epoch + epoch
    return [{"episode_id": int(episode_id), "split": "train",
             "task": tasks[(index // group + deal * units) % len(tasks)]}
            for index, episode_id in enumerate(ids)]


def training_tasks(config: VlarlConfig) -> list[str]:
    """``rollout.tasks``, or every task of the env; a ValueError names tasks the env does not play."""
    tasks = env_tasks(config)
    chosen = config.rollout.tasks
    if chosen is None:
        return tasks
    outside = [task for task in chosen if task not in tasks]
    if outside or not chosen or len(set(chosen)) != len(chosen):
        raise ValueError(f"rollout.tasks must be distinct tasks of {config.env.id} (with env.kwargs), at least one; "
                         f"got {list(chosen)}, of which {outside} it does not play; expected a subset of {tasks}")
    return list(chosen)


def dealt_tasks(config: VlarlConfig) -> list[str]:
    """One deal of the training tasks: each task ``rollout.task_repeats`` times in a row (default once);
    a ValueError names a repeated task that is not a training task or a count below 1."""
    tasks = training_tasks(config)
    repeats = dict(config.rollout.task_repeats)
    outside = [task for task in repeats if task not in tasks]
    below_one = {task: count for task, count in repeats.items() if count < 1}
    if outside or below_one:
        raise ValueError(f"rollout.task_repeats must map training tasks to counts of at least 1; got {repeats}, "
                         f"of which {outside} are not training tasks and {below_one} are below 1; the training "
                         f"tasks are {tasks}")
    return [task for task in tasks for _ in range(repeats.get(task, 1))]


def success_per_task(epochs: list[dict[str, Any]]) -> dict[str, float]:
    """``env/success_once/<task>``: a multi-task run's training success of each task, the ``eval/``
    table's twin; the mean alone hides one task rising while another falls."""
    tasks = [task for epoch in epochs for task in epoch["tasks"]]
    success = np.concatenate([epoch["success_once"] for epoch in epochs]).astype(np.float64)
    return {f"env/success_once/{task}": float(success[[t == task for t in tasks]].mean())
            for task in sorted(set(tasks)) if task}
