"""GRPO: group-relative advantages without a critic.

Envs are grouped by the initial state they share (``group_size`` consecutive envs of the
batch axis: env ``b`` is in group ``b // group_size``). Each episode gets one score, the
sum of its rewards up to its first done, and its advantage says how much better it did
than its group. Groups whose episodes all fail (or all succeed) carry no signal, since every
advantage is zero, and are filtered out of the loss mask.
"""

import torch

from vlarl_algos._shapes import check_ndim, check_shape, expand_prefix
from vlarl_algos.masks import first_done_mask


def _check_rollout(rewards: torch.Tensor, dones: torch.Tensor) -> None:
    """Raises ValueError unless rewards and dones form one time-first rollout."""
    check_ndim("rewards", rewards, (2, 3), "[T, B] or [T, B, C]")
    check_ndim("dones", dones, (2, rewards.ndim), "[T + 1, B] or [T + 1, B, C]")
    shape = (rewards.shape[0] + 1,) + tuple(rewards.shape[1 : dones.ndim])
    check_shape("dones", dones, shape, "[T + 1, B]" if dones.ndim == 2 else "[T + 1, B, C]")


def _check_groups(scores: torch.Tensor, group_size: int) -> None:
    """Raises ValueError unless ``scores`` is ``[B]`` with B a multiple of ``group_size >= 2``."""
    check_ndim("scores", scores, (1,), "[B]")
    if group_size < 2 or scores.shape[0] % group_size != 0:
        raise ValueError(
            f"group_size must be >= 2 and divide the batch size B = {scores.shape[0]}, got {group_size}"
        )


def _per_env(x: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Broadcasts a per-env ``[B]`` tensor over the time (and chunk) axes of ``shape``."""
    return x.reshape((1, -1) + (1,) * (len(shape) - 2)).expand(shape)


def grpo_scores(rewards: torch.Tensor, dones: torch.Tensor) -> torch.Tensor:
    """Episode score: the sum of rewards up to and including the first done.

    Args:
        rewards: ``[T, B]`` or ``[T, B, C]`` rewards.
        dones: ``[T + 1, B]`` (``dones[t + 1]`` from step ``t``) or, with action-level
            rewards, ``[T + 1, B, C]`` per sub-step.

    Returns:
        ``[B]`` scores.
    """
    _check_rollout(rewards, dones)
    mask = expand_prefix("loss_mask", first_done_mask(dones), rewards.shape, "rewards")
    kept = torch.where(mask, rewards, torch.zeros_like(rewards))
    return kept.sum(0) if kept.ndim == 2 else kept.sum((0, 2))


def group_advantages(
    scores: torch.Tensor, group_size: int, *, eps: float = 1e-6, leave_one_out: bool = False
) -> torch.Tensor:
    """One advantage per episode, relative to its group; zero mean inside every group.

    GRPO: ``(s - mean_g) / (std_g + eps)`` with the unbiased group std. Leave-one-out
    (RLOO): ``s - mean of the other members`` (``= G / (G - 1) * (s - mean_g)``), which
    keeps the scale of the score and gives an unbiased baseline.

    Args:
        scores: ``[B]`` episode scores, ``group_size`` consecutive envs per group.
        group_size: envs per group ``G`` (at least 2).
        eps: added to the std, so a group of equal scores gets zero advantages.
        leave_one_out: use the RLOO baseline instead of the normalized GRPO one.

    Returns:
        ``[B]`` advantages.
    """
    _check_groups(scores, group_size)
    grouped = scores.reshape(-1, group_size)
    centered = grouped - grouped.mean(-1, keepdim=True)
    if leave_one_out:
        advantages = centered * (group_size / (group_size - 1))
    else:
        advantages = centered / (grouped.std(-1, keepdim=True) + eps)
    return advantages.reshape(-1)


def group_filter(scores: torch.Tensor, group_size: int, low: float, high: float) -> torch.Tensor:
    """Keeps the groups whose mean score lies in ``[low, high]``.

    With a 0/1 success score, ``[0.1, 0.9]`` drops the groups where every episode failed or
    every episode succeeded: their advantages are all zero, so they only dilute the batch.

    Args:
        scores: ``[B]`` episode scores, ``group_size`` consecutive envs per group.
        group_size: envs per group.
        low: smallest group mean kept.
        high: largest group mean kept.

    Returns:
        ``[B]`` boolean, the same for every env of a group.
    """
    _check_groups(scores, group_size)
    if low > high:
        raise ValueError(f"group_filter needs low <= high, got low={low} and high={high}")
    group_mean = scores.reshape(-1, group_size).mean(-1, keepdim=True)
    keep = (group_mean >= low) & (group_mean <= high)
    return keep.expand(-1, group_size).reshape(-1)


def grpo_advantages(
    rewards: torch.Tensor,
    dones: torch.Tensor,
    group_size: int,
    *,
    eps: float = 1e-6,
    leave_one_out: bool = False,
    score_range: tuple[float, float] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO advantages broadcast to every step of each episode, and the loss mask to use with them.

    Args:
        rewards: ``[T, B]`` or ``[T, B, C]`` rewards.
        dones: ``[T + 1, B]`` or, with action-level rewards, ``[T + 1, B, C]`` done flags.
        group_size: envs per group; env ``b`` belongs to group ``b // group_size``.
        eps: see :func:`group_advantages`.
        leave_one_out: see :func:`group_advantages`.
        score_range: ``(low, high)`` to drop groups whose mean score lies outside it
            (see :func:`group_filter`); ``None`` keeps every group.

    Returns:
        ``(advantages, loss_mask)``, both ``[T, B]`` (``[T, B, C]`` for action-level dones):
        the episode's advantage on every step up to its first done and zero elsewhere, and
        the first-done mask with filtered groups removed.
    """
    scores = grpo_scores(rewards, dones)
    per_episode = group_advantages(scores, group_size, eps=eps, leave_one_out=leave_one_out)
    loss_mask = first_done_mask(dones)
    if score_range is not None:
        loss_mask = loss_mask & _per_env(group_filter(scores, group_size, *score_range), loss_mask.shape)
    broadcast = _per_env(per_episode, loss_mask.shape)
    advantages = torch.where(loss_mask, broadcast, torch.zeros_like(broadcast))
    return advantages, loss_mask
