"""PPO losses for action-chunk policies: clipped surrogate, clipped value loss, entropy bonus.

A VLA policy returns log-probs per action dimension, ``[*L, C, A]`` for a chunk of ``C``
actions of ``A`` dimensions (``*L`` is the batch layout, ``[N]`` flattened or ``[T, B]``
time-first). The importance ratio can be taken per token (each dimension on its own), per
action (summed over ``A``) or per chunk (summed over ``C`` and ``A``); the sum is the
log-prob of the joint, since the dimensions are sampled independently. Advantages and loss
masks line up on the leading axes: a ``[*L]`` tensor applies to every action and token of
its chunk, a ``[*L, C]`` one to every token of its action.

Every loss returns ``(loss, metrics)``: a differentiable 0-dim tensor and a dict of
detached 0-dim tensors named as in ARCHITECTURE.md. Nothing is logged and nothing calls
``.item()``, so the caller decides when to synchronize.
"""

import torch
import torch.nn.functional as F

from vlarl_algos._shapes import check_ndim, expand_prefix
from vlarl_algos.masks import masked_mean

LOGPROB_LEVELS = ("token", "action", "chunk")
VALUE_LOSS_TYPES = ("squared", "huber")


def aggregate_logprobs(logprobs: torch.Tensor, level: str) -> torch.Tensor:
    """Sums per-dimension log-probs (or entropies) up to the level the ratio is taken at.

    Args:
        logprobs: ``[*L, C, A]`` per action dimension.
        level: ``"token"`` keeps ``[*L, C, A]``; ``"action"`` sums ``A`` to ``[*L, C]``;
            ``"chunk"`` sums ``C`` and ``A`` to ``[*L]``.

    Returns:
        The aggregated tensor.
    """
    check_ndim("logprobs", logprobs, tuple(range(2, 9)), "[*L, C, A]")
    if level == "token":
        return logprobs
    if level == "action":
        return logprobs.sum(-1)
    if level == "chunk":
        return logprobs.sum((-2, -1))
    raise ValueError(f"level must be one of {LOGPROB_LEVELS}, got {level!r}")


def _keep_mask(loss_mask: torch.Tensor | None, shape: torch.Size, target: str) -> torch.Tensor | None:
    """The boolean keep mask expanded to ``shape``, or None without a mask."""
    if loss_mask is None:
        return None
    return expand_prefix("loss_mask", loss_mask, shape, target) != 0


def _zero_masked(x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """Zeroes the masked entries, so padding can never produce inf or NaN in a gradient."""
    return x if keep is None else torch.where(keep, x, torch.zeros_like(x))


def ppo_actor_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    *,
    loss_mask: torch.Tensor | None = None,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
    logprob_level: str = "chunk",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped surrogate loss ``max(-A * ratio, -A * clip(ratio, 1 - clip_low, 1 + clip_high))``.

    ``ratio = exp(logratio)``, ``logratio = logprobs - old_logprobs`` summed at
    ``logprob_level``. The asymmetric clip (a larger ``clip_high``) lets the probability of
    good but unlikely actions grow further before the gradient stops. The dual clip bounds
    the loss by ``dual_clip * |A|``, so a negative advantage on an action whose ratio has
    exploded cannot dominate the batch (for a positive advantage the bound never binds).

    Args:
        logprobs: ``[*L, C, A]`` log-probs of the taken actions under the current policy.
        old_logprobs: ``[*L, C, A]`` log-probs under the policy that collected the data.
        advantages: ``[*L]`` (per chunk) or ``[*L, C]`` (per action; not at chunk level).
        loss_mask: ``[*L]`` or ``[*L, C]`` boolean mask or float weights (see
            :func:`vlarl_algos.masks.length_normalized_weights`); ``None`` keeps everything.
        clip_low: the ratio is clipped below at ``1 - clip_low``.
        clip_high: the ratio is clipped above at ``1 + clip_high``.
        dual_clip: ``None`` or a constant ``c > 1``; the loss is ``min(loss, c * |A|)``.
        logprob_level: ``"token"``, ``"action"`` or ``"chunk"`` (see :func:`aggregate_logprobs`).

    Returns:
        ``(loss, metrics)`` with metrics ``policy_loss``, ``approx_kl`` (the ``k3`` estimate
        ``(ratio - 1) - logratio``), ``clip_fraction`` (entries whose clipped term is
        active, i.e. whose gradient is cut), ``ratio_mean``, ``ratio_min``, ``ratio_max``,
        ``clipped_ratio`` (the mean of the ratio clamped to its bounds, RLinf's
        ``actor/clipped_ratio``), and ``dual_clip_fraction`` when ``dual_clip`` is set; all over
        masked entries.
    """
    if logprobs.shape != old_logprobs.shape:
        raise ValueError(
            f"logprobs and old_logprobs must have the same shape [*L, C, A], got "
            f"{tuple(logprobs.shape)} and {tuple(old_logprobs.shape)}"
        )
    if not 0.0 <= clip_low < 1.0 or clip_high < 0.0:
        raise ValueError(f"clip_low must be in [0, 1) and clip_high >= 0, got {clip_low} and {clip_high}")
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be None or > 1, got {dual_clip}")
    logratio = aggregate_logprobs(logprobs, logprob_level) - aggregate_logprobs(old_logprobs, logprob_level)
    target = f"the {logprob_level}-level ratio"
    keep = _keep_mask(loss_mask, logratio.shape, target)
    advantages = _zero_masked(expand_prefix("advantages", advantages, logratio.shape, target), keep)
    logratio = _zero_masked(logratio, keep)
    ratio = torch.exp(logratio)
    pg_loss1 = -advantages * ratio
    with torch.no_grad():
        # Where a clipped term wins it is a constant of the parameters (the ratio is past its
        # bound, or c * |A| for the dual clip), so the clipped losses are computed outside
        # autograd and picked with torch.where: the values and gradients of
        # min(max(pg_loss1, pg_loss2), pg_loss3), with fewer operations in the backward pass.
        clamped_ratio = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
        pg_loss2 = -advantages * clamped_ratio
        ratio_clipped = pg_loss2 > pg_loss1
        pg_loss_clipped = torch.max(pg_loss1, pg_loss2)
        clipped = ratio_clipped
        if dual_clip is not None:
            pg_loss3 = dual_clip * advantages.abs()
            dual_clipped = pg_loss3 < pg_loss_clipped
            pg_loss_clipped = torch.min(pg_loss_clipped, pg_loss3)
            clipped = ratio_clipped | dual_clipped
    pg_loss = torch.where(clipped, pg_loss_clipped, pg_loss1)
    loss = masked_mean(pg_loss, loss_mask)

    with torch.no_grad():
        metrics = {
            "policy_loss": loss.detach(),
            "approx_kl": masked_mean((ratio - 1.0) - logratio, loss_mask),
            "clip_fraction": masked_mean(ratio_clipped.to(ratio.dtype), loss_mask),
            "ratio_mean": masked_mean(ratio, loss_mask),
            "clipped_ratio": masked_mean(clamped_ratio, loss_mask),
            "ratio_min": (ratio if keep is None else torch.where(keep, ratio, torch.inf)).min(),
            "ratio_max": (ratio if keep is None else torch.where(keep, ratio, -torch.inf)).max(),
        }
        if dual_clip is not None:
            metrics["dual_clip_fraction"] = masked_mean(dual_clipped.to(ratio.dtype), loss_mask)
    return loss, metrics


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    *,
    loss_mask: torch.Tensor | None = None,
    clip_range: float | None = None,
    loss_type: str = "squared",
    huber_delta: float = 10.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Critic loss with optional PPO value clipping.

    With ``clip_range`` set, the prediction is also scored as
    ``V_clipped = old_values + clip(values - old_values, -clip_range, clip_range)`` and the
    larger (pessimistic) of the two errors is used, so one update cannot move a value far
    from the one the advantages were computed with.

    Args:
        values: ``[*L]`` (or ``[*L, C]`` for an action-level critic) current predictions.
        old_values: predictions of the critic that collected the data, same shape.
        returns: value targets (e.g. GAE lambda-returns), same shape.
        loss_mask: a mask or weights whose shape is a prefix of ``values``' shape.
        clip_range: ``None`` (no value clipping) or the clip half-width.
        loss_type: ``"squared"`` for ``error ** 2`` (as ``F.mse_loss``) or ``"huber"`` for
            ``F.huber_loss`` with ``huber_delta``, robust to rare huge returns.
        huber_delta: where the Huber loss turns from quadratic to linear.

    Returns:
        ``(loss, metrics)`` with ``value_loss`` and ``value_clip_ratio`` (the fraction of
        masked entries whose prediction moved more than ``clip_range``; 0 without clipping).
        :func:`vlarl_algos.masks.explained_variance` gives ``explained_variance``.
    """
    if not values.shape == old_values.shape == returns.shape:
        raise ValueError(
            f"values, old_values and returns must have the same shape, got {tuple(values.shape)}, "
            f"{tuple(old_values.shape)} and {tuple(returns.shape)}"
        )
    if loss_type not in VALUE_LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {VALUE_LOSS_TYPES}, got {loss_type!r}")
    if clip_range is not None and clip_range <= 0:
        raise ValueError(f"clip_range must be None or > 0, got {clip_range}")
    keep = _keep_mask(loss_mask, values.shape, "values")
    values, old_values, returns = (_zero_masked(x, keep) for x in (values, old_values, returns))

    def error(prediction: torch.Tensor) -> torch.Tensor:
        if loss_type == "squared":
            return F.mse_loss(prediction, returns, reduction="none")
        return F.huber_loss(prediction, returns, reduction="none", delta=huber_delta)

    v_loss = error(values)
    if clip_range is not None:
        v_clipped = old_values + torch.clamp(values - old_values, -clip_range, clip_range)
        v_loss = torch.max(v_loss, error(v_clipped))
    loss = masked_mean(v_loss, loss_mask)
    with torch.no_grad():
        if clip_range is None:
            clip_ratio = torch.zeros((), dtype=values.dtype)
        else:
            clip_ratio = masked_mean(((values - old_values).abs() > clip_range).to(values.dtype), loss_mask)
    return loss, {"value_loss": loss.detach(), "value_clip_ratio": clip_ratio}


def entropy_loss(
    entropy: torch.Tensor,
    *,
    loss_mask: torch.Tensor | None = None,
    entropy_level: str = "chunk",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Negative masked mean entropy: adding ``coef * loss`` to the total rewards exploration.

    Args:
        entropy: ``[*L, C, A]`` entropy per action dimension; the entropy of independent
            dimensions adds up, so it is summed to ``entropy_level`` like the log-probs.
        loss_mask: a mask or weights whose shape is a prefix of the aggregated shape.
        entropy_level: ``"token"``, ``"action"`` or ``"chunk"`` (see :func:`aggregate_logprobs`).

    Returns:
        ``(loss, metrics)`` with ``entropy`` (the masked mean) and ``entropy_loss`` (its negative).
    """
    entropy = aggregate_logprobs(entropy, entropy_level)
    keep = _keep_mask(loss_mask, entropy.shape, f"the {entropy_level}-level entropy")
    mean_entropy = masked_mean(_zero_masked(entropy, keep), loss_mask)
    loss = -mean_entropy
    return loss, {"entropy": mean_entropy.detach(), "entropy_loss": loss.detach()}
