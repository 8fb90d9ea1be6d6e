"""Success of a family's scripted experts per task, on training episodes, as a markdown table.

    python -m vlarl_envs.expert_success vlarl/LIBERO-Spatial-v0 vlarl/LIBERO-Object-v0 vlarl/LIBERO-Goal-v0
    python -m vlarl_envs.expert_success vlarl/CALVIN-ABC-v0 vlarl/CALVIN-D-v0 --episodes 10

Each task with an expert (``family_of(id).expert(task)``) plays ``train`` episodes 0 .. episodes - 1,
the ids ``vlarl-collect`` starts from, without cameras; a task without one shows "no expert".
``vlarl-collect`` records the same episodes with cameras and reports the same counts in its summary.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import gymnasium as gym

from vlarl_envs import family_of


def play_expert(env: gym.Env, task: str, episode_id: int, split: str = "train") -> tuple[bool, int]:
    """One episode of the task's expert: whether it succeeded at any step, and the steps it took."""
    observation, _ = env.reset(options={"episode_id": episode_id, "task": task, "split": split})
    expert = family_of(env.spec.id).make_expert(task)
    done = succeeded = False
    steps = 0
    while not done:
        observation, _, terminated, truncated, info = env.step(expert(observation))
        succeeded = succeeded or bool(info["success"])
        done = terminated or truncated
        steps += 1
    return succeeded, steps


def success_table(env_ids: Sequence[str], episodes: int) -> str:
    """One row per task of each id: ``| env | task | success | mean steps |``."""
    rows = ["| env | task | success | mean steps |", "|---|---|---|---|"]
    for env_id in env_ids:
        family = family_of(env_id)
        env = gym.make(env_id, obs_mode="state")
        try:
            for task in family.tasks(env_id):
                if family.expert(task) is None:
                    rows.append(f"| {env_id} | {task} | no expert | |")
                    continue
                outcomes = [play_expert(env, task, episode_id) for episode_id in range(episodes)]
                successes = sum(succeeded for succeeded, _ in outcomes)
                mean_steps = sum(steps for _, steps in outcomes) / episodes
                rows.append(f"| {env_id} | {task} | {successes}/{episodes} | {mean_steps:.0f} |")
                print(rows[-1], file=sys.stderr, flush=True)  # progress; the table comes whole at the end
        finally:
            env.close()
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env_ids", nargs="+", help="registered ids whose family has scripted experts")
    parser.add_argument("--episodes", type=int, default=10, help="training episodes per task, ids 0 .. N-1")
    arguments = parser.parse_args(argv)
    print(success_table(arguments.env_ids, arguments.episodes))


if __name__ == "__main__":
    main()
