"""pi0's noise annealing: flow_sde's level follows the training step, and each sample keeps its own."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vlarl_policies.pi0 import flow
from vlarl_policies.pi0.configuration_pi0 import Pi0Config

ANNEAL = {"noise_method": "flow_sde", "noise_anneal": True, "noise_params": (1.0, 0.2, 10)}


@settings(max_examples=200, deadline=None)
@given(start=st.floats(0.0, 2.0), end=st.floats(0.0, 2.0), steps=st.integers(1, 500), step=st.integers(0, 2000))
def test_level_falls_linearly_then_holds(start, end, steps, step):
    level = flow.annealed_noise_level(start, end, steps, step)
    if step >= steps:
        assert level == pytest.approx(end, abs=1e-9)
    else:
        assert level == pytest.approx(start + (end - start) * step / steps, abs=1e-9)
        assert abs(flow.annealed_noise_level(start, end, steps, step + 1) - level) <= abs(end - start) / steps + 1e-9
    assert min(start, end) - 1e-9 <= level <= max(start, end) + 1e-9


def test_the_policy_samples_at_the_schedules_level(make_tiny):
    policy = make_tiny("pi0", **ANNEAL)
    assert policy.sampling_noise_level == 1.0
    policy.set_global_step(5)
    assert policy.sampling_noise_level == pytest.approx(0.6)
    policy.set_global_step(50)
    assert policy.sampling_noise_level == pytest.approx(0.2)


def test_without_anneal_the_level_ignores_the_step(make_tiny):
    policy = make_tiny("pi0", noise_method="flow_sde", noise_level=0.6)
    policy.set_global_step(1000)
    assert policy.sampling_noise_level == 0.6


def test_samples_record_their_level_and_evaluate_uses_it(make_tiny, make_obs):
    policy = make_tiny("pi0", **ANNEAL)
    obs = make_obs(6)
    policy.set_global_step(0)
    wide = policy.act(obs, generator=torch.Generator().manual_seed(4))
    assert torch.equal(wide.forward_inputs["noise_levels"], torch.full((6,), 1.0))
    # The actor updates after the rollout; a later step's level must not change the stored samples' density.
    policy.set_global_step(10)
    evaluated = policy.evaluate_actions(wide.forward_inputs)
    torch.testing.assert_close(evaluated.logprobs, wide.logprobs, atol=1e-5, rtol=0)
    narrow = policy.act(obs, generator=torch.Generator().manual_seed(4))
    assert torch.allclose(narrow.forward_inputs["noise_levels"], torch.full((6,), 0.2))
    # Same draws, a fifth of the level: the sampled step's density is sharper.
    assert float(narrow.logprobs.mean()) > float(wide.logprobs.mean())


def test_forward_inputs_without_levels_are_rejected(make_tiny, make_obs):
    policy = make_tiny("pi0", **ANNEAL)
    inputs = dict(policy.act(make_obs(2)).forward_inputs)
    inputs["noise_levels"] = inputs["noise_levels"][:1]
    with pytest.raises(ValueError, match=r"noise_levels.*\[B=2\]"):
        policy.evaluate_actions(inputs)
    del inputs["noise_levels"]
    with pytest.raises(ValueError, match="lacks"):
        policy.evaluate_actions(inputs)


@pytest.mark.parametrize(("fields", "message"), [
    ({"noise_method": "flow_noise", "noise_anneal": True}, "schedules flow_sde"),
    ({"noise_params": (1.0, 0.3)}, r"\(start, end, steps\)"),
    ({"noise_params": (1.0, -0.1, 10)}, "end >= 0"),
    ({"noise_params": (1.0, 0.3, 0)}, "steps > 0"),
])
def test_bad_anneal_settings_name_what_was_expected(fields, message):
    with pytest.raises(ValueError, match=message):
        Pi0Config(**fields)


def test_a_negative_step_is_rejected(make_tiny):
    with pytest.raises(ValueError, match=">= 0"):
        make_tiny("pi0", **ANNEAL).set_global_step(-1)


def test_the_schedule_survives_save_and_load(make_tiny, tmp_path):
    from vlarl_policies import from_pretrained

    make_tiny("pi0", **ANNEAL).save_pretrained(tmp_path / "policy")
    loaded = from_pretrained(tmp_path / "policy")
    assert loaded.config.noise_anneal and loaded.config.noise_params == (1.0, 0.2, 10)
    loaded.set_global_step(5)
    assert loaded.sampling_noise_level == pytest.approx(0.6)
