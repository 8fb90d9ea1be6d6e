"""PPO actor, value and entropy losses: clip bounds, padding, levels, gradients."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from vlarl_algos import aggregate_logprobs, entropy_loss, ppo_actor_loss, value_loss

seeds = st.integers(0, 2**31 - 1)


def _rollout(generator, lead, chunk, action_dim, spread=0.5, dtype=torch.float32):
    logprobs = torch.randn(*lead, chunk, action_dim, generator=generator, dtype=dtype)
    old_logprobs = logprobs + spread * torch.randn(*lead, chunk, action_dim, generator=generator, dtype=dtype)
    advantages = torch.randn(*lead, generator=generator, dtype=dtype)
    return logprobs, old_logprobs, advantages


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 6),
    clip_low=st.floats(0.0, 0.9),
    clip_high=st.floats(0.0, 3.0),
    dual_clip=st.one_of(st.none(), st.floats(1.01, 10.0)),
    seed=seeds,
)
def test_clip_bounds_hold(n, clip_low, clip_high, dual_clip, seed):
    generator = torch.Generator().manual_seed(seed)
    logprobs, old_logprobs, advantages = _rollout(generator, (n,), 1, 2, spread=1.0, dtype=torch.float64)
    for i in range(n):
        new = logprobs[i : i + 1].clone().requires_grad_(True)
        loss, metrics = ppo_actor_loss(
            new, old_logprobs[i : i + 1], advantages[i : i + 1],
            clip_low=clip_low, clip_high=clip_high, dual_clip=dual_clip,
        )
        loss.backward()
        a = advantages[i].item()
        ratio = metrics["ratio_mean"].item()
        assert metrics["clipped_ratio"].item() == pytest.approx(min(max(ratio, 1 - clip_low), 1 + clip_high), rel=1e-9)
        objective = -loss.item()
        # The surrogate objective never exceeds the clipped one ...
        bound = a * (1 + clip_high) if a > 0 else a * (1 - clip_low)
        assert objective <= bound + 1e-9
        # ... and past the clip, in the direction the advantage pushes, the gradient is zero.
        if (a > 0 and ratio > 1 + clip_high) or (a < 0 and ratio < 1 - clip_low):
            assert torch.all(new.grad == 0)
            assert metrics["clip_fraction"].item() == 1.0
        if dual_clip is not None:
            assert loss.item() <= dual_clip * abs(a) + 1e-9


@settings(max_examples=60, deadline=None)
@given(
    num_steps=st.integers(1, 6),
    batch=st.integers(1, 4),
    chunk=st.integers(1, 3),
    pad=st.integers(1, 5),
    level=st.sampled_from(["token", "action", "chunk"]),
    dual_clip=st.one_of(st.none(), st.just(3.0)),
    weights=st.booleans(),
    seed=seeds,
)
def test_padding_under_the_mask_never_changes_the_actor_loss(
    num_steps, batch, chunk, pad, level, dual_clip, weights, seed
):
    generator = torch.Generator().manual_seed(seed)
    logprobs, old_logprobs, advantages = _rollout(generator, (num_steps, batch), chunk, 2, dtype=torch.float64)
    mask = torch.rand(num_steps, batch, generator=generator) < 0.7
    if weights:
        mask = mask * torch.rand(num_steps, batch, generator=generator, dtype=torch.float64)
    garbage = _rollout(generator, (pad, batch), chunk, 2, dtype=torch.float64)
    garbage = [1e4 * g for g in garbage]  # exp(1e4) overflows: the mask must keep it out

    def loss_and_grad(logprobs, old_logprobs, advantages, mask):
        logprobs = logprobs.clone().requires_grad_(True)
        loss, metrics = ppo_actor_loss(
            logprobs, old_logprobs, advantages, loss_mask=mask, logprob_level=level,
            clip_low=0.2, clip_high=0.28, dual_clip=dual_clip,
        )
        loss.backward()
        return loss, metrics, logprobs.grad

    loss, metrics, grad = loss_and_grad(logprobs, old_logprobs, advantages, mask)
    padded = [torch.cat([x, g]) for x, g in zip((logprobs, old_logprobs, advantages), garbage)]
    padded_mask = torch.cat([mask, torch.zeros(pad, batch, dtype=mask.dtype)])
    padded_loss, padded_metrics, padded_grad = loss_and_grad(*padded, padded_mask)
    torch.testing.assert_close(padded_loss, loss)
    torch.testing.assert_close(padded_grad[:num_steps], grad)
    assert torch.all(padded_grad[num_steps:] == 0)
    for name in metrics:
        torch.testing.assert_close(padded_metrics[name], metrics[name], equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 20), pad=st.integers(1, 5), clip=st.one_of(st.none(), st.floats(0.01, 1.0)),
       loss_type=st.sampled_from(["squared", "huber"]), seed=seeds)
def test_padding_under_the_mask_never_changes_the_value_and_entropy_losses(n, pad, clip, loss_type, seed):
    generator = torch.Generator().manual_seed(seed)
    values, old_values, returns, entropy = (torch.randn(n + pad, generator=generator) for _ in range(4))
    values[n:], returns[n:] = float("nan"), float("inf")
    mask = torch.arange(n + pad) < n
    v_loss, v_metrics = value_loss(values, old_values, returns, loss_mask=mask, clip_range=clip, loss_type=loss_type)
    v_expected, v_expected_metrics = value_loss(
        values[:n], old_values[:n], returns[:n], clip_range=clip, loss_type=loss_type
    )
    torch.testing.assert_close(v_loss, v_expected)
    torch.testing.assert_close(v_metrics, v_expected_metrics)
    entropy = entropy.reshape(n + pad, 1, 1)
    entropy[n:] = float("nan")
    e_loss, _ = entropy_loss(entropy, loss_mask=mask)
    torch.testing.assert_close(e_loss, -entropy[:n].mean())


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 8), action_dim=st.integers(1, 4), dual_clip=st.one_of(st.none(), st.just(2.0)), seed=seeds)
def test_chunk_level_equals_action_level_when_one_action_per_chunk(n, action_dim, dual_clip, seed):
    generator = torch.Generator().manual_seed(seed)
    logprobs, old_logprobs, advantages = _rollout(generator, (n,), 1, action_dim)
    mask = torch.rand(n, generator=generator) < 0.8
    kwargs = {"loss_mask": mask, "clip_low": 0.2, "clip_high": 0.3, "dual_clip": dual_clip}
    chunk_loss, chunk_metrics = ppo_actor_loss(logprobs, old_logprobs, advantages, logprob_level="chunk", **kwargs)
    action_loss, action_metrics = ppo_actor_loss(logprobs, old_logprobs, advantages, logprob_level="action", **kwargs)
    torch.testing.assert_close(chunk_loss, action_loss)
    torch.testing.assert_close(chunk_metrics, action_metrics)
    entropy = torch.rand(n, 1, action_dim, generator=generator)
    torch.testing.assert_close(
        entropy_loss(entropy, loss_mask=mask, entropy_level="chunk"),
        entropy_loss(entropy, loss_mask=mask, entropy_level="action"),
    )


def test_actor_loss_hand_worked_example():
    # Two chunks, ratios 1.5 and 0.5, advantages +1 and -1, clip 0.2 both ways.
    old_logprobs = torch.zeros(2, 1, 1)
    logprobs = torch.log(torch.tensor([1.5, 0.5])).reshape(2, 1, 1)
    advantages = torch.tensor([1.0, -1.0])
    loss, metrics = ppo_actor_loss(logprobs, old_logprobs, advantages)
    # max(-1.5, -1.2) = -1.2 and max(0.5, 0.8) = 0.8: both clipped, mean -0.2.
    torch.testing.assert_close(loss, torch.tensor(-0.2))
    torch.testing.assert_close(metrics["clip_fraction"], torch.tensor(1.0))
    torch.testing.assert_close(metrics["ratio_min"], torch.tensor(0.5))
    torch.testing.assert_close(metrics["ratio_max"], torch.tensor(1.5))
    expected_kl = ((1.5 - 1 - torch.log(torch.tensor(1.5))) + (0.5 - 1 - torch.log(torch.tensor(0.5)))) / 2
    torch.testing.assert_close(metrics["approx_kl"], expected_kl)


def test_dual_clip_bounds_a_negative_advantage_on_an_exploded_ratio():
    logprobs = torch.log(torch.tensor([10.0])).reshape(1, 1, 1)
    loss, metrics = ppo_actor_loss(logprobs, torch.zeros(1, 1, 1), torch.tensor([-1.0]), dual_clip=3.0)
    torch.testing.assert_close(loss, torch.tensor(3.0))
    torch.testing.assert_close(metrics["dual_clip_fraction"], torch.tensor(1.0))


def test_token_level_takes_one_ratio_per_dimension():
    old_logprobs = torch.zeros(1, 1, 2)
    logprobs = torch.log(torch.tensor([[[1.1, 0.9]]]))
    # Chunk level: the joint ratio is 0.99, inside the clip; token level: two ratios.
    chunk_loss, _ = ppo_actor_loss(logprobs, old_logprobs, torch.tensor([1.0]), logprob_level="chunk")
    token_loss, _ = ppo_actor_loss(logprobs, old_logprobs, torch.tensor([1.0]), logprob_level="token")
    torch.testing.assert_close(chunk_loss, torch.tensor(-0.99))
    torch.testing.assert_close(token_loss, torch.tensor(-1.0))


def test_action_level_advantages_apply_per_action():
    logprobs = torch.zeros(1, 2, 3)
    loss, _ = ppo_actor_loss(logprobs, logprobs, torch.tensor([[1.0, 3.0]]), logprob_level="token")
    torch.testing.assert_close(loss, torch.tensor(-2.0))
    with pytest.raises(ValueError, match="advantages must have the leading shape of the chunk-level ratio"):
        ppo_actor_loss(logprobs, logprobs, torch.tensor([[1.0, 3.0]]), logprob_level="chunk")


def test_value_loss_clipping_and_huber():
    values = torch.tensor([2.0, 0.1])
    old_values = torch.tensor([0.0, 0.0])
    returns = torch.tensor([3.0, 0.0])
    loss, metrics = value_loss(values, old_values, returns, clip_range=0.5)
    # Entry 0: unclipped error 1, clipped prediction 0.5 has error 2.5 -> 6.25. Entry 1: 0.01.
    torch.testing.assert_close(loss, torch.tensor((6.25 + 0.01) / 2))
    torch.testing.assert_close(metrics["value_clip_ratio"], torch.tensor(0.5))
    huber, _ = value_loss(values, old_values, returns, loss_type="huber", huber_delta=0.5)
    torch.testing.assert_close(huber, F.huber_loss(values, returns, delta=0.5))
    squared, metrics = value_loss(values, old_values, returns)
    torch.testing.assert_close(squared, F.mse_loss(values, returns))
    assert metrics["value_clip_ratio"].item() == 0.0


def test_aggregate_logprobs_levels():
    logprobs = torch.arange(24.0).reshape(2, 3, 4)
    assert aggregate_logprobs(logprobs, "token").shape == (2, 3, 4)
    torch.testing.assert_close(aggregate_logprobs(logprobs, "action"), logprobs.sum(-1))
    torch.testing.assert_close(aggregate_logprobs(logprobs, "chunk"), logprobs.sum((1, 2)))


@pytest.mark.parametrize("dual_clip", [None, 2.5])
@pytest.mark.parametrize("level", ["token", "action", "chunk"])
def test_actor_loss_gradient_matches_finite_differences(level, dual_clip):
    generator = torch.Generator().manual_seed(0)
    logprobs, old_logprobs, advantages = _rollout(generator, (3, 2), 2, 2, spread=0.3, dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.5, 1.0]], dtype=torch.float64)
    logprobs.requires_grad_(True)

    def loss(logprobs):
        return ppo_actor_loss(
            logprobs, old_logprobs, advantages, loss_mask=mask, clip_low=0.2, clip_high=0.28,
            dual_clip=dual_clip, logprob_level=level,
        )[0]

    assert torch.autograd.gradcheck(loss, (logprobs,))


@pytest.mark.parametrize("loss_type", ["squared", "huber"])
@pytest.mark.parametrize("clip_range", [None, 0.2])
def test_value_and_entropy_gradients_match_finite_differences(loss_type, clip_range):
    generator = torch.Generator().manual_seed(1)
    values = torch.randn(6, 2, generator=generator, dtype=torch.float64, requires_grad=True)
    old_values = values.detach() + 0.3 * torch.randn(6, 2, generator=generator, dtype=torch.float64)
    returns = 3 * torch.randn(6, 2, generator=generator, dtype=torch.float64)
    mask = torch.tensor([1, 1, 1, 0, 1, 0], dtype=torch.bool)

    def loss(values):
        return value_loss(values, old_values, returns, loss_mask=mask, clip_range=clip_range,
                          loss_type=loss_type, huber_delta=1.0)[0]

    assert torch.autograd.gradcheck(loss, (values,))
    entropy = torch.rand(6, 2, 3, generator=generator, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda e: entropy_loss(e, loss_mask=mask, entropy_level="action")[0], (entropy,))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"logprob_level": "sequence"}, "level must be one of"),
        ({"clip_low": 1.0}, "clip_low must be in"),
        ({"dual_clip": 1.0}, "dual_clip must be None or > 1"),
        ({"loss_mask": torch.ones(3, dtype=torch.bool)}, "loss_mask must have the leading shape"),
    ],
)
def test_actor_loss_rejects_bad_arguments(kwargs, match):
    logprobs = torch.zeros(4, 2, 3)
    with pytest.raises(ValueError, match=match):
        ppo_actor_loss(logprobs, logprobs, torch.zeros(4), **kwargs)


def test_losses_reject_mismatched_shapes():
    with pytest.raises(ValueError, match="logprobs and old_logprobs must have the same shape"):
        ppo_actor_loss(torch.zeros(4, 2, 3), torch.zeros(4, 2, 2), torch.zeros(4))
    with pytest.raises(ValueError, match=r"logprobs must have shape \[\*L, C, A\]"):
        ppo_actor_loss(torch.zeros(4), torch.zeros(4), torch.zeros(4))
    with pytest.raises(ValueError, match="values, old_values and returns must have the same shape"):
        value_loss(torch.zeros(4), torch.zeros(4), torch.zeros(5))
    with pytest.raises(ValueError, match="loss_type must be one of"):
        value_loss(torch.zeros(4), torch.zeros(4), torch.zeros(4), loss_type="l1")
