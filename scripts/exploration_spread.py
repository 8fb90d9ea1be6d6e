"""How far a policy's sampling noise moves where a MetaWorld episode ends, against how far it ends from the goal.

RL can only reinforce outcomes its own sampling reaches. For each held-out episode this plays
the policy once deterministically and ``--samples`` times with its training noise (flow-SDE for
the pi0 family), all the way to the horizon, and prints where the hand ends: its distance to the
task's goal, how far the noisy endpoints spread around their mean, and the scaled dense reward of
the last step (what the ``progress`` reward mode pays a failed episode). A spread much smaller
than the distance left to the goal means the noisy episodes of one initial state end alike, and
a reward mode that pays only success gives RL nothing to rank among them.

    uv run python scripts/exploration_spread.py <checkpoint> --task reach-v3 --episodes 8 --samples 6

``--noise-level`` samples the flow-SDE at another level than the checkpoint's, to see how much
wider exploration would reach before training with it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

import vlarl_envs  # noqa: F401  (registers the vlarl env ids)
import vlarl_policies
from vlarl_envs.metaworld.registration import METAWORLD_DENSE_REWARD_MAX
from vlarl_envs.vector import stack_observations
from vlarl_trainer.rl.workers.env_worker import policy_inputs

ENV_ID = "vlarl/MetaWorld-MT10-v3"


@dataclass(frozen=True)
class EpisodeEnds:
    """One initial state: entry 0 of each array is the deterministic episode, the rest the noisy ones."""

    episode_id: int
    start_to_goal: float
    end_to_goal: np.ndarray
    success: np.ndarray
    final_dense: np.ndarray
    """The last step's dense reward, scaled to [0, 1]."""
    noisy_spread: float
    """Mean distance of the noisy endpoints from their mean (m)."""


def hand_and_goal(observation) -> tuple[np.ndarray, np.ndarray]:
    """Hand xyz and goal xyz from MetaWorld's privileged 39-D state (the goal is its last three entries)."""
    state = np.asarray(observation["privileged_state"], dtype=np.float64)
    return state[:3], state[-3:]


def episode_ends(policy, task: str, episode_ids, samples: int, image_size: int = 64, horizon: int = 100,
                 seed: int = 0) -> list[EpisodeEnds]:
    """Play each test episode once deterministically and ``samples`` times with noise, to the horizon."""
    if samples < 2:
        raise ValueError(f"samples must be at least 2 to measure a spread, got {samples}")
    chunk = policy.config.action_chunk
    if horizon % chunk:
        raise ValueError(f"horizon ({horizon}) must be a multiple of the policy's action_chunk ({chunk})")
    envs = [gym.make(ENV_ID, image_size=image_size, obs_mode="rgb", reward_mode="dense", action_chunk=chunk,
                     horizon=horizon, terminate_on_success=False) for _ in range(samples + 1)]
    generator = torch.Generator().manual_seed(seed)
    policy.eval()
    results = []
    try:
        for episode_id in episode_ids:
            observations = [env.reset(options={"episode_id": episode_id, "task": task, "split": "test"})[0]
                            for env in envs]
            start, goal = hand_and_goal(observations[0])
            success = np.zeros(samples + 1, dtype=bool)
            last_reward = np.zeros(samples + 1)
            for _ in range(horizon // chunk):
                with torch.no_grad():
                    steady = policy.act(policy_inputs(stack_observations(observations[:1])), deterministic=True,
                                        zero_start=True).actions
                    noisy = policy.act(policy_inputs(stack_observations(observations[1:])), generator=generator).actions
                for index, (env, actions) in enumerate(zip(envs, torch.cat([steady, noisy]).numpy(), strict=True)):
                    observations[index], _, _, _, info = env.step(actions)
                    success[index] |= bool(info["success"])
                    last_reward[index] = info["chunk_rewards"][-1]
            ends = np.stack([hand_and_goal(observation)[0] for observation in observations])
            results.append(EpisodeEnds(
                episode_id=int(episode_id),
                start_to_goal=float(np.linalg.norm(start - goal)),
                end_to_goal=np.linalg.norm(ends - goal, axis=1),
                success=success,
                final_dense=last_reward / METAWORLD_DENSE_REWARD_MAX,
                noisy_spread=float(np.linalg.norm(ends[1:] - ends[1:].mean(0), axis=1).mean()),
            ))
    finally:
        for env in envs:
            env.close()
    return results


def with_noise_level(policy, noise_level: float):
    """Make ``policy`` sample its flow-SDE steps at ``noise_level`` (the config is read at every sample),
    in place of an annealing schedule the checkpoint may carry."""
    if getattr(policy.config, "noise_method", None) != "flow_sde":
        raise ValueError(f"--noise-level needs a flow_sde policy, got noise_method "
                         f"{getattr(policy.config, 'noise_method', None)!r}")
    if not noise_level >= 0:
        raise ValueError(f"noise level must be >= 0, got {noise_level}")
    policy.config.noise_level = float(noise_level)
    policy.config.noise_anneal = False
    return policy


def report(results: list[EpisodeEnds]) -> str:
    lines = ["| episode | start to goal (m) | deterministic end to goal | noisy ends to goal (mean, min-max) "
             "| noisy successes | noisy spread (m) | final dense, deterministic / noisy mean |",
             "|---|---|---|---|---|---|---|"]
    for result in results:
        noisy = result.end_to_goal[1:]
        lines.append(
            f"| {result.episode_id} | {result.start_to_goal:.3f} | {result.end_to_goal[0]:.3f}"
            f"{' (success)' if result.success[0] else ''} | {noisy.mean():.3f} ({noisy.min():.3f}-{noisy.max():.3f}) "
            f"| {int(result.success[1:].sum())}/{len(noisy)} | {result.noisy_spread:.3f} "
            f"| {result.final_dense[0]:.2f} / {result.final_dense[1:].mean():.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", help="a policy directory written by save_pretrained (e.g. an SFT checkpoint)")
    parser.add_argument("--task", default="reach-v3", help="an MT10 task")
    parser.add_argument("--episodes", type=int, default=8, help="test episode ids 0..N-1")
    parser.add_argument("--samples", type=int, default=6, help="noisy episodes per initial state")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--horizon", type=int, default=100)
    parser.add_argument("--noise-level", type=float, default=None,
                        help="flow-SDE noise level to sample with (default: the checkpoint's)")
    args = parser.parse_args(argv)
    policy = vlarl_policies.from_pretrained(args.checkpoint)
    if args.noise_level is not None:
        with_noise_level(policy, args.noise_level)
    print(report(episode_ends(policy, args.task, range(args.episodes), args.samples, args.image_size, args.horizon)))


if __name__ == "__main__":
    main()
