"""Evaluation on a replayable episode list: fixed episode ids per task and split, deterministic
actions, success per task and per split. Runs inside training and alone as ``vlarl-eval``."""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from vlarl_trainer.config import TrainConfig
from vlarl_trainer.rl.rollout import Shards, run_episodes

STATISTICS = ("success_once", "success_at_end", "return", "episode_len")


def env_tasks(config: TrainConfig) -> list[str | None]:
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


def evaluation_options(config: TrainConfig) -> list[dict[str, Any]]:
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
