"""Watch MetaWorld's scripted experts solve a few tasks through the vlarl contract.

    python -m vlarl_envs.demo --out demo_output [--tasks reach-v3 push-v3] [--episodes 1]

Writes one captioned mp4 per episode under a fresh run folder in ``--out`` (an existing run
is never overwritten) and prints the success of each task with the video paths.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import gymnasium as gym

import vlarl_envs  # noqa: F401  (registers the ids)
from vlarl_envs.metaworld import METAWORLD_INSTRUCTIONS, scripted_expert

DEFAULT_TASKS = ("reach-v3", "push-v3", "drawer-open-v3", "pick-place-v3")


def fresh_run_dir(out: Path) -> Path:
    """A new, empty folder under ``out`` named by the time, never an existing one."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for attempt in range(100):
        run_dir = out / (f"expert-demo-{stamp}" + (f"-{attempt}" if attempt else ""))
        try:
            run_dir.mkdir(parents=True)
            return run_dir
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a fresh run folder under {out}")


def run_task(task: str, episodes: int, video_dir: Path, image_size: int) -> list[bool]:
    env = gym.make(
        f"vlarl/MetaWorld-{task}", image_size=image_size, video_dir=video_dir / task, reward_mode="sparse"
    )
    expert = scripted_expert(task)
    successes = []
    for episode_id in range(episodes):
        observation, _ = env.reset(options={"episode_id": episode_id, "split": "test"})
        done = False
        while not done:
            observation, _, terminated, truncated, info = env.step(expert(observation))
            done = terminated or truncated
        successes.append(info["episode"]["success_once"])
    env.close()
    return successes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("demo_output"))
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS))
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument("--image-size", type=int, default=128)
    args = parser.parse_args(argv)
    run_dir = fresh_run_dir(args.out)
    print("| task | instruction | success |\n|---|---|---|")

    for task in args.tasks:
        successes = run_task(task, args.episodes, run_dir, args.image_size)
        print(f"| {task} | {METAWORLD_INSTRUCTIONS.canonical(task)} | {sum(successes)}/{len(successes)} |", flush=True)
    print(f"\nvideos: {run_dir}")
    for video in sorted(run_dir.rglob("*.mp4")):
        print(f"  {video}")


if __name__ == "__main__":
    main()
