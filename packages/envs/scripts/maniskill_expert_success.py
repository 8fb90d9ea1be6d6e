"""Success rate of the scripted ManiSkill experts on every split, episode by episode.

PutOnPlate: each split's fixed episode list (its first ``--episodes`` ids), with the rate per
variation; PickCube: the first ``--episodes`` ids of ``train`` and ``test``. State
observations (the experts read ``privileged_state``), so no camera is rendered.

    uv run python packages/envs/scripts/maniskill_expert_success.py [--episodes 150] [--task PutOnPlate]
"""

from __future__ import annotations

import argparse
import collections
import time

import gymnasium as gym

import vlarl_envs  # noqa: F401  (registers the ids)
from vlarl_envs.maniskill import pick_cube_expert, put_on_plate_expert

EXPERTS = {
    "PutOnPlate": ("vlarl/ManiSkill-PutOnPlate-v0", put_on_plate_expert, ("train", "vision", "semantic", "execution")),
    "PickCube": ("vlarl/ManiSkill-PickCube-v1", pick_cube_expert, ("train", "test")),
}


def run_episode(env: gym.Env, expert, split: str, episode_id: int) -> tuple[bool, int, str]:
    """(success at any step, steps taken, variation) of one expert episode."""
    observation, info = env.reset(options={"episode_id": episode_id, "split": split})
    expert.reset()
    done = False
    while not done:
        observation, _, terminated, truncated, step_info = env.step(expert(observation))
        done = terminated or truncated
    episode = step_info["episode"]
    return bool(episode["success_once"]), int(episode["episode_len"]), info.get("variation", "none")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=150, help="episode ids 0..N-1 of each split")
    parser.add_argument("--task", choices=sorted(EXPERTS), action="append")
    args = parser.parse_args()
    print("| task | split | variation | episodes | expert success | mean steps |")
    print("|---|---|---|---|---|---|")
    for task in args.task or list(EXPERTS):
        env_id, make_expert, splits = EXPERTS[task]
        env = gym.make(env_id, obs_mode="state")
        expert = make_expert()
        for split in splits:
            started = time.perf_counter()
            outcomes = collections.defaultdict(list)
            for episode_id in range(args.episodes):
                success, steps, variation = run_episode(env, expert, split, episode_id)
                outcomes[variation].append((success, steps))
                outcomes["all"].append((success, steps))
            variations = [variation for variation in outcomes if variation != "all"]
            for variation in variations + (["all"] if len(variations) > 1 else []):
                results = outcomes[variation]
                rate = sum(success for success, _ in results) / len(results)
                steps = sum(steps for _, steps in results) / len(results)
                print(f"| {task} | {split} | {variation} | {len(results)} | {rate:.1%} | {steps:.0f} |", flush=True)
            print(f"<!-- {task} {split}: {time.perf_counter() - started:.0f} s -->", flush=True)
        env.close()


if __name__ == "__main__":
    main()
