"""Success of the scripted LIBERO experts per task, on training episodes, as a markdown table.

    python -m vlarl_envs.libero.expert_success --suites Spatial Object Goal --episodes 10

Each covered task plays ``train`` episodes 0 .. episodes - 1 (the ids ``vlarl-collect`` starts
from) without cameras; a task without an expert shows "no expert". ``vlarl-collect`` records the
same episodes with cameras into a dataset and reports the same counts in its summary.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import gymnasium as gym

from vlarl_envs import family_of
from vlarl_envs.libero.registration import libero_env_id


def expert_successes(env: gym.Env, task: str, episodes: int) -> int:
    """How many of the task's first ``episodes`` training episodes its expert succeeds in."""
    expert_of = family_of(env.spec.id).make_expert
    successes = 0
    for episode_id in range(episodes):
        observation, _ = env.reset(options={"episode_id": episode_id, "task": task, "split": "train"})
        expert = expert_of(task)
        done = succeeded = False
        while not done:
            observation, _, terminated, truncated, info = env.step(expert(observation))
            succeeded = succeeded or bool(info["success"])
            done = terminated or truncated
        successes += succeeded
    return successes


def success_table(suites: Sequence[str], episodes: int) -> str:
    """One row per task of each suite: ``| suite | task | success |``."""
    rows = ["| suite | task | success |", "|---|---|---|"]
    for suite in suites:
        env_id = libero_env_id(suite)
        family = family_of(env_id)
        env = gym.make(env_id, obs_mode="state")
        try:
            for task in family.tasks(env_id):
                if family.expert(task) is None:
                    rows.append(f"| {suite} | {task} | no expert |")
                    continue
                successes = expert_successes(env, task, episodes)
                rows.append(f"| {suite} | {task} | {successes}/{episodes} |")
                print(rows[-1], file=sys.stderr, flush=True)  # progress; the table comes whole at the end
        finally:
            env.close()
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", nargs="+", default=["Spatial", "Object", "Goal"],
                        help="LIBERO suites by id suffix (Spatial, Object, Goal, 10, 90)")
    parser.add_argument("--episodes", type=int, default=10, help="training episodes per task, ids 0 .. N-1")
    arguments = parser.parse_args(argv)
    print(success_table(arguments.suites, arguments.episodes))


if __name__ == "__main__":
    main()
