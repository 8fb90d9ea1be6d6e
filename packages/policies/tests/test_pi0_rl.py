"""pi0 / pi0.5 as RL policies: shapes, act-evaluate_actions agreement, the SDE density, gradients."""

from __future__ import annotations

import math

import pytest
import torch

from vlarl_policies.pi0 import flow

ACTION_DIM, CHUNK, HORIZON, STEPS, MAX_DIM = 3, 4, 8, 4, 8

CONFIGS = [
    pytest.param("pi0", {"noise_method": "flow_sde"}, id="pi0-sde"),
    pytest.param("pi0", {"noise_method": "flow_sde", "joint_logprob": True}, id="pi0-sde-joint"),
    pytest.param("pi0", {"noise_method": "flow_sde", "joint_logprob": True, "start_noise_scale": 0.5},
                 id="pi0-sde-joint-narrow-start"),
    pytest.param("pi0", {"noise_method": "flow_sde", "start_noise_scale": 0.0}, id="pi0-sde-zero-start"),
    pytest.param("pi0", {"noise_method": "flow_noise"}, id="pi0-noise"),
    pytest.param("pi0", {"noise_method": "flow_noise", "joint_logprob": True, "value_after_vlm": True},
                 id="pi0-noise-joint-vlmcritic"),
    pytest.param("pi05", {"noise_method": "flow_sde"}, id="pi05-sde"),
    pytest.param("pi05", {"noise_method": "flow_noise", "joint_logprob": True, "value_after_vlm": False},
                 id="pi05-noise-joint-expertcritic"),
]


@pytest.mark.parametrize(("name", "config"), CONFIGS)
def test_act_then_evaluate_gives_identical_logprobs(make_tiny, make_obs, name, config):
    policy = make_tiny(name, **config)
    out = policy.act(make_obs(6), generator=torch.Generator().manual_seed(1))
    assert out.actions.shape == out.logprobs.shape == (6, CHUNK, ACTION_DIM)
    assert out.actions.dtype == out.logprobs.dtype == torch.float32
    assert out.values.shape == (6,)
    assert out.forward_inputs["chains"].shape == (6, STEPS + 1, HORIZON, MAX_DIM)
    assert all(tensor.device.type == "cpu" for tensor in out.forward_inputs.values())
    evaluated = policy.evaluate_actions(out.forward_inputs)
    torch.testing.assert_close(evaluated.logprobs, out.logprobs, atol=1e-5, rtol=0)
    torch.testing.assert_close(evaluated.values, out.values, atol=1e-5, rtol=0)
    assert bool(torch.isfinite(out.logprobs).all()) and bool((out.logprobs != 0).any())
    if config["noise_method"] == "flow_noise":
        assert evaluated.entropy.shape == (6, CHUNK, ACTION_DIM)
    else:
        assert evaluated.entropy is None


def test_actions_are_the_end_of_the_stored_chain(make_tiny, make_obs):
    policy = make_tiny("pi0")
    out = policy.act(make_obs(3))
    torch.testing.assert_close(out.actions, out.forward_inputs["chains"][:, -1, :CHUNK, :ACTION_DIM])


def test_flow_sde_logprob_equals_an_independent_gaussian_density(make_tiny, make_obs):
    policy = make_tiny("pi0", noise_method="flow_sde", noise_level=0.6)
    out = policy.act(make_obs(5), generator=torch.Generator().manual_seed(3))
    inputs = out.forward_inputs
    step = inputs["denoise_inds"][:, 0]
    rows = torch.arange(5)
    x, x_next = inputs["chains"][rows, step], inputs["chains"][rows, step + 1]
    t = 1.0 - step.float() / STEPS
    with torch.no_grad():
        cache = policy.encode_prefix(inputs, keep_hidden=False)
        v, _ = policy.velocity(cache, inputs["states"], x, t)
    delta = 1.0 / STEPS
    t_sigma = torch.where(step == 0, torch.full_like(t, 1.0 - delta), t)
    sigma = (0.6 * torch.sqrt(t / (1.0 - t_sigma)))[:, None, None]
    t = t[:, None, None]
    score = -(x + (1.0 - t) * v) / t
    mean = x - delta * v + 0.5 * delta * sigma**2 * score
    density = torch.distributions.Normal(mean, math.sqrt(delta) * sigma).log_prob(x_next)
    torch.testing.assert_close(out.logprobs, density[:, :CHUNK, :ACTION_DIM], atol=1e-4, rtol=1e-4)


def test_flow_sde_without_noise_is_the_ode_sampler(make_tiny, make_obs):
    policy = make_tiny("pi0", noise_method="flow_sde", noise_level=0.0)
    out = policy.act(make_obs(3))
    inputs = out.forward_inputs
    chains = inputs["chains"]
    with torch.no_grad():
        cache = policy.encode_prefix(inputs, keep_hidden=False)
        for step in range(STEPS):
            t = torch.full((3,), 1.0 - step / STEPS)
            v, _ = policy.velocity(cache, inputs["states"], chains[:, step], t)
            torch.testing.assert_close(chains[:, step + 1], chains[:, step] - v / STEPS, atol=1e-5, rtol=1e-5)
    assert torch.equal(out.logprobs, torch.zeros_like(out.logprobs))


def test_deterministic_mode_integrates_the_ode_from_drawn_start_noise(make_tiny, make_obs):
    """RLinf's evaluation: no stochastic step and zero log-probs, from start noise drawn from the generator
    (the same seed replays the same chunk, another seed gives another). ``zero_start`` starts from zeros,
    the same chunk whatever the generator; sampling draws the step noise as well."""
    policy = make_tiny("pi05", noise_method="flow_noise")
    obs = make_obs(4)
    seeded = lambda seed, **mode: policy.act(obs, generator=torch.Generator().manual_seed(seed), **mode)  # noqa: E731
    first, again, other = (seeded(seed, deterministic=True) for seed in (0, 0, 1))
    assert torch.equal(first.actions, again.actions) and not torch.allclose(first.actions, other.actions)
    assert torch.equal(first.logprobs, torch.zeros_like(first.logprobs))
    assert first.forward_inputs["denoise_inds"].shape == (4, 0)
    assert first.forward_inputs["chains"][:, 0].abs().min() > 0
    zero = [seeded(seed, deterministic=True, zero_start=True) for seed in (0, 1)]
    assert torch.equal(zero[0].actions, zero[1].actions) and not torch.allclose(zero[0].actions, first.actions)
    assert torch.equal(zero[0].forward_inputs["chains"][:, 0], torch.zeros_like(zero[0].forward_inputs["chains"][:, 0]))
    stochastic = seeded(0)
    assert not torch.allclose(stochastic.actions, first.actions)
    evaluated = policy.evaluate_actions(first.forward_inputs)
    torch.testing.assert_close(evaluated.values, first.values, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="zero_start=True needs deterministic=True"):
        policy.act(obs, zero_start=True)


@pytest.mark.parametrize("deterministic", [True, False], ids=["deterministic", "sample"])
def test_a_generator_per_row_makes_a_rows_chunk_independent_of_its_batch(make_tiny, make_obs, deterministic):
    """With one generator per env, an env's chunk depends on its own seed alone: acting for four envs at once
    or for the last two alone gives those two the same chunks (to the rounding of other matrix shapes)."""
    policy = make_tiny("pi0", noise_method="flow_sde")
    obs = make_obs(4)
    generators = lambda seeds: [torch.Generator().manual_seed(seed) for seed in seeds]  # noqa: E731
    together = policy.act(obs, deterministic, generators([10, 11, 12, 13]))
    alone = policy.act({key: value[2:] for key, value in obs.items()}, deterministic, generators([12, 13]))
    torch.testing.assert_close(alone.actions, together.actions[2:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alone.forward_inputs["chains"], together.forward_inputs["chains"][2:],
                               atol=1e-5, rtol=1e-5)
    assert torch.equal(alone.forward_inputs["denoise_inds"], together.forward_inputs["denoise_inds"][2:])
    with pytest.raises(ValueError, match="one generator per row of the batch: expected 4, got 2"):
        policy.act(obs, deterministic, generators([1, 2]))


def test_start_noise_scale_scales_the_chains_starting_point(make_tiny, make_obs):
    obs = make_obs(5)
    wide = make_tiny("pi0", start_noise_scale=1.0).act(obs, generator=torch.Generator().manual_seed(4))
    narrow = make_tiny("pi0", start_noise_scale=0.25).act(obs, generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(narrow.forward_inputs["chains"][:, 0], 0.25 * wide.forward_inputs["chains"][:, 0])


def test_a_zero_start_without_step_noise_samples_the_deterministic_chunk(make_tiny, make_obs):
    policy = make_tiny("pi05", noise_method="flow_sde", noise_level=0.0, start_noise_scale=0.0)
    obs = make_obs(4)
    torch.testing.assert_close(policy.act(obs).actions, policy.act(obs, deterministic=True).actions)


def test_a_joint_logprob_needs_a_start_with_a_density(make_tiny):
    with pytest.raises(ValueError, match="start_noise_scale > 0 or joint_logprob false"):
        make_tiny("pi0", joint_logprob=True, start_noise_scale=0.0)
    with pytest.raises(ValueError, match="start_noise_scale must be >= 0, got -0.1"):
        make_tiny("pi0", start_noise_scale=-0.1)


def test_flow_sde_picks_one_step_per_sample(make_tiny, make_obs):
    policy = make_tiny("pi0")
    steps = policy.act(make_obs(64)).forward_inputs["denoise_inds"]
    assert steps.shape == (64, 1)
    assert set(steps.flatten().tolist()) <= set(range(STEPS)) and len(set(steps.flatten().tolist())) > 1


def _grad_norm(module: torch.nn.Module) -> float:
    grads = [p.grad.norm() for p in module.parameters() if p.grad is not None]
    return float(torch.stack(grads).sum()) if grads else 0.0


@pytest.mark.parametrize("name", ["pi0", "pi05"])
def test_gradients_reach_expert_and_value_head_but_not_a_frozen_vlm(make_tiny, make_obs, name):
    policy = make_tiny(name, noise_method="flow_noise", train_expert_only=True)
    out = policy.act(make_obs(4))
    policy.train()
    evaluated = policy.evaluate_actions(out.forward_inputs)
    (evaluated.logprobs.sum() + evaluated.values.sum() + evaluated.entropy.sum()).backward()
    assert _grad_norm(policy.expert) > 0
    assert _grad_norm(policy.action_in_proj) > 0
    assert _grad_norm(policy.noise_head) > 0
    assert _grad_norm(policy.value_head) > 0
    assert all(p.grad is None and not p.requires_grad for p in policy.vlm.parameters())


def test_an_unfrozen_vlm_gets_gradients(make_tiny, make_obs):
    policy = make_tiny("pi0")
    out = policy.act(make_obs(2))
    policy.evaluate_actions(out.forward_inputs).logprobs.sum().backward()
    assert _grad_norm(policy.vlm.language_model) > 0
    assert _grad_norm(policy.vlm.vision_tower) > 0


def test_detached_critic_input_keeps_value_loss_out_of_the_backbone(make_tiny, make_obs):
    policy = make_tiny("pi0", detach_critic_input=True)
    out = policy.act(make_obs(2))
    policy.evaluate_actions(out.forward_inputs).values.sum().backward()
    assert _grad_norm(policy.value_head) > 0
    assert _grad_norm(policy.expert) == 0.0


def test_lora_trains_only_adapters_in_the_vlm(make_tiny, make_obs):
    policy = make_tiny("pi0", lora_rank=4)
    names = [name for name, p in policy.vlm.named_parameters() if p.requires_grad]
    assert names and all("lora_" in name for name in names)
    out = policy.act(make_obs(2))
    torch.testing.assert_close(policy.evaluate_actions(out.forward_inputs).logprobs, out.logprobs, atol=1e-5, rtol=0)
    policy.evaluate_actions(out.forward_inputs).logprobs.sum().backward()
    key_value_adapters = [p for name, p in policy.vlm.named_parameters()
                          if "lora_B" in name and ("k_proj" in name or "v_proj" in name)]
    assert len(key_value_adapters) == 2 * 3 and all(p.grad is not None for p in key_value_adapters)
    assert all(p.grad is None for name, p in policy.vlm.named_parameters() if "lora_" not in name)


def test_parameter_groups_separate_the_value_head(make_tiny):
    policy = make_tiny("pi0", train_expert_only=True)
    groups = policy.parameter_groups()
    assert {id(p) for p in groups["value_head"]} == {id(p) for p in policy.value_head.parameters()}
    assert not {id(p) for p in groups["policy"]} & {id(p) for p in policy.vlm.parameters()}


def test_evaluate_rejects_foreign_forward_inputs(make_tiny, make_obs):
    policy = make_tiny("pi0")
    inputs = dict(policy.act(make_obs(2)).forward_inputs)
    with pytest.raises(ValueError, match=r"lacks \['chains'\]"):
        policy.evaluate_actions({key: value for key, value in inputs.items() if key != "chains"})
    inputs["chains"] = inputs["chains"][:, :3]
    with pytest.raises(ValueError, match=r"chains'\] must have shape \[2, 5, 8, 8\]"):
        policy.evaluate_actions(inputs)


def test_sft_loss_has_gradients_and_rejects_bad_actions(make_tiny, make_obs):
    policy = make_tiny("pi05")
    batch = {**make_obs(3), "actions": torch.zeros(3, HORIZON, ACTION_DIM)}
    loss, metrics = policy.sft_loss(batch)
    loss.backward()
    assert loss.ndim == 0 and set(metrics) == {"sft/loss", "sft/loss_env_dims"}
    assert _grad_norm(policy.expert) > 0
    with pytest.raises(ValueError, match=r"must be float \[B, H, A\] = \[3, 8, 3\]"):
        policy.sft_loss({**make_obs(3), "actions": torch.zeros(3, HORIZON, 7)})


def test_select_action_pops_a_chunk_step_by_step(make_tiny, make_obs):
    policy = make_tiny("pi0")
    obs = make_obs(2)
    torch.manual_seed(5)  # the chunk's start noise comes from torch's global generator
    chunk = policy.predict_action_chunk(obs)
    torch.manual_seed(5)
    popped = [policy.select_action(obs) for _ in range(CHUNK)]
    torch.testing.assert_close(torch.stack(popped, dim=1), chunk)
    policy.reset()
    assert not policy._action_queue


def test_flow_time_grid_matches_the_policy(make_tiny):
    policy = make_tiny("pi0")
    torch.testing.assert_close(policy.time_grid, flow.time_grid(STEPS))
