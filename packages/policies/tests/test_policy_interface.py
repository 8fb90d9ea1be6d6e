"""What a trainer reads of a policy is declared by the base classes, and every registered policy provides
it: a new policy that forgets a piece fails when its module is imported, not in a trainer's worker."""

import dataclasses

import numpy as np
import pytest
import torch

import vlarl_policies
from vlarl_policies.base import PolicyConfig, VLAPolicy
from vlarl_policies.registry import available_policies


def test_a_config_without_the_interface_fields_fails_at_definition():
    missing = r"\['state_dim', 'camera_keys', 'action_chunk', 'action_horizon'\]"
    with pytest.raises(TypeError, match=f"must define {missing}"):
        @dataclasses.dataclass
        class HalfConfig(PolicyConfig):
            type = "half"
            action_dim: int = 4


@pytest.mark.parametrize("name", available_policies())
def test_every_policy_provides_what_the_trainer_reads(name):
    policy = vlarl_policies.make(name, preset="tiny", action_dim=4, state_dim=3, tokenizer_corpus=["reach"])
    config = policy.config
    assert (config.action_dim, config.state_dim) == (4, 3)
    assert config.camera_keys and config.action_horizon >= config.action_chunk >= 1
    assert isinstance(config.state_in_prompt, bool)
    statistics = ({"q01": np.full(3, -2.0), "q99": np.full(3, 2.0)} if config.state_in_prompt
                  else {"mean": np.ones(3), "std": np.full(3, 2.0)})
    policy.set_state_stats(**statistics)
    assert type(policy).set_state_stats is not VLAPolicy.set_state_stats
    assert all(torch.isfinite(parameter).all() for parameter in policy.parameters())


@pytest.mark.parametrize("name", available_policies())
def test_example_forward_inputs_have_the_keys_shapes_and_dtypes_act_stores(name, make_obs):
    """A dry run's memory estimate feeds ``evaluate_actions`` these instead of a sampled chunk's."""
    policy = vlarl_policies.make(name, preset="tiny", action_dim=3, state_dim=5, tokenizer_corpus=["pick up"])
    obs = make_obs(4)
    stored = policy.act(obs).forward_inputs
    global_draws = torch.get_rng_state()
    example = policy.example_forward_inputs(obs)
    assert torch.equal(torch.get_rng_state(), global_draws)  # a dry run leaves the caller's draws alone
    assert {key: (tuple(t.shape), t.dtype) for key, t in example.items()} == {
        key: (tuple(t.shape), t.dtype) for key, t in stored.items()}
    recomputed = policy.evaluate_actions(example)
    assert recomputed.logprobs.shape == policy.evaluate_actions(stored).logprobs.shape
    assert torch.isfinite(recomputed.logprobs).all()
