"""Which groups carry a learning signal: rewards that differ somewhere among a group's kept steps."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vlarl_algos import SIGNAL_TOLERANCE, groups_with_signal


def reference_signal(rewards: torch.Tensor, mask: torch.Tensor, groups: torch.Tensor) -> list[bool]:
    """Per env, by loops: whether the kept rewards of its group span more than the tolerance."""
    answer = []
    for env in range(rewards.shape[1]):
        members = [b for b in range(rewards.shape[1]) if groups[b] == groups[env]]
        kept = [float(rewards[t, b]) for b in members for t in range(rewards.shape[0]) if mask[t, b]]
        answer.append(bool(kept) and max(kept) - min(kept) > SIGNAL_TOLERANCE)
    return answer


@settings(max_examples=100, deadline=None)
@given(
    steps=st.integers(1, 6),
    envs=st.integers(1, 8),
    labels=st.integers(1, 4),
    sparse=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_a_group_has_signal_exactly_when_its_kept_rewards_differ(steps, envs, labels, sparse, seed):
    generator = torch.Generator().manual_seed(seed)
    rewards = torch.randn(steps, envs, generator=generator)
    if sparse:  # mostly zero, with a rare success: many groups have none
        rewards = (rewards > 1.5).float()
    mask = torch.rand(steps, envs, generator=generator) > 0.3
    groups = torch.randint(0, labels, (envs,), generator=generator)
    assert groups_with_signal(rewards, mask, groups).tolist() == reference_signal(rewards, mask, groups)


def test_a_sparse_reward_without_success_is_no_signal_and_one_success_is():
    rewards = torch.zeros(4, 4)
    groups = torch.tensor([0, 0, 1, 1])
    mask = torch.ones(4, 4, dtype=torch.bool)
    assert groups_with_signal(rewards, mask, groups).tolist() == [False] * 4
    rewards[2, 3] = 1.0
    assert groups_with_signal(rewards, mask, groups).tolist() == [False, False, True, True]


def test_a_reward_that_varies_along_alike_episodes_is_signal():
    """A dense reward: every episode of the group earns the same sequence, yet the steps differ."""
    rewards = torch.tensor([[0.1, 0.1], [0.5, 0.5], [0.2, 0.2]])
    assert groups_with_signal(rewards, torch.ones(3, 2, dtype=torch.bool), torch.tensor([0, 0])).tolist() == [True] * 2


def test_rewards_after_the_first_done_and_below_the_tolerance_are_no_signal():
    rewards = torch.tensor([[0.0, 0.0], [0.0, 0.0], [3.0, 1e-7]])
    mask = torch.tensor([[True, True], [True, True], [False, True]])
    assert groups_with_signal(rewards, mask, torch.tensor([0, 0])).tolist() == [False, False]


def test_action_level_rewards_and_masks_are_read_whole():
    rewards = torch.zeros(2, 2, 3)
    rewards[1, 1, 2] = 1.0
    mask = torch.ones(2, 2, 3, dtype=torch.bool)
    assert groups_with_signal(rewards, mask, torch.tensor([0, 1])).tolist() == [False, True]
    chunk_mask = torch.tensor([[True, True], [True, False]])
    assert groups_with_signal(rewards, chunk_mask, torch.tensor([0, 1])).tolist() == [False, False]


def test_groups_of_the_wrong_size_are_refused():
    with pytest.raises(ValueError, match=r"groups must have shape \[B\]"):
        groups_with_signal(torch.zeros(3, 4), torch.ones(3, 4, dtype=torch.bool), torch.zeros(3, dtype=torch.long))
