"""Success of a policy on a fixed episode list per task, with deterministic action chunks.

Every task replays episode ids ``0..N-1`` of a split, so two checkpoints (before and after RL,
or two seeds) are compared on the same initial states. A pool of envs runs the episodes (each
env a contiguous block of the task-major list), the policy acts on all running envs as one
batch, and each env executes the whole chunk through the env's ``action_chunk`` wrapper.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import vlarl_envs  # noqa: F401  (registers the vlarl env ids)

from vlarl_policies import VLAPolicy


def observation_batch(observations: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Single-env observations -> the policy's obs batch (cameras, states, instructions)."""
    first = observations[0]
    batch: dict[str, Any] = {key: np.stack([obs[key] for obs in observations])
                             for key in first if key.endswith("_images") or key == "states"}
    batch["task_description"] = [obs["task_description"] for obs in observations]
    return batch


def evaluate_success(
    policy: VLAPolicy,
    env_id: str,
    tasks: Sequence[str],
    num_episodes: int,
    split: str = "test",
    image_size: int = 64,
    num_envs: int = 4,
    horizon: int | None = None,
) -> dict[str, list[bool]]:
    """Per task, whether each of episodes 0..num_episodes-1 succeeded (``success_once``)."""
    if num_episodes <= 0:
        raise ValueError(f"num_episodes must be positive, got {num_episodes}")
    chunk = policy.config.action_chunk
    env_kwargs: dict[str, Any] = {"image_size": image_size, "obs_mode": "rgb", "reward_mode": "sparse",
                                  "action_chunk": chunk}
    if horizon is not None:
        env_kwargs["horizon"] = horizon
    work = [(task, episode_id) for task in tasks for episode_id in range(num_episodes)]
    envs = [gym.make(env_id, **env_kwargs) for _ in range(min(num_envs, len(work)))]
    # Contiguous blocks of the task-major list per env: a multi-task env builds a simulator per
    # task it meets, so each env meets as few tasks as possible.
    queues = [deque(work[slot * len(work) // len(envs):(slot + 1) * len(work) // len(envs)])
              for slot in range(len(envs))]
    results: dict[str, list[bool | None]] = {task: [None] * num_episodes for task in tasks}
    running: dict[int, tuple[str, int, dict[str, Any]]] = {}

    def start(slot: int) -> None:
        task, episode_id = queues[slot].popleft()
        observation, _ = envs[slot].reset(options={"episode_id": episode_id, "task": task, "split": split})
        running[slot] = (task, episode_id, observation)

    was_training = policy.training
    policy.eval()
    try:
        for slot in range(len(envs)):
            start(slot)
        while running:
            slots = sorted(running)
            with torch.no_grad():
                chunks = policy.act(observation_batch([running[s][2] for s in slots]), deterministic=True).actions
            for slot, actions in zip(slots, chunks.numpy(), strict=True):
                task, episode_id, _ = running[slot]
                observation, _, terminated, truncated, info = envs[slot].step(actions)
                running[slot] = (task, episode_id, observation)
                if terminated or truncated:
                    results[task][episode_id] = bool(info["episode"]["success_once"])
                    del running[slot]
                    if queues[slot]:
                        start(slot)
    finally:
        policy.train(was_training)
        for env in envs:
            env.close()
    return {task: [bool(success) for success in outcomes] for task, outcomes in results.items()}


def success_table(results: dict[str, list[bool]]) -> str:
    """A markdown table of success per task and overall."""
    lines = ["| task | success | episodes |", "|---|---|---|"]
    for task, outcomes in results.items():
        lines.append(f"| {task} | {np.mean(outcomes):.0%} | {sum(outcomes)}/{len(outcomes)} |")
    everything = [success for outcomes in results.values() for success in outcomes]
    lines.append(f"| **mean** | **{np.mean(everything):.0%}** | {sum(everything)}/{len(everything)} |")
    return "\n".join(lines)
