"""GRPO scores, group advantages, filtering and the broadcast to steps."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vlarl_algos import group_advantages, group_filter, grpo_advantages, grpo_scores


def test_scores_sum_rewards_up_to_the_first_done():
    rewards = torch.tensor([[1.0, 1.0], [2.0, 1.0], [4.0, 1.0]])
    dones = torch.tensor([[0, 0], [0, 0], [1, 0], [1, 1]], dtype=torch.bool)
    torch.testing.assert_close(grpo_scores(rewards, dones), torch.tensor([3.0, 3.0]))


def test_scores_at_action_level():
    rewards = torch.ones(2, 1, 3)
    dones = torch.zeros(3, 1, 3, dtype=torch.bool)
    dones[2, 0, 0] = True  # done after the first action of chunk 1
    torch.testing.assert_close(grpo_scores(rewards, dones), torch.tensor([4.0]))
    chunk_dones = torch.tensor([[0], [0], [1]], dtype=torch.bool)
    torch.testing.assert_close(grpo_scores(rewards, chunk_dones), torch.tensor([6.0]))


@settings(max_examples=80, deadline=None)
@given(
    groups=st.integers(1, 5),
    group_size=st.integers(2, 8),
    leave_one_out=st.booleans(),
    binary=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_group_advantages_have_zero_mean_inside_each_group(groups, group_size, leave_one_out, binary, seed):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(groups * group_size, generator=generator, dtype=torch.float64)
    if binary:
        scores = (scores > 0).to(torch.float64)
    advantages = group_advantages(scores, group_size, leave_one_out=leave_one_out)
    group_means = advantages.reshape(groups, group_size).mean(-1)
    torch.testing.assert_close(group_means, torch.zeros(groups, dtype=torch.float64))


def test_group_advantages_values():
    scores = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    advantages = group_advantages(scores, 4)
    std = torch.tensor([1.0, 0.0, 0.0, 0.0]).std()
    torch.testing.assert_close(advantages[:4], (torch.tensor([1.0, 0.0, 0.0, 0.0]) - 0.25) / (std + 1e-6))
    torch.testing.assert_close(advantages[4:], torch.zeros(4))  # an all-success group carries no signal
    rloo = group_advantages(scores, 4, leave_one_out=True)
    # Member 0: 1 - mean(0, 0, 0) = 1; member 1: 0 - mean(1, 0, 0) = -1/3.
    torch.testing.assert_close(rloo[:4], torch.tensor([1.0, -1 / 3, -1 / 3, -1 / 3]))


def test_group_filter_drops_all_fail_and_all_success_groups():
    scores = torch.tensor([0.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    keep = group_filter(scores, 2, 0.1, 0.9)
    assert keep.tolist() == [False, False, True, True, False, False]


def test_grpo_advantages_broadcast_to_steps_and_masked():
    # Group of two: env 0 succeeds on step 0 (reward 1, done), env 1 never does.
    rewards = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    dones = torch.tensor([[0, 0], [1, 0], [0, 0], [0, 1]], dtype=torch.bool)
    advantages, loss_mask = grpo_advantages(rewards, dones, group_size=2)
    per_env = group_advantages(torch.tensor([1.0, 0.0]), 2)
    assert loss_mask.tolist() == [[True, True], [False, True], [False, True]]
    torch.testing.assert_close(advantages[:, 1], per_env[1].expand(3))
    torch.testing.assert_close(advantages[:, 0], torch.tensor([per_env[0].item(), 0.0, 0.0]))


def test_grpo_advantages_filtering_clears_the_mask_of_dropped_groups():
    rewards = torch.tensor([[1.0, 0.0, 1.0, 1.0]])
    dones = torch.tensor([[0, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    advantages, loss_mask = grpo_advantages(rewards, dones, group_size=2, score_range=(0.1, 0.9))
    assert loss_mask.tolist() == [[True, True, False, False]]
    assert torch.all(advantages[:, 2:] == 0)


def test_grpo_advantages_action_level_shapes():
    rewards = torch.rand(4, 6, 3)
    advantages, loss_mask = grpo_advantages(rewards, torch.zeros(5, 6, dtype=torch.bool), group_size=3)
    assert advantages.shape == loss_mask.shape == (4, 6)
    advantages, loss_mask = grpo_advantages(rewards, torch.zeros(5, 6, 3, dtype=torch.bool), group_size=3)
    assert advantages.shape == loss_mask.shape == (4, 6, 3)


@pytest.mark.parametrize("group_size", [1, 4])
def test_group_advantages_reject_a_group_size_that_does_not_divide_the_batch(group_size):
    with pytest.raises(ValueError, match="group_size must be >= 2 and divide the batch size B = 6"):
        group_advantages(torch.zeros(6), group_size)


def test_grpo_rejects_mismatched_rollouts():
    with pytest.raises(ValueError, match=r"dones must have shape \[T \+ 1, B\]"):
        grpo_scores(torch.zeros(4, 2), torch.zeros(4, 2))
    with pytest.raises(ValueError, match="dones must have shape"):
        grpo_scores(torch.zeros(4, 2), torch.zeros(5, 2, 3))
    with pytest.raises(ValueError, match="low <= high"):
        group_filter(torch.zeros(4), 2, 0.9, 0.1)
