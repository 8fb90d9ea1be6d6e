"""Demonstrations from the scripted experts, written as a LeRobot dataset.

    vlarl-collect recipe=metaworld_10_ppo_openpi_tiny dataset=datasets/mt10-64px-10 collect.episodes_per_task=10

Each task replays training episodes ``first_episode_id, first_episode_id + 1, ...`` of the
split (so two collections with disjoint id ranges never share an initial state) until it has
the requested number of successful episodes or has tried ``max_attempts_per_task`` ids.
Failed demonstrations are dropped unless ``keep_failures``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from vlarl_envs import EnvFamily, family_of
from vlarl_trainer.data.writer import Episode, LeRobotDatasetWriter
from vlarl_trainer.progress import progress_bar


@dataclass
class TaskSummary:
    attempted: int = 0
    succeeded: int = 0
    kept: int = 0
    frames: int = 0


@dataclass
class CollectionSummary:
    path: Path
    tasks: dict[str, TaskSummary] = field(default_factory=dict)
    seconds: float = 0.0

    def table(self) -> str:
        lines = ["| task | expert success | episodes kept | frames |", "|---|---|---|---|"]
        for task, summary in self.tasks.items():
            lines.append(f"| {task} | {summary.succeeded}/{summary.attempted} | {summary.kept} | {summary.frames} |")
        return "\n".join(lines)


def record_episode(env: gym.Env, family: EnvFamily, task: str, episode_id: int, split: str) -> Episode:
    """Run the task's expert on one episode, recording each observation with the action it led to."""
    observation, _ = env.reset(options={"episode_id": episode_id, "task": task, "split": split})
    expert = family.make_expert(task)
    cameras = [key for key in observation if key.endswith("_images")]
    frames: dict[str, list[np.ndarray]] = {key: [] for key in (*cameras, "states", "privileged_state", "actions")}
    rewards, successes = [], []
    done = False
    while not done:
        action = np.asarray(expert(observation), dtype=np.float32)
        for key in (*cameras, "states", "privileged_state"):
            if key in observation:
                frames[key].append(np.asarray(observation[key]))
        frames["actions"].append(action)
        observation, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        successes.append(bool(info["success"]))
        done = terminated or truncated
    return Episode(
        task=observation["task_description"],
        images={key.removesuffix("_images"): np.stack(frames[key]) for key in cameras},
        states=np.stack(frames["states"]).astype(np.float32),
        actions=np.stack(frames["actions"]),
        rewards=np.asarray(rewards, dtype=np.float32),
        successes=np.asarray(successes),
        environment_states=(np.stack(frames["privileged_state"]).astype(np.float32)
                            if frames["privileged_state"] else None),
        metadata={"env_task": task, "episode_id": episode_id, "split": split, "success": any(successes)},
    )


def dimension_names(family: EnvFamily, env: gym.Env) -> dict[str, list[str]]:
    """The family's names of state and action dimensions, where they fit this env's spaces (another
    control mode may change the action's size)."""
    sizes = {"observation.state": env.observation_space["states"].shape[0], "action": env.action_space.shape[-1]}
    return {key: list(names) for key, names in family.feature_names.items() if len(names) == sizes.get(key)}


def collect_demonstrations(
    env_id: str,
    num_episodes_per_task: int,
    out_dir: str | Path,
    image_size: int = 64,
    tasks: Sequence[str] | None = None,
    split: str = "train",
    first_episode_id: int = 0,
    keep_failures: bool = False,
    max_attempts_per_task: int | None = None,
    task_episodes: Mapping[str, int] | None = None,
    progress: bool = False,
    **env_kwargs: Any,
) -> CollectionSummary:
    """Record expert episodes of every task (default: all tasks of ``env_id``) into a new dataset.

    Args:
        env_id: a registered vlarl id with a scripted expert, e.g. ``vlarl/MetaWorld-MT10-v3``.
        num_episodes_per_task: episodes to keep per task.
        out_dir: the dataset directory to create (it must not exist).
        image_size: camera resolution in pixels.
        tasks: a subset of the env's tasks.
        split: which split's initial states to replay.
        first_episode_id: the first episode id tried per task.
        keep_failures: also keep episodes the expert failed.
        max_attempts_per_task: episode ids tried per task; default 3 x the task's episode count + 5.
        task_episodes: episodes to keep for the named tasks instead of ``num_episodes_per_task``
            (e.g. more of a task that the policy learns nothing of from one demonstration).
        progress: show a bar over the episodes to keep, with an ETA.
        **env_kwargs: further ``gym.make`` keywords (e.g. ``horizon``).
    """
    task_episodes = dict(task_episodes or {})
    for name, count in {"num_episodes_per_task": num_episodes_per_task, **task_episodes}.items():
        if not isinstance(count, int) or count <= 0:
            raise ValueError(f"episode counts must be positive integers, got {count!r} for {name}")
    family = family_of(env_id)
    available = family.tasks(env_id, env_kwargs)
    chosen = tuple(tasks) if tasks else available
    unknown = [task for task in chosen if task not in available]
    if unknown:
        raise ValueError(f"{env_id} has no task(s) {unknown}; expected a subset of {list(available)}")
    without_expert = [task for task in chosen if family.expert(task) is None]
    if without_expert:
        raise ValueError(f"no scripted expert for {family.name} task(s) {without_expert} of {env_id}; collect a "
                         "family task that has one (MetaWorld's tasks, ManiSkill's PutOnPlate and PickCube, GSEnv, "
                         "LIBERO-Spatial, -Object and most LIBERO-Goal tasks, CALVIN's tasks)")
    started = time.perf_counter()
    env = gym.make(env_id, image_size=image_size, obs_mode="rgb", reward_mode="sparse", **env_kwargs)
    try:
        not_collected = [task for task in task_episodes if task not in chosen]
        if not_collected:
            raise ValueError(f"task_episodes names task(s) {not_collected} that are not collected; "
                             f"expected a subset of {list(chosen)}")
        fps = env.metadata.get("render_fps")
        if not fps:
            raise ValueError(f"{env_id} declares no metadata['render_fps']; the dataset needs its control rate")
        wanted = {task: task_episodes.get(task, num_episodes_per_task) for task in chosen}
        extra_info = {"env_id": env_id, "image_size": image_size, "split": split, "tasks": list(chosen),
                      "first_episode_id": first_episode_id, "keep_failures": keep_failures,
                      "episodes_per_task": wanted}
        horizon = getattr(env.unwrapped, "horizon", None)
        if horizon is not None:  # evaluation of a policy trained on the dataset plays episodes this long
            extra_info["horizon"] = int(horizon)
        summary = CollectionSummary(path=Path(out_dir))
        bar = progress_bar(sum(wanted.values()), "collect", "episode", progress)
        with bar, LeRobotDatasetWriter(out_dir, fps=fps, robot_type=family.robot_type,
                                       feature_names=dimension_names(family, env), extra_info=extra_info) as writer:
            for task in chosen:
                task_summary = summary.tasks.setdefault(task, TaskSummary())
                attempts = max_attempts_per_task or 3 * wanted[task] + 5
                for episode_id in range(first_episode_id, first_episode_id + attempts):
                    if task_summary.kept == wanted[task]:
                        break
                    episode = record_episode(env, family, task, episode_id, split)
                    task_summary.attempted += 1
                    task_summary.succeeded += episode.metadata["success"]
                    if episode.metadata["success"] or keep_failures:
                        writer.add_episode(episode)
                        task_summary.kept += 1
                        task_summary.frames += episode.length
                        bar.update(1)
    finally:
        env.close()
    summary.seconds = time.perf_counter() - started
    return summary


COLLECTOR_ENV_KEYWORDS = ("obs_mode", "reward_mode")
"""Env keywords the collector sets itself; the others (image size, horizon, ...) pass through."""


def check_collect_config(config: Any) -> None:
    """Every episode count of ``collect.*`` positive, before any simulator starts."""
    counts = {"collect.episodes_per_task": config.collect.episodes_per_task,
              **{f"collect.task_episodes.{task}": count for task, count in config.collect.task_episodes.items()}}
    for name, count in counts.items():
        if not isinstance(count, int) or count <= 0:
            raise ValueError(f"{name} must be positive, got {count!r}")


def collect_from_config(config: Any, dataset: str | Path | None = None) -> CollectionSummary:
    """``collect.*`` demonstrations of ``env.id`` at ``env.kwargs``' image size and horizon, written to
    ``dataset`` (default: the config's ``dataset``)."""
    target = dataset if dataset is not None else config.dataset
    if target is None:
        raise ValueError("name the dataset directory to write: dataset=<new dir>")
    check_collect_config(config)
    settings = config.collect
    env_kwargs = {key: value for key, value in config.env.kwargs.items() if key not in COLLECTOR_ENV_KEYWORDS}
    return collect_demonstrations(
        config.env.id, settings.episodes_per_task, target, tasks=collected_tasks(config), split=settings.split,
        first_episode_id=settings.first_episode_id, keep_failures=settings.keep_failures,
        max_attempts_per_task=settings.max_attempts_per_task, task_episodes=dict(settings.task_episodes),
        progress=config.runner.progress,
        **{key: value for key, value in env_kwargs.items() if key != "tasks"},
    )


def collected_tasks(config: Any) -> list[str]:
    """``collect.tasks``, or the tasks ``env.kwargs`` restricts the env to (a MetaWorld suite's subset), or
    all of the env's; ``collect.tasks`` must lie within the env's tasks."""
    env_tasks = list(family_of(config.env.id).tasks(config.env.id, config.env.kwargs))
    if not config.collect.tasks:
        return env_tasks
    outside = [task for task in config.collect.tasks if task not in env_tasks]
    if outside:
        raise ValueError(f"collect.tasks names task(s) {outside} that {config.env.id} with env.kwargs does not play; "
                         f"expected a subset of {env_tasks}")
    return list(config.collect.tasks)
