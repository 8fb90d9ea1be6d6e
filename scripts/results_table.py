"""Print the README's Results tables from main-job records, so no figure there is copied by hand.

    uv run --locked python scripts/results_table.py docs/results/main-job-runs/main-full-goal5-seed{0,1,2} \
        --steps 60 100

Each argument is a main job's run directory (its results.json, or the job.json of a job still
running or stopped, and rl/metrics.jsonl) or a record kept from one (those files side by side).
The tables read the held-out evaluations the trainer logged in metrics.jsonl: success per run
before RL and after each of ``--steps`` with the lift in points ("-" where a run has not got
there), each job's wall time to its last evaluation, success per task before RL and after the last
step, and every evaluation's mean as a learning curve in text. With ``--groups`` (MT50's ``easy medium
hard very_hard``), a table of each run's success per group before RL and after the last step, the
groups' unweighted mean (RLinf's "Avg.") and the mean over every episode. With ``--splits``, a table of
each named split's success and lift (CALVIN's ``test abc_test``). With ``--chains``, a table of
CALVIN's chains: the success of 1 to 5 tasks in a row and the average length, before RL and after each
of ``--steps``. A run whose config trained on some of the tasks only (``rollout.tasks``) also gets a table
of the trained tasks' and the other tasks' success, before RL and after each of ``--steps``, on the test
split or on each of ``--splits``; one where ``rollout.task_repeats`` deals some tasks more often has a row
for each count of deals.

    uv run --locked python scripts/results_table.py docs/results/main-job-runs/mt50-seed0 --steps 15 30 \
        --groups easy medium hard very_hard
    uv run --locked python scripts/results_table.py docs/results/main-job-runs/calvin-seed0 --steps 20 40 --chains
    uv run --locked python scripts/results_table.py <calvin job> --steps 20 40 --splits test abc_test

A job's wall time is its results.json total when the job ran exactly to that evaluation; otherwise
(a run continued past its job's last step with ``vlarl-train resume=<run>/rl runner.max_steps=N``,
or a job that has not finished) it is the job's collect and SFT time plus every step and
evaluation time metrics.jsonl logged up to there, marked with ``*``: this leaves out the seconds
each process spends starting. A job finished with ``vlarl-main-job --resume`` counts its steps
before the stop the same way in its total, so its time is marked too.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

from vlarl_trainer.metrics import logged_seconds, read_metrics

MEAN_METRIC = "eval/success_once"
TEST_SPLIT = "test"
"""The split the per-task table reads, and the trained-task table where ``--splits`` names none."""
CHAIN_LENGTH = 5
CHAIN_SUCCESS_METRICS = [f"eval/chains/success_{k}" for k in range(1, CHAIN_LENGTH + 1)]
CHAIN_AVERAGE_LENGTH_METRIC = "eval/chains/average_length"
"""What the trainer logs for CALVIN's chains (``vlarl_trainer.rl.evaluation.CHAIN_PREFIX``)."""


def task_metric_prefix(split: str) -> str:
    """What the evaluator logs a task's success on ``split`` as, before the task's name."""
    return f"eval/{split}/success_once/"


@dataclass(frozen=True)
class RunRecord:
    """One main job's settings and stage times (results.json or job.json) and its metrics.jsonl."""

    name: str
    seed: int
    job_steps: int
    """The RL steps the job itself runs (its preset's); the metrics may go further or stop short."""
    job_seconds: dict[str, float]
    """Stage times; ``total`` only once the job has finished."""
    resumed: bool
    """Whether ``vlarl-main-job --resume`` finished the job, so its total sums logged step times."""
    evaluations: dict[int, dict[str, float]]
    """RL step -> the ``eval/`` metrics logged after it (step 0: before RL)."""
    logged_seconds: dict[int, float]
    """RL step -> the seconds its training step and its evaluation (if any) took."""
    trained_tasks: tuple[str, ...] = ()
    """The config's ``rollout.tasks``: the tasks RL played, where it played some of them only."""
    task_repeats: dict[str, int] = field(default_factory=dict)
    """The config's ``rollout.task_repeats``: how many times a step dealt the named trained tasks."""

    def success(self, step: int, metric: str = MEAN_METRIC) -> float:
        if step not in self.evaluations:
            raise ValueError(f"{self.name} has no evaluation after step {step}; it has {sorted(self.evaluations)}")
        if metric not in self.evaluations[step]:
            raise ValueError(f"{self.name}'s evaluation after step {step} logs no {metric}")
        return self.evaluations[step][metric]

    def lift(self, step: int, metric: str = MEAN_METRIC) -> float:
        """Points of held-out success (``metric``: the mean by default) gained from before RL to after ``step``."""
        return 100 * (self.success(step, metric) - self.success(0, metric))

    def tasks(self, split: str = TEST_SPLIT) -> list[str]:
        prefix = task_metric_prefix(split)
        return sorted(key.removeprefix(prefix) for key in self.evaluations[0] if key.startswith(prefix))

    def mean_over_tasks(self, step: int, tasks: list[str], split: str = TEST_SPLIT) -> float:
        """The mean success of ``tasks`` on ``split`` after ``step``: their episodes' mean, each task scoring
        as many episodes."""
        return sum(self.success(step, task_metric_prefix(split) + task) for task in tasks) / len(tasks)

    def has(self, step: int) -> bool:
        return step in self.evaluations

    def last_evaluated(self, up_to: int) -> int:
        return max(step for step in self.evaluations if step <= up_to)

    def wall_minutes(self, last_step: int) -> tuple[float, bool]:
        """Minutes the whole job takes to ``last_step``, and whether they are summed from logged times."""
        if last_step == self.job_steps and "total" in self.job_seconds:
            return self.job_seconds["total"] / 60, self.resumed
        seconds = self.job_seconds["collect"] + self.job_seconds["sft"]
        seconds += sum(value for step, value in self.logged_seconds.items() if step <= last_step)
        return seconds / 60, True


def record_files(path: Path) -> tuple[Path, Path]:
    """The results.json (else job.json) and metrics.jsonl of a main job's run directory or of a record kept from one."""
    job = next((path / name for name in ("results.json", "job.json") if (path / name).is_file()), None)
    metrics = next((candidate for candidate in (path / "metrics.jsonl", path / "rl" / "metrics.jsonl")
                    if candidate.is_file()), None)
    if job is None or metrics is None:
        raise FileNotFoundError(f"{path} holds no results.json or job.json with a metrics.jsonl beside it or in rl/")
    return job, metrics


def job_seed(job: dict) -> int:
    """The seed of a results.json or job.json: a top-level entry, or the config tree's ``runner.seed``."""
    return int(job["seed"] if "seed" in job else job["config"]["runner"]["seed"])


def job_steps(job: dict) -> int:
    """The RL steps a job runs: its config tree's ``runner.max_steps``, or the preset's in records written
    before the main job read one config tree."""
    return int(job["config"]["runner"]["max_steps"] if "config" in job else job["preset"]["rl"]["steps"])


def job_rollout(job: dict) -> dict:
    """The config tree's ``rollout`` settings (empty in records written before the main job kept its tree)."""
    return job.get("config", {}).get("rollout", {})


def job_trained_tasks(job: dict) -> tuple[str, ...]:
    """The config tree's ``rollout.tasks``, empty where the run trained on every task."""
    return tuple(job_rollout(job).get("tasks") or ())


def read_record(path: Path) -> RunRecord:
    job_path, metrics_path = record_files(path)
    job = json.loads(job_path.read_text())
    evaluations = {step: {key: float(value) for key, value in logged.items() if key.startswith("eval/")}
                   for step, logged in read_metrics(metrics_path).items() if MEAN_METRIC in logged}
    if 0 not in evaluations:
        raise ValueError(f"{metrics_path} logs no evaluation before RL (step 0); run the job with eval.at_start=true")
    return RunRecord(name=path.name, seed=int(job_seed(job)), job_steps=job_steps(job),
                     job_seconds=job["seconds"], resumed=job.get("resumed_from_step") is not None,
                     evaluations=evaluations, logged_seconds=logged_seconds(metrics_path),
                     trained_tasks=job_trained_tasks(job),
                     task_repeats=dict(job_rollout(job).get("task_repeats") or {}))


def seed_table(records: list[RunRecord], steps: list[int]) -> str:
    header = ["seed", "run", "SFT (before RL)", *(f"after {step} RL steps (lift)" for step in steps),
              "wall time of the whole job"]
    lines = [table_row(header), table_row(["---"] * len(header))]
    for record in records:
        last = record.last_evaluated(steps[-1])
        minutes, summed = record.wall_minutes(last)
        lines.append(table_row([str(record.seed), f"`{record.name}`", f"{record.success(0):.2f}",
                                *(success_and_lift(record, step) for step in steps),
                                f"{minutes:.0f} min{'*' if summed else ''} to step {last}"]))
    return "\n".join(lines)


def success_and_lift(record: RunRecord, step: int, metric: str = MEAN_METRIC) -> str:
    if not record.has(step):
        return "-"
    return value_and_lift(record.success(step, metric), record.success(0, metric))


def value_and_lift(after: float, before: float) -> str:
    """``0.45 (+16)``: a success after some RL steps and its lift in points over ``before``."""
    return f"{after:.2f} ({round(100 * (after - before)):+d})"


def task_table(records: list[RunRecord], last_step: int) -> str:
    header = ["task"] + [f"seed {record.seed} {when}" for record in records for when in ("before", "after")]
    lines = [table_row(header), table_row(["---"] * len(header))]
    for task in records[0].tasks():
        metric = task_metric_prefix(TEST_SPLIT) + task
        lines.append(table_row([task] + [f"{record.success(step, metric):.1f}"
                                         for record in records for step in (0, last_step)]))
    return "\n".join(lines)


def group_table(records: list[RunRecord], last_step: int, groups: list[str], split: str) -> str:
    """Success per group of ``split`` before RL and after ``last_step``, one row each, then the groups'
    unweighted mean and every episode's mean."""
    header = ["seed", "run", "policy", *groups, "mean of groups", "all episodes"]
    lines = [table_row(header), table_row(["---"] * len(header))]
    for record in records:
        for step, label in ((0, "SFT"), (last_step, f"SFT + {last_step} RL steps")):
            cells = [f"{record.success(step, f'eval/{split}/group_success_once/{group}'):.2f}" for group in groups]
            cells += [f"{record.success(step, f'eval/{split}/group_mean_success_once'):.2f}",
                      f"{record.success(step):.2f}"]
            lines.append(table_row([str(record.seed), f"`{record.name}`", label, *cells]))
    return "\n".join(lines)


def split_table(records: list[RunRecord], steps: list[int], splits: list[str]) -> str:
    """Each of ``splits``' success (``eval/<split>/success_once``) before RL and after each of ``steps``, with
    the lift, one row per run and split: CALVIN's ``test`` on scene D beside ``abc_test`` on A-C."""
    header = ["seed", "run", "split", "SFT (before RL)", *(f"after {step} RL steps (lift)" for step in steps)]
    lines = [table_row(header), table_row(["---"] * len(header))]
    for record in records:
        for split in splits:
            metric = f"eval/{split}/success_once"
            lines.append(table_row([str(record.seed), f"`{record.name}`", split, f"{record.success(0, metric):.2f}",
                                    *(success_and_lift(record, step, metric) for step in steps)]))
    return "\n".join(lines)


def trained_table(records: list[RunRecord], steps: list[int], splits: tuple[str, ...] = (TEST_SPLIT,)) -> str:
    """The success of the tasks RL trained on (``rollout.tasks``) and of the others on each of ``splits``,
    before RL and after each of ``steps``, with the lift: two rows per run and split where a run trained on
    some tasks only, or one for each count of deals (``rollout.task_repeats``) and the others."""
    header = ["seed", "run", "split", "tasks", "SFT (before RL)", *(f"after {step} RL steps (lift)" for step in steps)]
    lines = [table_row(header), table_row(["---"] * len(header))]
    for record in records:
        for split in splits:
            every_task = record.tasks(split)
            unknown = sorted(set(record.trained_tasks) - set(every_task))
            if unknown:
                raise ValueError(f"{record.name} trained on {unknown}, which its evaluation does not score on "
                                 f"{split}; it scores {every_task}")
            others = [task for task in every_task if task not in record.trained_tasks]
            for label, tasks in (*trained_rows(record), (f"others ({len(others)})", others)):
                if not tasks:
                    continue
                before = record.mean_over_tasks(0, tasks, split)
                cells = [value_and_lift(record.mean_over_tasks(step, tasks, split), before)
                         if record.has(step) else "-" for step in steps]
                lines.append(table_row([str(record.seed), f"`{record.name}`", split, label, f"{before:.2f}", *cells]))
    return "\n".join(lines)


def trained_rows(record: RunRecord) -> list[tuple[str, list[str]]]:
    """The trained tasks as one row, or with ``rollout.task_repeats`` one row per count of deals, most first."""
    if not record.task_repeats:
        return [(f"trained ({len(record.trained_tasks)})", list(record.trained_tasks))]
    by_count: dict[int, list[str]] = {}
    for task in record.trained_tasks:
        by_count.setdefault(record.task_repeats.get(task, 1), []).append(task)
    return [(f"dealt {count}x ({len(tasks)})", tasks) for count, tasks in sorted(by_count.items(), reverse=True)]


def chain_table(records: list[RunRecord], steps: list[int]) -> str:
    """CALVIN's chain figures before RL and after each of ``steps`` a run has reached, one row each."""
    header = ["seed", "run", "policy", *(f"{k}/{CHAIN_LENGTH}" for k in range(1, CHAIN_LENGTH + 1)), "average length"]
    lines = [table_row(header), table_row(["---"] * len(header))]
    for record in records:
        for step in [0, *(step for step in steps if record.has(step))]:
            rates = [f"{100 * record.success(step, metric):.0f}%" for metric in CHAIN_SUCCESS_METRICS]
            label = "SFT" if step == 0 else f"SFT + {step} RL steps"
            lines.append(table_row([str(record.seed), f"`{record.name}`", label, *rates,
                                    f"{record.success(step, CHAIN_AVERAGE_LENGTH_METRIC):.2f}"]))
    return "\n".join(lines)


def curves_text(records: list[RunRecord], last_step: int) -> str:
    """Every evaluation's mean up to ``last_step``, one clause per run (named by its seed while that is unique)."""
    seeds = [record.seed for record in records]

    def label(record: RunRecord) -> str:
        return f"seed {record.seed}" if seeds.count(record.seed) == 1 else f"seed {record.seed} (`{record.name}`)"

    return "; ".join(label(record) + " " + ", ".join(f"{record.success(step):.2f}" for step in sorted(
        record.evaluations) if step <= last_step) for record in records)


def table_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="main-job run directories or records kept from them")
    parser.add_argument("--steps", nargs="+", type=int, required=True,
                        help="RL steps whose evaluation gets a column; the last is the 'after' column")
    parser.add_argument("--groups", nargs="+", default=[],
                        help="the env family's groups, in column order (MT50: easy medium hard very_hard)")
    parser.add_argument("--split", default=TEST_SPLIT, help="the split whose groups --groups reads (default: test)")
    parser.add_argument("--splits", nargs="+", default=[],
                        help="also a table of these splits' success and lift (CALVIN: test abc_test)")
    parser.add_argument("--chains", action="store_true",
                        help="also CALVIN's chains (success of 1-5 tasks in a row, average length)")
    args = parser.parse_args(argv)
    records = [read_record(path) for path in args.runs]
    last = args.steps[-1]
    print(seed_table(records, args.steps))
    finished = [record for record in records if record.has(last)]
    if finished:
        lifts = [record.lift(last) for record in finished]
        print(f"\nLift after {last} RL steps, {len(finished)} of {len(records)} runs there: mean "
              f"{sum(lifts) / len(lifts):+.0f} points, smallest {min(lifts):+.0f}.\n")
        print(task_table(finished, last))
        if args.groups:
            print("\n" + group_table(finished, last, args.groups, args.split))
    trained_on_some = [record for record in records if record.trained_tasks]
    if trained_on_some:
        print("\n" + trained_table(trained_on_some, args.steps, tuple(args.splits) or (TEST_SPLIT,)))
    if args.splits:
        print("\n" + split_table(records, args.steps, args.splits))
    if args.chains:
        print("\n" + chain_table(records, args.steps))
    print(f"\nHeld-out success at every evaluation: {curves_text(records, last)}.")


if __name__ == "__main__":
    main()
