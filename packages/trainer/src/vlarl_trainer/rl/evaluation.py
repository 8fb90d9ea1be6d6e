"""Evaluation on a replayable episode list: fixed episode ids per task and split, deterministic
actions, success per task and per split.

The one evaluator of vlarl: the trainer runs ``evaluate`` on its own workers, and vlarl-eval and
vlarl-sft run ``evaluate_checkpoint``, which starts the same env and rollout workers for a saved
policy, so a checkpoint scores the same whichever command scores it."""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from vlarl_trainer.config import VlarlConfig
from vlarl_trainer.rl.rollout import Shards, run_episodes

STATISTICS = ("success_once", "success_at_end", "return", "episode_len")


def env_tasks(config: VlarlConfig) -> list[str | None]:
    """The tasks a multi-task env draws from (its ``tasks`` attribute), else one unnamed task."""
    return list(_env_tasks(config.env.id, json.dumps(config.env.kwargs, sort_keys=True)))


@functools.cache
def _env_tasks(env_id: str, kwargs_json: str) -> tuple[str | None, ...]:
    import gymnasium as gym

    import vlarl_envs  # noqa: F401

    env = gym.make(env_id, **json.loads(kwargs_json))
    tasks = tuple(getattr(env.unwrapped, "tasks", None) or [None])
    env.close()
    return tasks


def evaluation_options(config: VlarlConfig) -> list[dict[str, Any]]:
    """Episode ids 0..episodes_per_task-1 for every task and split, in a fixed order.

    Tasks alternate within an episode id, so when the number of envs is a multiple of the
    number of tasks, each env plays one task throughout: a multi-task env then builds one
    simulator, not one per task (MetaWorld MT10 on 20 envs: 20 simulators instead of 200)."""
    options = []
    for split in config.eval.splits:
        for episode_id in range(config.eval.episodes_per_task):
            for task in env_tasks(config):
                entry: dict[str, Any] = {"episode_id": episode_id, "split": split}
                if task is not None:
                    entry["task"] = task
                options.append(entry)
    return options


def evaluate(
    shards: Shards, options: list[dict[str, Any]], chunk_steps: int, seed: int, video_dir: Path | None = None
) -> dict[str, Any]:
    """Play every listed episode (in rounds of the training envs) and aggregate.

    Returns:
        ``metrics`` (``eval/<statistic>`` means and ``eval/<split>/success_once/<task>``),
        ``table`` {(split, task): success rate} and ``videos``.
    """
    num_envs = len(shards.keys()) * shards.envs_per_stage
    per_episode: list[dict[str, Any]] = []
    videos = []
    for round_index, start in enumerate(range(0, len(options), num_envs)):
        chunk = options[start : start + num_envs]
        padded = chunk + [chunk[-1]] * (num_envs - len(chunk))
        video_path = None
        if video_dir is not None:
            video_dir.mkdir(parents=True, exist_ok=True)
            video_path = str(video_dir / f"round_{round_index:03d}.mp4")
        results = run_episodes(shards, padded, chunk_steps, deterministic=True, seed=seed, keep_trajectories=False,
                               video_path=video_path)
        if results.get("video"):
            videos.append(results["video"])
        for index, entry in enumerate(chunk):
            per_episode.append({
                "split": entry["split"],
                "task": entry.get("task") or results["tasks"][index],
                **{name: float(results[name][index]) for name in STATISTICS},
            })
    metrics = {f"eval/{name}": float(np.mean([e[name] for e in per_episode])) for name in STATISTICS}
    grouped: dict[tuple[str, str], list[float]] = defaultdict(list)
    for episode in per_episode:
        grouped[(episode["split"], episode["task"])].append(episode["success_once"])
    table = {key: float(np.mean(values)) for key, values in grouped.items()}
    for (split, task), rate in table.items():
        metrics[f"eval/{split}/success_once/{task}"] = rate
    return {"metrics": metrics, "table": table, "videos": videos, "episodes": per_episode}


def evaluate_checkpoint(config: VlarlConfig, policy_dir: str | Path, video_dir: Path | None = None) -> dict[str, Any]:
    """Score the saved policy at ``policy_dir`` on ``env.*`` with ``eval.*``, on workers placed as in training.

    Returns ``evaluate``'s report, with ``time/eval`` among its metrics."""
    import time

    import ray

    from vlarl_trainer.rl.cluster import start_ray
    from vlarl_trainer.rl.rollout import start_inference_workers, worker_bundles
    from vlarl_trainer.rl.validation import validate

    config = dataclasses.replace(config, policy=dataclasses.replace(config.policy, pretrained=str(policy_dir)))
    layout = validate(config, training=False)
    started = time.perf_counter()
    own_ray = not ray.is_initialized()
    start_ray(config.cluster.address, config.cluster.num_cpus)
    shards = None
    try:
        shards = start_inference_workers(config, layout, str(policy_dir), worker_bundles(layout))
        report = evaluate(shards, evaluation_options(config), layout.chunk_steps, config.runner.seed, video_dir)
    finally:
        if shards is not None:
            shards.env.kill()
            shards.rollout.kill()
        if own_ray:
            ray.shutdown()
    report["metrics"]["time/eval"] = time.perf_counter() - started
    return report


def resolve_policy(path: str | Path) -> tuple[Path, Path | None]:
    """The policy directory that ``eval.checkpoint`` names, and the run directory it belongs to (None when
    it is a bare policy): a run directory (its latest checkpoint), a checkpoint (``checkpoints/step_N``,
    holding ``policy/``) or a ``save_pretrained`` directory (an SFT checkpoint, a published policy)."""
    from vlarl_trainer.rl import checkpoint as checkpoints

    path = Path(path)
    if (path / "config.yaml").is_file() and (path / "checkpoints").is_dir():
        latest = checkpoints.latest_checkpoint(path)
        if latest is None:
            raise ValueError(f"eval.checkpoint={path}: the run has no complete checkpoint")
        return latest / "policy", path
    if (path / "policy").is_dir():
        policy = path / "policy"
    elif (path / "config.json").is_file():
        policy = path
    else:
        raise ValueError(f"eval.checkpoint={path}: expected a run directory, a checkpoint (checkpoints/step_N) or a "
                         "save_pretrained policy directory, found none of them")
    run_dir = path.parent.parent
    return policy, run_dir if path.parent.name == "checkpoints" and (run_dir / "config.yaml").is_file() else None


def report_json(report: dict[str, Any]) -> dict[str, Any]:
    """An evaluation report as JSON can hold it: the table as rows of split, task and success."""
    rows = [{"split": split, "task": task, "success": rate} for (split, task), rate in sorted(report["table"].items())]
    return {"metrics": report["metrics"], "table": rows, "episodes": report.get("episodes", [])}


def logged_evaluation(metrics_path: Path, step: int) -> dict[str, Any] | None:
    """The ``metrics`` and ``table`` of the evaluation logged at ``step`` in metrics.jsonl (None when there
    is none): a resumed run's report of an evaluation an earlier process ran."""
    if not metrics_path.exists():
        return None
    for line in metrics_path.read_text().splitlines():
        record = json.loads(line)
        if record["step"] == step and "eval/success_once" in record:
            metrics = {key: value for key, value in record.items() if key.startswith("eval/") or key == "time/eval"}
            table = {}
            for key, rate in metrics.items():
                parts = key.split("/", 3)
                if len(parts) == 4 and parts[2] == "success_once":
                    table[(parts[1], parts[3])] = rate
            return {"metrics": metrics, "table": table}
    return None


def format_table(before: dict | None, after: dict) -> str:
    """A Markdown table of success per task (and split): before and after, when both exist."""
    lines = ["| split | task | before | after |", "|---|---|---|---|"] if before else ["| split | task | success |", "|---|---|---|"]
    for (split, task), rate in sorted(after["table"].items()):
        if before:
            lines.append(f"| {split} | {task} | {before['table'].get((split, task), float('nan')):.2f} | {rate:.2f} |")
        else:
            lines.append(f"| {split} | {task} | {rate:.2f} |")
    mean_after = after["metrics"]["eval/success_once"]
    if before:
        lines.append(f"| all | mean | {before['metrics']['eval/success_once']:.2f} | {mean_after:.2f} |")
    else:
        lines.append(f"| all | mean | {mean_after:.2f} |")
    return "\n".join(lines)
