"""GAE: against Stable-Baselines3, a hand-worked rollout, and the reference loop."""

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st
from stable_baselines3.common.buffers import RolloutBuffer

from vlarl_algos import compute_gae, compute_gae_reference


def _sb3_gae(rewards, values, dones, gamma, gae_lambda):
    """Runs SB3's RolloutBuffer on the same rollout, mapping our layout onto its own.

    SB3 stores ``episode_starts[t]`` (our ``dones[t]``: the previous step ended an episode)
    and takes the done of the last step and the bootstrap value as arguments.
    """
    num_steps, batch = rewards.shape
    buffer = RolloutBuffer(
        num_steps,
        spaces.Box(-1.0, 1.0, (1,), np.float32),
        spaces.Box(-1.0, 1.0, (1,), np.float32),
        device="cpu",
        gae_lambda=gae_lambda,
        gamma=gamma,
        n_envs=batch,
    )
    for t in range(num_steps):
        buffer.add(
            np.zeros((batch, 1), np.float32),
            np.zeros((batch, 1), np.float32),
            rewards[t].numpy(),
            dones[t].numpy(),
            values[t].clone(),
            torch.zeros(batch),
        )
    buffer.compute_returns_and_advantage(values[num_steps].clone(), dones[num_steps].numpy())
    return torch.from_numpy(buffer.advantages), torch.from_numpy(buffer.returns)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(("gamma", "gae_lambda"), [(0.99, 0.95), (0.9, 1.0), (1.0, 0.0)])
def test_gae_matches_stable_baselines3(seed, gamma, gae_lambda):
    generator = torch.Generator().manual_seed(seed)
    num_steps, batch = 64, 6
    rewards = torch.randn(num_steps, batch, generator=generator)
    values = torch.randn(num_steps + 1, batch, generator=generator)
    dones = (torch.rand(num_steps + 1, batch, generator=generator) < 0.1).float()

    expected_advantages, expected_returns = _sb3_gae(rewards, values, dones, gamma, gae_lambda)
    for gae in (compute_gae, compute_gae_reference):
        advantages, returns = gae(rewards, values, dones, gamma=gamma, gae_lambda=gae_lambda)
        torch.testing.assert_close(advantages, expected_advantages, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(returns, expected_returns, rtol=1e-5, atol=1e-5)


def test_gae_hand_worked_example():
    # One env, three steps; the episode terminates on step 1, so step 0 sees no value past it.
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.tensor([[0.5], [1.0], [1.5], [2.0]])
    dones = torch.tensor([[0.0], [0.0], [1.0], [0.0]])
    gamma, gae_lambda = 0.5, 0.5
    # delta_2 = 3 + 0.5 * 2.0 - 1.5 = 2.5              A_2 = 2.5
    # delta_1 = 2 + 0 - 1.0 = 1.0 (done after step 1)   A_1 = 1.0
    # delta_0 = 1 + 0.5 * 1.0 - 0.5 = 1.0               A_0 = 1.0 + 0.25 * 1.0 = 1.25
    advantages, returns = compute_gae(rewards, values, dones, gamma=gamma, gae_lambda=gae_lambda)
    torch.testing.assert_close(advantages, torch.tensor([[1.25], [1.0], [2.5]]))
    torch.testing.assert_close(returns, torch.tensor([[1.75], [2.0], [4.0]]))


def test_truncation_bootstraps_final_value():
    # The episode is cut by a time limit on step 1; the next value is that of a reset
    # observation and must not leak in, while V(final obs) = 4 must.
    rewards = torch.tensor([[1.0], [1.0]])
    values = torch.tensor([[0.0], [0.0], [100.0]])
    dones = torch.tensor([[0.0], [0.0], [1.0]])
    truncations = torch.tensor([[False], [True]])
    final_values = torch.tensor([[0.0], [4.0]])
    advantages, _ = compute_gae(
        rewards, values, dones, gamma=0.5, gae_lambda=1.0, truncations=truncations, final_values=final_values
    )
    # A_1 = 1 + 0.5 * 4 = 3;  A_0 = 1 + 0.5 * 3 = 2.5
    torch.testing.assert_close(advantages, torch.tensor([[2.5], [3.0]]))


def test_action_level_hand_worked_example():
    # Two chunks of two actions, one env; per-sub-step values; gamma discounts per action.
    rewards = torch.tensor([[[1.0, 2.0]], [[3.0, 4.0]]])
    values = torch.zeros(3, 1, 2)
    values[2, 0, 0] = 10.0  # the bootstrap value after the last sub-step
    dones = torch.zeros(3, 1, 2)
    advantages, _ = compute_gae(rewards, values, dones, gamma=0.5, gae_lambda=1.0)
    # Discounted sums backwards: 4 + 5 = 9, 3 + 4.5 = 7.5, 2 + 3.75 = 5.75, 1 + 2.875 = 3.875.
    torch.testing.assert_close(advantages, torch.tensor([[[3.875, 5.75]], [[7.5, 9.0]]]))


@settings(max_examples=60, deadline=None)
@given(
    num_steps=st.integers(1, 40),
    batch=st.integers(1, 5),
    chunk=st.sampled_from([None, 1, 2, 5]),
    per_substep_values=st.booleans(),
    per_substep_dones=st.booleans(),
    with_truncations=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_fast_gae_equals_reference_loop(
    num_steps, batch, chunk, per_substep_values, per_substep_dones, with_truncations, seed
):
    generator = torch.Generator().manual_seed(seed)
    step_shape = (num_steps, batch) if chunk is None else (num_steps, batch, chunk)
    rewards = torch.randn(step_shape, generator=generator, dtype=torch.float64)
    value_shape = (num_steps + 1, batch) + ((chunk,) if chunk and per_substep_values else ())
    done_shape = (num_steps + 1, batch) + ((chunk,) if chunk and per_substep_dones else ())
    values = torch.randn(value_shape, generator=generator, dtype=torch.float64)
    dones = torch.rand(done_shape, generator=generator) < 0.2
    kwargs = {}
    if with_truncations:
        kwargs["truncations"] = torch.rand(num_steps, batch, generator=generator) < 0.2
        kwargs["final_values"] = torch.randn(num_steps, batch, generator=generator, dtype=torch.float64)
    fast = compute_gae(rewards, values, dones, gamma=0.97, gae_lambda=0.9, **kwargs)
    slow = compute_gae_reference(rewards, values, dones, gamma=0.97, gae_lambda=0.9, **kwargs)
    torch.testing.assert_close(fast, slow)


@settings(max_examples=40, deadline=None)
@given(num_steps=st.integers(1, 30), batch=st.integers(1, 4), seed=st.integers(0, 2**31 - 1))
def test_action_level_with_one_action_per_chunk_equals_chunk_level(num_steps, batch, seed):
    generator = torch.Generator().manual_seed(seed)
    rewards = torch.randn(num_steps, batch, generator=generator)
    values = torch.randn(num_steps + 1, batch, generator=generator)
    dones = torch.rand(num_steps + 1, batch, generator=generator) < 0.2
    truncations = torch.rand(num_steps, batch, generator=generator) < 0.2
    final_values = torch.randn(num_steps, batch, generator=generator)
    kwargs = {"gamma": 0.9, "gae_lambda": 0.8, "truncations": truncations, "final_values": final_values}
    chunk_advantages, chunk_returns = compute_gae(rewards, values, dones, **kwargs)
    for action_values in (values, values.unsqueeze(-1)):
        for action_dones in (dones, dones.unsqueeze(-1)):
            advantages, returns = compute_gae(rewards.unsqueeze(-1), action_values, action_dones, **kwargs)
            torch.testing.assert_close(advantages.squeeze(-1), chunk_advantages)
            torch.testing.assert_close(returns.squeeze(-1), chunk_returns)


@pytest.mark.parametrize(
    ("rewards_shape", "values_shape", "dones_shape", "match"),
    [
        ((5,), (6,), (6,), "rewards must have shape"),
        ((5, 3), (5, 3), (6, 3), r"values must have shape \[T \+ 1, B\]"),
        ((5, 3), (6, 3), (6, 4), "dones must have shape"),
        ((5, 3), (6, 3, 2), (6, 3), "values must have shape"),
        ((5, 3, 2), (6, 3, 4), (6, 3), "values must have shape"),
    ],
)
def test_gae_rejects_mismatched_shapes(rewards_shape, values_shape, dones_shape, match):
    with pytest.raises(ValueError, match=match):
        compute_gae(
            torch.zeros(rewards_shape), torch.zeros(values_shape), torch.zeros(dones_shape), gamma=0.9, gae_lambda=0.9
        )


def test_gae_rejects_truncations_without_final_values():
    with pytest.raises(ValueError, match="truncations and final_values go together"):
        compute_gae(
            torch.zeros(4, 2), torch.zeros(5, 2), torch.zeros(5, 2), gamma=0.9, gae_lambda=0.9,
            truncations=torch.zeros(4, 2),
        )
