"""OpenVLA's action-token arithmetic against an independent numpy reference written from OpenVLA's rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from vlarl_policies.openvla import action_tokens

VOCAB = 32000  # Llama 2's tokenizer: the action bins are ids 31744..31999
BEGIN = VOCAB - 256
EDGES = np.linspace(-1.0, 1.0, 256)
CENTRES = (EDGES[:-1] + EDGES[1:]) / 2.0


def openvla_token_ids(actions: np.ndarray) -> np.ndarray:
    """OpenVLA's encoding: token id = vocab size - digitize(clip(a, -1, 1), linspace(-1, 1, 256))."""
    return VOCAB - np.digitize(np.clip(actions, -1.0, 1.0), EDGES)


def openvla_decode(token_ids: np.ndarray) -> np.ndarray:
    """OpenVLA's decoding: the centre of interval clip(vocab size - id - 1, 0, 254)."""
    return CENTRES[np.clip(VOCAB - token_ids - 1, 0, CENTRES.shape[0] - 1)]


actions_in_range = arrays(np.float64, st.integers(1, 64), elements=st.floats(-1.0, 1.0))


@settings(max_examples=200, deadline=None)
@given(actions=arrays(np.float64, st.integers(1, 64), elements=st.floats(-3.0, 3.0)))
def test_binning_gives_openvla_token_ids(actions):
    bins = action_tokens.actions_to_bins(torch.from_numpy(actions))
    assert bins.dtype == torch.int64 and bool(((bins >= 0) & (bins < 256)).all())
    ids = action_tokens.bins_to_token_ids(bins, BEGIN)
    np.testing.assert_array_equal(ids.numpy(), openvla_token_ids(actions))
    assert torch.equal(action_tokens.token_ids_to_bins(ids, BEGIN), bins)


@settings(max_examples=200, deadline=None)
@given(actions=actions_in_range)
def test_decoding_gives_openvla_bin_centres_within_half_a_bin(actions):
    decoded = action_tokens.bins_to_actions(action_tokens.actions_to_bins(torch.from_numpy(actions)))
    expected = openvla_decode(openvla_token_ids(actions))
    np.testing.assert_array_equal(decoded.numpy(), expected.astype(np.float32))
    assert np.abs(decoded.numpy() - actions).max() <= 1.0 / 255 + 1e-6


def test_every_token_decodes_to_a_centre_and_the_top_two_share_one():
    centres = action_tokens.bin_centres()
    np.testing.assert_array_equal(centres.numpy(), openvla_decode(np.arange(BEGIN, VOCAB)).astype(np.float32))
    assert centres[0] == centres[1] == np.float32(CENTRES[-1])
    assert centres[255] == np.float32(CENTRES[0]) and bool((centres[2:] < centres[1:-1]).all())


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), temperature=st.floats(0.2, 3.0), top_k=st.integers(0, 256))
def test_bin_log_probs_are_the_masked_full_vocabulary_softmax(seed, temperature, top_k):
    """The categorical over 256 bins equals a softmax over the whole vocabulary with every other id at -inf,
    after temperature and top-k over the bins (RLinf's masking, done on the bins alone)."""
    generator = torch.Generator().manual_seed(seed)
    vocabulary_logits = 3.0 * torch.randn(2, 5, 300, generator=generator)
    begin = 40
    log_probs = action_tokens.bin_log_probs(vocabulary_logits[..., begin: begin + 256], temperature, top_k)
    masked = torch.full_like(vocabulary_logits, float("-inf"))
    masked[..., begin: begin + 256] = vocabulary_logits[..., begin: begin + 256] / temperature
    if top_k:
        kth = torch.sort(masked, dim=-1, descending=True).values[..., top_k - 1: top_k]
        masked = masked.masked_fill(masked < kth, float("-inf"))
    reference = torch.log_softmax(masked, dim=-1)[..., begin: begin + 256]
    torch.testing.assert_close(log_probs, reference, atol=1e-5, rtol=0)
    kept = torch.isfinite(log_probs).sum(dim=-1)
    assert bool((kept == (top_k or 256)).all())


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), top_k=st.integers(0, 256))
def test_entropy_of_the_masked_distribution(seed, top_k):
    logits = 2.0 * torch.randn(4, 256, generator=torch.Generator().manual_seed(seed))
    log_probs = action_tokens.bin_log_probs(logits, 1.0, top_k)
    kept = torch.where(torch.isfinite(log_probs), logits, torch.full_like(logits, float("-inf")))
    reference = torch.distributions.Categorical(logits=kept).entropy()
    torch.testing.assert_close(action_tokens.categorical_entropy(log_probs), reference, atol=1e-5, rtol=1e-5)
    if top_k == 1:
        assert torch.equal(action_tokens.categorical_entropy(log_probs), torch.zeros(4))


def test_sampling_follows_the_distribution_and_respects_top_k():
    logits = torch.tensor([0.0, 1.0, 2.0, 3.0]).repeat(20000, 1)
    log_probs = action_tokens.bin_log_probs(logits, 1.0, top_k=3)
    drawn = action_tokens.sample_bins(log_probs, torch.Generator().manual_seed(0))
    frequencies = torch.bincount(drawn, minlength=4).float() / drawn.numel()
    assert frequencies[0] == 0
    torch.testing.assert_close(frequencies, log_probs[0].exp(), atol=0.015, rtol=0)


@settings(max_examples=100, deadline=None)
@given(actions=arrays(np.float32, (3, 4), elements=st.floats(-1.0, 1.0, width=32)))
def test_unnormalize_maps_minus_one_to_q01_and_one_to_q99_where_masked(actions):
    stats = {"q01": [-0.5, 0.0, 10.0, -2.0], "q99": [0.5, 2.0, 20.0, 2.0], "mask": [True, True, True, False]}
    robot = action_tokens.unnormalize_actions(torch.from_numpy(actions), stats)
    low, high = np.array(stats["q01"]), np.array(stats["q99"])
    expected = np.where(stats["mask"], 0.5 * (actions + 1.0) * (high - low) + low, actions)
    np.testing.assert_allclose(robot.numpy(), expected, atol=1e-5)


def test_unnormalize_without_a_mask_maps_every_dimension_and_checks_sizes():
    robot = action_tokens.unnormalize_actions(torch.tensor([[-1.0, 1.0]]), {"q01": [0.0, 0.0], "q99": [4.0, 4.0]})
    assert torch.equal(robot, torch.tensor([[0.0, 4.0]]))
    with pytest.raises(ValueError, match="must match the action dimension 3"):
        action_tokens.unnormalize_actions(torch.zeros(1, 3), {"q01": [0.0, 0.0], "q99": [1.0, 1.0]})


def test_a_policy_built_on_a_device_holds_its_bin_centres_there():
    """act indexes the bin centres with bins on the policy's device (a GPU's, under make(device="cuda"))."""
    import vlarl_policies

    policy = vlarl_policies.make("openvla", preset="tiny", action_dim=3, state_dim=2, device="meta")
    assert policy.bin_centres.device.type == "meta"
