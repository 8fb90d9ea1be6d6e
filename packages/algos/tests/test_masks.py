"""Loss masks, length-normalized weights and masked statistics."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vlarl_algos import (
    explained_variance,
    first_done_mask,
    length_normalized_weights,
    masked_mean,
    normalize_advantages,
)


def test_first_done_mask_keeps_the_done_step_and_masks_the_rest():
    # Env 0 finishes on step 1, env 1 never, env 2 had finished before the rollout.
    dones = torch.tensor(
        [[0, 0, 1], [0, 0, 0], [1, 0, 0], [0, 0, 0], [1, 0, 1]], dtype=torch.bool
    )
    expected = torch.tensor(
        [[1, 1, 0], [1, 1, 0], [0, 1, 0], [0, 1, 0]], dtype=torch.bool
    )
    assert torch.equal(first_done_mask(dones), expected)


def test_first_done_mask_action_level_masks_sub_steps_after_the_done():
    # One env, two chunks of three actions; the episode ends after sub-step 1 of chunk 0.
    dones = torch.zeros(3, 1, 3, dtype=torch.bool)
    dones[1, 0, 1] = True
    mask = first_done_mask(dones)
    assert mask.shape == (2, 1, 3)
    assert mask[:, 0].tolist() == [[True, True, False], [False, False, False]]


@settings(max_examples=40, deadline=None)
@given(num_steps=st.integers(1, 20), batch=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_first_done_mask_action_level_with_one_action_equals_chunk_level(num_steps, batch, seed):
    generator = torch.Generator().manual_seed(seed)
    dones = torch.rand(num_steps + 1, batch, generator=generator) < 0.2
    assert torch.equal(first_done_mask(dones.unsqueeze(-1)).squeeze(-1), first_done_mask(dones))


def test_length_normalized_weights_make_the_mean_a_mean_over_trajectories():
    x = torch.tensor([[1.0, 10.0], [3.0, 0.0], [5.0, 0.0]])
    mask = torch.tensor([[1, 1], [1, 0], [1, 0]], dtype=torch.bool)
    weights = length_normalized_weights(mask)
    # Trajectory means are 3 and 10; each counts once whatever its length.
    torch.testing.assert_close(masked_mean(x, weights), torch.tensor(6.5))
    torch.testing.assert_close(masked_mean(x, mask), torch.tensor(19.0 / 4.0))


def test_length_normalized_weights_give_an_empty_trajectory_no_weight():
    mask = torch.tensor([[1, 0], [1, 0]], dtype=torch.bool)
    weights = length_normalized_weights(mask)
    torch.testing.assert_close(weights, torch.tensor([[0.5, 0.0], [0.5, 0.0]]))


def test_masked_mean_ignores_nan_under_the_mask_and_broadcasts_over_trailing_axes():
    x = torch.tensor([[[1.0, 3.0]], [[float("nan"), float("inf")]]], requires_grad=True)
    mask = torch.tensor([[True], [False]])
    mean = masked_mean(x, mask)
    mean.backward()
    torch.testing.assert_close(mean, torch.tensor(2.0))
    assert torch.isfinite(x.grad).all()


def test_masked_mean_of_an_all_masked_input_is_zero():
    assert masked_mean(torch.ones(3, 2), torch.zeros(3, dtype=torch.bool)).item() == 0.0


@settings(max_examples=50, deadline=None)
@given(n=st.integers(2, 50), pad=st.integers(0, 20), seed=st.integers(0, 2**31 - 1))
def test_normalize_advantages_uses_masked_entries_only(n, pad, seed):
    generator = torch.Generator().manual_seed(seed)
    real = torch.randn(n, generator=generator, dtype=torch.float64) * 3 + 1
    padded = torch.cat([real, 1e6 * torch.randn(pad, generator=generator, dtype=torch.float64)])
    mask = torch.arange(n + pad) < n
    normalized = normalize_advantages(padded, mask)
    torch.testing.assert_close(normalized[:n], (real - real.mean()) / (real.std() + 1e-8))
    assert torch.all(normalized[n:] == 0)


def test_explained_variance():
    returns = torch.tensor([1.0, 2.0, 3.0, 4.0])
    torch.testing.assert_close(explained_variance(returns, returns), torch.tensor(1.0))
    torch.testing.assert_close(explained_variance(torch.full((4,), 2.5), returns), torch.tensor(0.0))
    mask = torch.tensor([True, True, True, False])
    noisy = torch.tensor([1.0, 2.0, 3.0, 100.0])
    torch.testing.assert_close(explained_variance(noisy, returns, mask), torch.tensor(1.0))
    assert torch.isnan(explained_variance(returns, torch.ones(4)))


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4, 5)])
def test_first_done_mask_rejects_wrong_dims(shape):
    with pytest.raises(ValueError, match=r"dones must have shape \[T \+ 1, B\] or \[T \+ 1, B, C\]"):
        first_done_mask(torch.zeros(shape))


def test_masked_mean_rejects_a_mask_that_is_not_a_prefix():
    with pytest.raises(ValueError, match="loss_mask must have the leading shape of x"):
        masked_mean(torch.zeros(4, 3), torch.ones(3, dtype=torch.bool))


def test_normalize_advantages_along_a_dim_normalizes_each_slice_on_its_own():
    generator = torch.Generator().manual_seed(0)
    minibatches = torch.randn(4, 16, generator=generator, dtype=torch.float64)
    together = normalize_advantages(minibatches, dim=1)
    for row, normalized in zip(minibatches, together):
        torch.testing.assert_close(normalized, normalize_advantages(row))
    mask = torch.rand(4, 16, generator=generator) < 0.7
    masked = normalize_advantages(minibatches, mask, dim=1)
    for row, row_mask, normalized in zip(minibatches, mask, masked):
        torch.testing.assert_close(normalized, normalize_advantages(row, row_mask))


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(2, 30), min_size=1, max_size=5),
    steps=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
)
def test_normalize_advantages_per_group_matches_each_group_normalized_alone(sizes, steps, seed):
    """Groups of very different scale each come out with mean 0 and std 1, padding as zero."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.cat([torch.full((n,), g) for g, n in enumerate(sizes)])
    order = torch.randperm(len(labels), generator=generator)
    groups = labels[order].expand(steps, -1)
    scale = (10.0 ** torch.arange(len(sizes), dtype=torch.float64))[groups]
    advantages = torch.randn(groups.shape, generator=generator, dtype=torch.float64) * scale + scale
    mask = torch.rand(groups.shape, generator=generator) < 0.8
    normalized = normalize_advantages(advantages, mask, groups=groups)
    for group in range(len(sizes)):
        member = (groups == group) & mask
        if member.sum() >= 2:
            torch.testing.assert_close(normalized[member], normalize_advantages(advantages[member]))
    assert torch.all(normalized[~mask] == 0)


def test_normalize_advantages_per_group_broadcasts_over_trailing_axes():
    advantages = torch.tensor([[[1.0, 3.0], [10.0, 30.0]]])
    normalized = normalize_advantages(advantages, groups=torch.tensor([[0, 1]]))
    torch.testing.assert_close(normalized[0, 0], normalized[0, 1])


def test_normalize_advantages_refuses_groups_with_dim_and_float_labels():
    with pytest.raises(ValueError, match="pass groups or dim, not both"):
        normalize_advantages(torch.zeros(2, 3), dim=1, groups=torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="groups must hold integer labels, got dtype torch.float32"):
        normalize_advantages(torch.zeros(2, 3), groups=torch.zeros(2, 3))
    with pytest.raises(ValueError, match="groups must have the leading shape of advantages"):
        normalize_advantages(torch.zeros(2, 3), groups=torch.zeros(3, dtype=torch.long))
