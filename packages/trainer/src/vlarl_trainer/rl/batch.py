"""From rollouts to training samples: advantages (vlarl_algos), masks, and the minibatch plan."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

import vlarl_algos
from vlarl_trainer.config import AlgorithmConfig


def concat_epochs(epochs: list[dict[str, Any]]) -> dict[str, Any]:
    """Rollout epochs side by side on the env axis: B = num_envs x rollout_epoch."""
    first = epochs[0]
    return {
        "rewards": torch.as_tensor(np.concatenate([e["rewards"] for e in epochs], axis=1), dtype=torch.float32),
        "dones": torch.as_tensor(np.concatenate([e["dones"] for e in epochs], axis=1), dtype=torch.float32),
        "logprobs": torch.cat([e["logprobs"] for e in epochs], dim=1),
        "values": None if first["values"] is None else torch.cat([e["values"] for e in epochs], dim=1),
        "forward_inputs": {
            k: torch.cat([e["forward_inputs"][k] for e in epochs], dim=1) for k in first["forward_inputs"]
        },
        "tasks": [task for e in epochs for task in e["tasks"]],
        "success_once": np.concatenate([e["success_once"] for e in epochs]).astype(bool),
    }


def task_labels(tasks: list[str | None], num_steps: int) -> torch.Tensor:
    """``[T, B]`` integer label of each env's task, the same at every step (for per-task statistics)."""
    index = {task: i for i, task in enumerate(dict.fromkeys(tasks))}
    return torch.tensor([index[task] for task in tasks]).expand(num_steps, len(tasks))


def solved_tasks(tasks: list[str | None], success: np.ndarray) -> set[str | None]:
    """The tasks that succeeded in at least one of the batch's episodes (``tasks[b]`` played env b)."""
    return {task for task, succeeded in zip(tasks, success, strict=True) if succeeded}


def build_batch(rollout: dict[str, Any], algorithm: AlgorithmConfig) -> tuple[dict[str, Any], dict[str, float]]:
    """Advantages and returns for every chunk step, flattened to the steps the loss keeps.

    Two masks come out: ``weights`` says which steps the critic fits, ``policy_weights`` which ones the
    policy loss (surrogate and entropy bonus) takes. They differ where a task group is left out of the
    policy loss: it carries no signal (``algorithm.skip_no_signal``) or no success
    (``algorithm.skip_unsolved_tasks``).

    Returns:
        ``(batch, metrics)``: ``batch`` holds ``forward_inputs`` {k: [N, ...]}, ``old_logprobs``
        [N, C, A], ``advantages`` [N], ``returns`` [N] or None, ``old_values`` [N] or None, ``weights``
        [N] (the critic's loss mask, length-normalized when asked) and ``policy_weights`` [N].
    """
    rewards, dones, values = rollout["rewards"] * algorithm.reward_scale, rollout["dones"], rollout["values"]
    returns = None
    metrics: dict[str, float] = {}
    if algorithm.name == "ppo":
        if values is None:
            raise ValueError("PPO needs a policy with a value head; set policy.kwargs.add_value_head or use GRPO")
        loss_mask = vlarl_algos.first_done_mask(dones)
        advantages, returns = vlarl_algos.compute_gae(
            rewards, values, dones, gamma=algorithm.gamma, gae_lambda=algorithm.gae_lambda
        )
        labels = task_labels(rollout["tasks"], advantages.shape[0])
        policy_mask = loss_mask
        if algorithm.skip_unsolved_tasks:
            solved = solved_tasks(rollout["tasks"], rollout["success_once"])
            policy_mask = policy_mask & torch.tensor([task in solved for task in rollout["tasks"]]).expand_as(loss_mask)
            metrics["rollout/skipped_tasks"] = len(set(rollout["tasks"]) - solved)
        if algorithm.skip_no_signal:
            with_signal = vlarl_algos.groups_with_signal(rewards, loss_mask, labels[0])
            policy_mask = policy_mask & with_signal.expand_as(loss_mask)
            metrics["rollout/groups_without_signal"] = share_without_signal(with_signal, labels[0])
        if algorithm.normalize_advantages:
            groups = labels if algorithm.normalize_per_task else None
            advantages = vlarl_algos.normalize_advantages(advantages, policy_mask, groups=groups)
        advantages = torch.where(policy_mask, advantages, torch.zeros_like(advantages))
    else:
        score_range = tuple(algorithm.score_range) if algorithm.score_range is not None else None
        advantages, loss_mask = vlarl_algos.grpo_advantages(
            rewards,
            dones,
            algorithm.group_size,
            leave_one_out=algorithm.leave_one_out,
            score_range=score_range,
        )
        if algorithm.skip_no_signal:
            group_labels = torch.arange(rewards.shape[1]) // algorithm.group_size
            scores = vlarl_algos.grpo_scores(rewards, dones)[None]  # [1, B]: a group's signal is in its scores
            every_score = torch.ones_like(scores, dtype=torch.bool)
            with_signal = vlarl_algos.groups_with_signal(scores, every_score, group_labels)
            loss_mask = loss_mask & with_signal.reshape((1, -1) + (1,) * (loss_mask.ndim - 2)).expand_as(loss_mask)
            metrics["rollout/groups_without_signal"] = share_without_signal(with_signal, group_labels)
        kept_envs = loss_mask.reshape(loss_mask.shape[0], loss_mask.shape[1], -1)[0].any(-1)
        metrics["rollout/groups_kept"] = float(kept_envs.reshape(-1, algorithm.group_size)[:, 0].double().mean())
        policy_mask = loss_mask
    weights = vlarl_algos.length_normalized_weights(loss_mask) if algorithm.length_normalized else loss_mask.float()
    policy_weights = weights * policy_mask.to(weights.dtype)
    keep = weights.flatten() > 0
    flat = lambda x: x.flatten(0, 1)[keep]  # noqa: E731  ([T, B, ...] -> kept [N, ...])
    batch = {
        "forward_inputs": {k: flat(v) for k, v in rollout["forward_inputs"].items()},
        "old_logprobs": flat(rollout["logprobs"]),
        "advantages": flat(advantages),
        "returns": None if returns is None else flat(returns),
        # GRPO has no critic to train, even when the policy carries a value head (a PPO checkpoint).
        "old_values": None if returns is None else flat(values[:-1]),
        "weights": flat(weights),
        "policy_weights": flat(policy_weights),
    }
    metrics.update({
        "rollout/advantages_mean": float(vlarl_algos.masked_mean(advantages, loss_mask)),
        "rollout/advantages_max": float(advantages[loss_mask].max()) if keep.any() else 0.0,
        "rollout/advantages_min": float(advantages[loss_mask].min()) if keep.any() else 0.0,
        "rollout/rewards": float(rewards.sum() / rewards.shape[1]),
        "rollout/valid_steps": int(keep.sum()),
    })
    if returns is not None:
        metrics["rollout/returns_mean"] = float(vlarl_algos.masked_mean(returns, loss_mask))
        metrics["train/critic/explained_variance"] = float(
            vlarl_algos.explained_variance(values[:-1], returns, loss_mask)
        )
    return batch, metrics


def share_without_signal(with_signal: torch.Tensor, groups: torch.Tensor) -> float:
    """The fraction of the distinct groups in ``groups`` [B] whose envs ``with_signal`` [B] marks False."""
    signal_of_group = dict(zip(groups.tolist(), with_signal.tolist(), strict=True))
    return 1.0 - sum(signal_of_group.values()) / len(signal_of_group)


def minibatch_plan(
    num_samples: int, global_batch_size: int, micro_batch_size: int, world_size: int, update_epoch: int, seed: int
) -> list[list[list[torch.Tensor]]]:
    """``plan[g][r]``: the micro-batch index tensors of actor rank r in global batch g.

    Each update epoch shuffles the samples with a generator seeded by ``seed`` and splits
    them into ``round(N / global_batch_size)`` global batches (at least one), each split
    evenly over the ranks and then into micro-batches of at most ``micro_batch_size``.
    """
    if num_samples < world_size:
        raise ValueError(f"{num_samples} valid samples cannot be split over {world_size} actor ranks")
    generator = torch.Generator().manual_seed(seed)
    plan = []
    batches = max(1, round(num_samples / global_batch_size))
    for _ in range(update_epoch):
        order = torch.randperm(num_samples, generator=generator)
        for global_indices in torch.tensor_split(order, batches):
            per_rank = torch.tensor_split(global_indices, world_size)
            plan.append([list(torch.split(indices, micro_batch_size)) for indices in per_rank])
    return plan
