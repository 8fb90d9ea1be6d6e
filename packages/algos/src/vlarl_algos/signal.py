"""Which groups of episodes carry a learning signal.

A group (the episodes of one task in one PPO step, or a GRPO group sharing an initial state) whose
rewards are all one value, a sparse reward without a single success for example, says nothing about
which actions were better. PPO's advantages of such a group are then only the critic's own errors,
and normalizing them to unit variance turns that noise into a full-size policy update. Leaving the
group out of the policy loss is how the trainer avoids updates without signal.
"""

import torch

from vlarl_algos._shapes import check_ndim, check_shape, expand_prefix

SIGNAL_TOLERANCE = 1e-6
"""Rewards closer than this to each other count as one value."""


def groups_with_signal(
    rewards: torch.Tensor,
    loss_mask: torch.Tensor,
    groups: torch.Tensor,
    *,
    tolerance: float = SIGNAL_TOLERANCE,
) -> torch.Tensor:
    """Per env, whether its group's rewards differ anywhere: over every kept step of every env in the
    group, the largest reward exceeds the smallest by more than ``tolerance``.

    A shaped or dense reward that varies along an episode is signal even when every episode of the
    group is alike; a group without a kept step has none.

    Args:
        rewards: ``[T, B]`` (or ``[T, B, C]``) rewards; for GRPO, the ``[1, B]`` episode scores.
        loss_mask: ``[T, B]`` (or ``[T, B, C]``) boolean mask of the steps that count (up to the first done).
        groups: ``[B]`` integer group label of each env.
        tolerance: the spread at or below which a group's rewards count as one value.

    Returns:
        ``[B]`` boolean, the same for every env of a group.
    """
    check_ndim("rewards", rewards, (2, 3), "[T, B] or [T, B, C]")
    check_ndim("groups", groups, (1,), "[B]")
    check_shape("groups", groups, (rewards.shape[1],), "[B]")
    keep = expand_prefix("loss_mask", loss_mask, rewards.shape, "rewards") != 0
    per_env = rewards.transpose(0, 1).reshape(rewards.shape[1], -1).double()
    kept = keep.transpose(0, 1).reshape(rewards.shape[1], -1)
    env_max = torch.where(kept, per_env, -torch.inf).amax(1)
    env_min = torch.where(kept, per_env, torch.inf).amin(1)
    labels = torch.unique(groups, return_inverse=True)[1]
    count = int(labels.max()) + 1 if labels.numel() else 0
    group_max = torch.full((count,), -torch.inf, dtype=torch.float64).scatter_reduce(0, labels, env_max, "amax")
    group_min = torch.full((count,), torch.inf, dtype=torch.float64).scatter_reduce(0, labels, env_min, "amin")
    spread = group_max - group_min
    has_signal = torch.isfinite(spread) & (spread > tolerance)
    return has_signal[labels]
