"""Generalized Advantage Estimation over time-first rollouts, at chunk or action level.

With ``nextnonterminal_t = 1 - dones[t + 1]`` (the done returned by step ``t``)::

    delta_t = r_t + gamma * V_{t+1} * nextnonterminal_t - V_t
    A_t     = delta_t + gamma * lambda * nextnonterminal_t * A_{t+1}
    R_t     = A_t + V_t

At chunk level one step is one action chunk (``rewards [T, B]``). At action level
(``rewards [T, B, C]``) the ``T * C`` sub-steps are one sequence discounted per sub-step.

:func:`compute_gae` solves the recurrence with a log-depth parallel scan (``log2(T * C)``
tensor operations instead of ``T * C``); :func:`compute_gae_reference` is the plain
reversed loop it is tested against.
"""

import torch

from vlarl_algos._shapes import check_ndim, check_shape


def _check_inputs(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    truncations: torch.Tensor | None,
    final_values: torch.Tensor | None,
) -> None:
    """Raises ValueError unless the shapes form one chunk- or action-level rollout."""
    check_ndim("rewards", rewards, (2, 3), "[T, B] (chunk level) or [T, B, C] (action level)")
    num_steps, batch = rewards.shape[:2]
    chunk_shape = (num_steps + 1, batch)
    action_shape = chunk_shape + tuple(rewards.shape[2:])
    expected = "[T + 1, B]" if rewards.ndim == 2 else "[T + 1, B] or [T + 1, B, C]"
    for name, tensor in (("values", values), ("dones", dones)):
        check_ndim(name, tensor, (2, 3), expected)
        shape = chunk_shape if tensor.ndim == 2 else action_shape
        check_shape(name, tensor, shape, expected)
    if (truncations is None) != (final_values is None):
        raise ValueError(
            "truncations and final_values go together: pass both (bootstrap truncated episodes) or neither"
        )
    if truncations is not None:
        step_shape = (num_steps, batch)
        for name, tensor in (("truncations", truncations), ("final_values", final_values)):
            check_ndim(name, tensor, (2, rewards.ndim), "[T, B] or the shape of rewards")
            shape = step_shape if tensor.ndim == 2 else tuple(rewards.shape)
            check_shape(name, tensor, shape, "[T, B] or the shape of rewards")


def _bootstrap_truncations(
    rewards: torch.Tensor, truncations: torch.Tensor, final_values: torch.Tensor, gamma: float
) -> torch.Tensor:
    """Adds ``gamma * V(final obs)`` to the last reward of every truncated episode.

    A truncated episode did not end in the MDP: its return continues past the cut. The done
    flag stops GAE from reading ``V`` of the next (already reset) observation, so the value
    of the real final observation is folded into the reward instead. A ``[T, B]`` flag
    applies to the last sub-step of the chunk, where the episode was cut.
    """
    bonus = gamma * final_values.to(rewards.dtype) * truncations.to(rewards.dtype)
    if bonus.ndim == rewards.ndim:
        return rewards + bonus
    rewards = rewards.clone()
    rewards[..., -1] += bonus
    return rewards


def _to_substeps(
    rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flattens an action-level rollout to ``N = T * C`` sub-steps in time order.

    Returns rewards ``[N, B]``, values ``[N + 1, B]`` and dones ``[N + 1, B]``. A chunk-level
    value ``[T + 1, B]`` serves every sub-step of its chunk; a chunk-level done ends the
    chunk's last sub-step; the bootstrap value is that of the first sub-step after the rollout.
    """
    num_steps, batch, chunk = rewards.shape
    num_substeps = num_steps * chunk
    flat_rewards = rewards.permute(0, 2, 1).reshape(num_substeps, batch)
    if values.ndim == 2:
        values = values.unsqueeze(-1).expand(num_steps + 1, batch, chunk)
    flat_values = values.permute(0, 2, 1).reshape((num_steps + 1) * chunk, batch)[: num_substeps + 1]
    if dones.ndim == 2:
        substep_dones = torch.zeros(num_steps, chunk, batch, dtype=dones.dtype, device=dones.device)
        substep_dones[:, -1] = dones[1:]
        flat_dones = torch.cat([dones[:1], substep_dones.reshape(num_substeps, batch)])
    else:
        flat_dones = dones.permute(0, 2, 1).reshape((num_steps + 1) * chunk, batch)[chunk - 1 :]
    return flat_rewards, flat_values, flat_dones


def _reverse_linear_scan(delta: torch.Tensor, discount: torch.Tensor) -> torch.Tensor:
    """Solves ``x_t = delta_t + discount_t * x_{t+1}`` (with ``x_N = 0``) along dim 0.

    Hillis-Steele scan: after the round with stride ``s``, entry ``t`` holds the affine map
    ``x_t = b_t + a_t * x_{t + 2s}``, composed from the maps of ``[t, t + s)`` and
    ``[t + s, t + 2s)``. Entries whose span reaches the end are already complete, since
    ``x`` past the end is zero. Every round is a few whole-tensor operations.
    """
    b = delta.clone()
    a = discount.clone()
    num = b.shape[0]
    stride = 1
    while stride < num:
        b[:-stride] += a[:-stride] * b[stride:]
        if 2 * stride < num:
            a[:-stride] = a[:-stride] * a[stride:]
        stride *= 2
    return b


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    *,
    gamma: float,
    gae_lambda: float,
    truncations: torch.Tensor | None = None,
    final_values: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE advantages and lambda-returns with done masking and truncation bootstrapping.

    Args:
        rewards: ``[T, B]`` chunk-level rewards, or ``[T, B, C]`` per action of each chunk.
        values: ``[T + 1, B]`` critic values of the observation before each step plus the
            bootstrap value of the observation after the last one. At action level also
            ``[T + 1, B, C]`` (one value per sub-step; the bootstrap is ``values[T, :, 0]``).
        dones: ``[T + 1, B]``; ``dones[t + 1]`` is the done (terminated or truncated)
            returned by step ``t`` and stops the return from flowing across it; ``dones[0]``
            is not read. At action level also ``[T + 1, B, C]``, the done of each sub-step.
        gamma: discount per step (per chunk at chunk level, per action at action level).
        gae_lambda: GAE lambda; 1 gives Monte-Carlo returns, 0 one-step TD.
        truncations: optional ``[T, B]`` (or rewards-shaped) flags of episodes cut by a
            time limit on that step; needs ``final_values``.
        final_values: ``[T, B]`` (or rewards-shaped) values of the final observation of each
            truncated episode; ``gamma * final_values`` is added to the reward where
            ``truncations`` is set (at the last sub-step for ``[T, B]`` flags).

    Returns:
        ``(advantages, returns)``, both shaped like ``rewards``.
    """
    _check_inputs(rewards, values, dones, truncations, final_values)
    if truncations is not None:
        rewards = _bootstrap_truncations(rewards, truncations, final_values, gamma)
    if rewards.ndim == 2:
        flat_rewards, flat_values, flat_dones = rewards, values, dones
    else:
        flat_rewards, flat_values, flat_dones = _to_substeps(rewards, values, dones)
    flat_values = flat_values.to(flat_rewards.dtype)
    nextnonterminal = 1.0 - flat_dones[1:].to(flat_rewards.dtype)
    delta = flat_rewards + gamma * flat_values[1:] * nextnonterminal - flat_values[:-1]
    advantages = _reverse_linear_scan(delta, gamma * gae_lambda * nextnonterminal)
    returns = advantages + flat_values[:-1]
    if rewards.ndim == 3:
        num_steps, batch, chunk = rewards.shape
        advantages = advantages.reshape(num_steps, chunk, batch).permute(0, 2, 1)
        returns = returns.reshape(num_steps, chunk, batch).permute(0, 2, 1)
    return advantages, returns


def compute_gae_reference(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    *,
    gamma: float,
    gae_lambda: float,
    truncations: torch.Tensor | None = None,
    final_values: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reversed loop over chunks and sub-steps, kept as the specification of :func:`compute_gae`.

    Same arguments, shapes and results as :func:`compute_gae`; it walks one sub-step at a
    time and is meant for tests, not training.
    """
    _check_inputs(rewards, values, dones, truncations, final_values)
    action_level = rewards.ndim == 3
    if not action_level:
        rewards, values, dones = rewards.unsqueeze(-1), values.unsqueeze(-1), dones.unsqueeze(-1)
        if truncations is not None:
            truncations, final_values = truncations.unsqueeze(-1), final_values.unsqueeze(-1)
    num_steps, batch, chunk = rewards.shape

    def value(t: int, c: int) -> torch.Tensor:
        return values[t, :, c] if values.ndim == 3 else values[t]

    def done_after(t: int, c: int) -> torch.Tensor:
        if dones.ndim == 3:
            return dones[t + 1, :, c]
        return dones[t + 1] if c == chunk - 1 else torch.zeros_like(dones[t + 1])

    advantages = torch.zeros_like(rewards)
    returns = torch.zeros_like(rewards)
    lastgaelam = rewards.new_zeros(batch)
    for t in reversed(range(num_steps)):
        for c in reversed(range(chunk)):
            reward = rewards[t, :, c]
            if truncations is not None and truncations.ndim == 3:
                reward = reward + gamma * final_values[t, :, c] * truncations[t, :, c].to(rewards.dtype)
            elif truncations is not None and c == chunk - 1:
                reward = reward + gamma * final_values[t] * truncations[t].to(rewards.dtype)
            nextvalue = value(t, c + 1) if c + 1 < chunk else value(t + 1, 0)
            nextnonterminal = 1.0 - done_after(t, c).to(rewards.dtype)
            delta = reward + gamma * nextvalue * nextnonterminal - value(t, c)
            lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
            advantages[t, :, c] = lastgaelam
            returns[t, :, c] = lastgaelam + value(t, c)
    if not action_level:
        advantages, returns = advantages.squeeze(-1), returns.squeeze(-1)
    return advantages, returns
