"""Loss masks and masked statistics for time-first rollouts.

A rollout without autoreset keeps stepping an environment after its episode ended; what
comes after the first done is not part of the episode and must not reach a loss or a
statistic. Everything here takes a loss mask whose shape is a prefix of the data's shape
(``[T, B]`` masks ``[T, B]``, ``[T, B, C]`` and ``[T, B, C, A]`` alike). A mask is either
boolean or a float weight per entry (see :func:`length_normalized_weights`).
"""

import math

import torch

from vlarl_algos._shapes import check_ndim, expand_prefix


def first_done_mask(dones: torch.Tensor) -> torch.Tensor:
    """Loss mask of a rollout without autoreset: every step after an env's first done is masked.

    ``dones[t + 1]`` is the done flag returned by step ``t``, so step ``t`` is valid when no
    done appears in ``dones[0 .. t]``: the step that ends the episode is kept, the ones after
    it are not. ``dones[0]`` set means the episode ended before this rollout began, and
    every step of that env is masked.

    Args:
        dones: ``[T + 1, B]`` chunk-level done flags, or ``[T + 1, B, C]`` action-level flags
            where ``dones[t + 1, b, c]`` is the done after sub-step ``c`` of chunk ``t``
            (any flag in ``dones[0]`` counts as done before the rollout).

    Returns:
        Boolean mask ``[T, B]`` (or ``[T, B, C]`` for action-level dones).
    """
    check_ndim("dones", dones, (2, 3), "[T + 1, B] or [T + 1, B, C]")
    if dones.shape[0] < 2:
        raise ValueError(f"dones must have T + 1 >= 2 rows, got shape {tuple(dones.shape)}")
    done = dones != 0
    if done.ndim == 2:
        return done[:-1].cumsum(0) == 0
    num_chunks, batch, chunk = done.shape[0] - 1, done.shape[1], done.shape[2]
    # One flag per sub-step, in time order: done after sub-step n sits at n + 1.
    steps = done[1:].permute(0, 2, 1).reshape(num_chunks * chunk, batch)
    before = torch.cat([done[0].any(-1, keepdim=True).T, steps[:-1]])
    valid = before.cumsum(0) == 0
    return valid.reshape(num_chunks, chunk, batch).permute(0, 2, 1)


def length_normalized_weights(loss_mask: torch.Tensor) -> torch.Tensor:
    """Per-entry weights that give every trajectory the same total weight.

    With a plain masked mean, a trajectory that runs 200 steps counts 200 times as much as
    one that succeeds in a single step. Weighting entry ``(t, b)`` by ``mask / L_b``, where
    ``L_b`` is the valid length of trajectory ``b``, makes :func:`masked_mean` the mean over
    trajectories of each trajectory's own mean. The weights stay attached to their entries
    through flattening and minibatching, and an all-masked trajectory gets weight zero.

    Args:
        loss_mask: ``[T, B]`` or ``[T, B, C]`` boolean mask (e.g. from :func:`first_done_mask`).

    Returns:
        Float32 weights with the shape of ``loss_mask``.
    """
    check_ndim("loss_mask", loss_mask, (2, 3), "[T, B] or [T, B, C]")
    mask = loss_mask.to(torch.float32)
    dims = [d for d in range(mask.ndim) if d != 1]
    lengths = mask.sum(dim=dims, keepdim=True)
    return mask / lengths.clamp(min=1.0)


def masked_mean(x: torch.Tensor, loss_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Weighted mean ``sum(w * x) / sum(w)`` over the entries the mask keeps.

    Masked-out entries are replaced by zero before the product, so a NaN or inf sitting in
    padding never leaks into the result or its gradient. An all-masked input gives 0.

    Args:
        x: ``[*L, *rest]`` values.
        loss_mask: ``[*L]`` boolean mask or float weights; ``None`` means the plain mean.

    Returns:
        A 0-dim tensor.
    """
    if loss_mask is None:
        return x.mean()
    weights = expand_prefix("loss_mask", loss_mask, x.shape, "x").to(x.dtype)
    weighted = torch.where(weights != 0, x * weights, torch.zeros_like(x))
    return weighted.sum() / weights.sum().clamp(min=torch.finfo(x.dtype).tiny)


def _masked_moments(
    x: torch.Tensor, loss_mask: torch.Tensor | None, dim: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Mean and unbiased variance of the kept entries of ``x`` (over ``dim``, or all), and the keep mask."""
    dims = tuple(range(x.ndim)) if dim is None else (dim,)
    if loss_mask is None:
        count = math.prod(x.shape[d] for d in dims)
        mean = x.mean(dims, keepdim=True)
        return mean, (x - mean).square().sum(dims, keepdim=True) / max(count - 1, 1), None
    keep = expand_prefix("loss_mask", loss_mask, x.shape, "x") != 0
    count = keep.sum(dims, keepdim=True)
    mean = torch.where(keep, x, torch.zeros_like(x)).sum(dims, keepdim=True) / count.clamp(min=1)
    centered = torch.where(keep, x - mean, torch.zeros_like(x))
    return mean, centered.square().sum(dims, keepdim=True) / (count - 1).clamp(min=1), keep


def normalize_advantages(
    advantages: torch.Tensor,
    loss_mask: torch.Tensor | None = None,
    eps: float = 1e-8,
    dim: int | None = None,
    groups: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(A - mean) / (std + eps)`` with the mean and (unbiased) std over masked entries only.

    Statistics over padding would shift every real advantage by an amount that depends on
    how much padding the batch happens to hold; here masked entries neither count nor
    change: they come back as zero.

    Args:
        advantages: ``[*L, *rest]`` advantages.
        loss_mask: ``[*L]`` mask or weights (an entry counts when its weight is nonzero);
            ``None`` normalizes over every entry.
        eps: added to the std so a constant batch does not divide by zero.
        dim: normalize each slice along this axis on its own, e.g. ``dim=1`` on a
            ``[num_minibatches, minibatch_size]`` view normalizes every minibatch at once;
            ``None`` uses one mean and std for the whole tensor.
        groups: ``[*L]`` integer label of every entry, e.g. the task of each env repeated over
            time: each group is normalized with its own mean and std. In a multi-task batch
            one shared scale lets the tasks whose returns spread widest set the size of every
            task's advantages; per group, each task's better-than-usual episodes weigh alike.
            Cannot be combined with ``dim``.

    Returns:
        Normalized advantages with the shape of ``advantages``.
    """
    if groups is not None:
        return _normalize_per_group(advantages, loss_mask, eps, dim, groups)
    mean, var, keep = _masked_moments(advantages, loss_mask, dim)
    normalized = (advantages - mean) / (var.sqrt() + eps)
    return normalized if keep is None else torch.where(keep, normalized, torch.zeros_like(normalized))


def _normalize_per_group(
    advantages: torch.Tensor, loss_mask: torch.Tensor | None, eps: float, dim: int | None, groups: torch.Tensor
) -> torch.Tensor:
    """One masked normalization per label; a label's entries see only their own statistics, and padding stays 0."""
    if dim is not None:
        raise ValueError(f"normalize_advantages: pass groups or dim, not both (got dim={dim} and groups)")
    if groups.is_floating_point() or groups.is_complex():
        raise ValueError(f"groups must hold integer labels, got dtype {groups.dtype}")
    labels = expand_prefix("groups", groups, advantages.shape, "advantages")
    kept = torch.ones_like(labels, dtype=torch.bool)
    if loss_mask is not None:
        kept = expand_prefix("loss_mask", loss_mask, advantages.shape, "advantages") != 0
    normalized = torch.zeros_like(advantages)
    for label in labels.unique():
        member = kept & (labels == label)
        normalized = torch.where(member, normalize_advantages(advantages, member, eps), normalized)
    return normalized


def explained_variance(
    values: torch.Tensor, returns: torch.Tensor, loss_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """``1 - Var[returns - values] / Var[returns]`` over masked entries.

    1 means the critic predicts the returns perfectly, 0 means it does no better than a
    constant, and a negative value means worse than a constant. NaN when the returns are
    constant, since the ratio is then undefined.

    Args:
        values: ``[*L, *rest]`` value predictions.
        returns: the value targets, same shape as ``values``.
        loss_mask: ``[*L]`` mask or weights; ``None`` uses every entry.

    Returns:
        A 0-dim tensor (no gradient).
    """
    if values.shape != returns.shape:
        raise ValueError(
            f"values and returns must have the same shape, got {tuple(values.shape)} and {tuple(returns.shape)}"
        )
    values, returns = values.detach(), returns.detach()
    _, var_returns, _ = _masked_moments(returns, loss_mask)
    _, var_residual, _ = _masked_moments(returns - values, loss_mask)
    var_returns, var_residual = var_returns.reshape(()), var_residual.reshape(())
    undefined = torch.full_like(var_returns, float("nan"))
    return torch.where(var_returns > 0, 1.0 - var_residual / var_returns, undefined)
