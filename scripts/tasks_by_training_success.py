"""Pick the tasks a run's own rollouts solve sometimes, for RL on those tasks only (``rollout.tasks``).

RL reinforces outcomes its sampling reaches: a task its rollouts never solve gives it no signal, and one
they always solve has nothing left to gain. This reads a trainer run's metrics.jsonl, averages each
task's training success (``env/success_once/<task>``, which multi-task runs log every step) over the RL
steps ``--steps FIRST LAST``, prints every task's mean, and prints the tasks whose mean lies in
``[--between LOW HIGH)`` as the override that trains on them:

    uv run --locked python scripts/tasks_by_training_success.py \
        docs/results/main-job-runs/mt50-seed0/rl/metrics.jsonl --steps 1 10 --between 0.1 0.7

With ``--once LOW HIGH`` the tasks whose mean lies there train too, dealt once for each ``--repeats``
deals (default 2) of the ``--between`` tasks (``rollout.task_repeats``), so that the tasks SFT solves keep
playing while most episodes go to the ones RL can move; it prints the deal's length, of which
``env.num_envs`` is a multiple when each env keeps one task:

    uv run --locked python scripts/tasks_by_training_success.py \
        docs/results/main-job-runs/mt50-seed0/rl/metrics.jsonl --steps 1 10 --between 0.05 0.7 --once 0.7 1.01

The tasks come from training rollouts, so picking them does not look at the held-out test split.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from vlarl_trainer.metrics import read_metrics

TASK_SUCCESS_PREFIX = "env/success_once/"
"""What the trainer logs per task of a multi-task run (``vlarl_trainer.rl.training_episodes.success_per_task``)."""


def mean_training_success(metrics_path: Path, first: int, last: int) -> dict[str, float]:
    """Task -> its training success averaged over the RL steps ``first`` to ``last`` that logged it."""
    if first > last:
        raise ValueError(f"--steps takes FIRST <= LAST; got {first} {last}")
    logged: dict[str, list[float]] = {}
    for step, metrics in read_metrics(metrics_path).items():
        if first <= step <= last:
            for name, value in metrics.items():
                if name.startswith(TASK_SUCCESS_PREFIX):
                    logged.setdefault(name.removeprefix(TASK_SUCCESS_PREFIX), []).append(float(value))
    if not logged:
        raise ValueError(f"{metrics_path} logs no {TASK_SUCCESS_PREFIX}<task> between steps {first} and {last}; "
                         "a multi-task run logs it at every RL step")
    return {task: sum(values) / len(values) for task, values in logged.items()}


def least_solved_first(means: dict[str, float]) -> list[tuple[str, float]]:
    """``(task, mean)`` pairs from the least solved up, ties by name."""
    return sorted(means.items(), key=lambda item: (item[1], item[0]))


def tasks_between(means: dict[str, float], low: float, high: float) -> list[str]:
    """The tasks whose mean lies in ``[low, high)``, from the least solved up."""
    return [task for task, mean in least_solved_first(means) if low <= mean < high]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("metrics", type=Path, help="a trainer run's metrics.jsonl (a main job's rl/metrics.jsonl)")
    parser.add_argument("--steps", nargs=2, type=int, required=True, metavar=("FIRST", "LAST"),
                        help="the RL steps to average over, both included")
    parser.add_argument("--between", nargs=2, type=float, required=True, metavar=("LOW", "HIGH"),
                        help="keep the tasks whose mean training success is at least LOW and below HIGH")
    parser.add_argument("--once", nargs=2, type=float, metavar=("LOW", "HIGH"),
                        help="also train the tasks whose mean is at least LOW and below HIGH, dealt once for each "
                             "--repeats deals of the --between tasks")
    parser.add_argument("--repeats", type=int, default=2,
                        help="with --once: how many times a deal holds each --between task (default 2)")
    args = parser.parse_args(argv)
    means = mean_training_success(args.metrics, *args.steps)
    picked = tasks_between(means, *args.between)
    once = [task for task in tasks_between(means, *args.once) if task not in picked] if args.once else []
    for task, mean in least_solved_first(means):
        print(f"{task:32s} {mean:.2f}{'  *' if task in picked else '  +' if task in once else ''}")
    print(f"\n{len(picked)} of {len(means)} tasks in [{args.between[0]}, {args.between[1]}):")
    if not once:
        print(f"'rollout.tasks=[{','.join(picked)}]'")
        return
    overrides = repeated_overrides(picked, once, args.repeats)
    print(f"and {len(once)} in [{args.once[0]}, {args.once[1]}) dealt once for each {args.repeats} deals of them, "
          f"a deal of {len(picked) * args.repeats + len(once)} tasks:")
    print(overrides)


def repeated_overrides(repeated: list[str], once: list[str], repeats: int) -> str:
    """The ``rollout.tasks`` and ``rollout.task_repeats`` overrides that deal ``repeated`` ``repeats`` times for
    each deal of ``once``."""
    if repeats < 1:
        raise ValueError(f"--repeats must be at least 1, got {repeats}")
    counts = ",".join(f"{task}: {repeats}" for task in repeated)
    return f"'rollout.tasks=[{','.join(repeated + once)}]' 'rollout.task_repeats={{{counts}}}'"


if __name__ == "__main__":
    main()
