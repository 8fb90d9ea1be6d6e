"""OpenVLA and OpenVLA-OFT as RL policies: shapes, act-evaluate_actions agreement, the masked categorical, decoding."""

from __future__ import annotations

import pytest
import torch

from vlarl_policies.openvla import action_tokens
from vlarl_policies.openvla.prismatic import positions_from_mask

ACTION_DIM, STATE_DIM = 3, 5

CONFIGS = [
    pytest.param("openvla", {}, id="openvla"),
    pytest.param("openvla", {"temperature": 0.7, "top_k": 20, "action_chunk": 2}, id="openvla-topk-chunk2"),
    pytest.param("openvla_oft", {}, id="oft"),
    pytest.param("openvla_oft", {"use_proprio": True, "temperature": 1.3, "top_k": 50, "value_type": "action_level"},
                 id="oft-proprio-topk-actionvalues"),
]


def chunk_of(policy) -> int:
    return policy.config.action_chunk


# Prompts of different lengths, so rows carry different amounts of left padding.
INSTRUCTIONS = ("push", "pick up the red cube", "open the top drawer of the cabinet slowly", "reach the goal")


@pytest.mark.parametrize(("name", "config"), CONFIGS)
def test_act_then_evaluate_gives_identical_logprobs(make_tiny, make_obs, name, config):
    policy = make_tiny(name, **config)
    obs = {**make_obs(4), "task_description": INSTRUCTIONS}
    assert len(set(policy.observation_encoder(obs)["token_masks"].sum(dim=1).tolist())) == 4
    out = policy.act(obs, generator=torch.Generator().manual_seed(1))
    chunk = chunk_of(policy)
    assert out.actions.shape == out.logprobs.shape == (4, chunk, ACTION_DIM)
    assert out.actions.dtype == out.logprobs.dtype == torch.float32
    value_shape = (4, chunk) if config.get("value_type") == "action_level" else (4,)
    assert out.values.shape == value_shape
    assert out.forward_inputs["action_tokens"].shape == (4, chunk, ACTION_DIM)
    assert all(tensor.device.type == "cpu" for tensor in out.forward_inputs.values())
    evaluated = policy.evaluate_actions(out.forward_inputs)
    torch.testing.assert_close(evaluated.logprobs, out.logprobs, atol=1e-5, rtol=0)
    torch.testing.assert_close(evaluated.values, out.values, atol=1e-5, rtol=0)
    assert evaluated.entropy.shape == (4, chunk, ACTION_DIM)
    assert bool((evaluated.entropy > 0).all()) and bool((evaluated.entropy <= torch.log(torch.tensor(256.0))).all())
    assert bool(torch.isfinite(out.logprobs).all()) and bool((out.logprobs < 0).all())


def test_oft_act_and_evaluate_are_the_same_forward_pass(make_tiny, make_obs):
    policy = make_tiny("openvla_oft", use_proprio=True)
    out = policy.act(make_obs(3), generator=torch.Generator().manual_seed(2))
    assert torch.equal(policy.evaluate_actions(out.forward_inputs).logprobs, out.logprobs)


def _reference_log_probs(policy, forward_inputs) -> torch.Tensor:
    """Log-probs of the stored tokens from transformers' own LlamaForCausalLM forward over the full vocabulary:
    every id outside the action bins at -inf, then temperature and top-k, then the softmax."""
    config = policy.config
    with torch.no_grad():
        prefix, mask = policy.prefix(forward_inputs)
        tokens = forward_inputs["action_tokens"].flatten(1)
        embeds = torch.cat([prefix, policy.language_model.get_input_embeddings()(tokens)], dim=1)
        mask = torch.cat([mask, torch.ones_like(tokens, dtype=torch.bool)], dim=1)
        logits = policy.language_model(inputs_embeds=embeds, attention_mask=mask,
                                       position_ids=positions_from_mask(mask)).logits
    count = tokens.shape[1]
    logits = logits[:, prefix.shape[1] - 1: prefix.shape[1] - 1 + count].float()
    outside = torch.ones(logits.shape[-1], dtype=torch.bool)
    outside[config.action_token_begin: config.tokenizer_vocab_size] = False
    logits = logits.masked_fill(outside, float("-inf")) / config.temperature
    if config.top_k:
        kth = torch.topk(logits, config.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    log_probs = torch.log_softmax(logits, dim=-1).gather(-1, tokens[..., None]).squeeze(-1)
    return log_probs.view(forward_inputs["action_tokens"].shape)


def test_logprobs_are_the_masked_vocabulary_softmax_of_the_language_model(make_tiny, make_obs):
    policy = make_tiny("openvla", action_chunk=2, temperature=0.8, top_k=30)
    out = policy.act({**make_obs(4), "task_description": INSTRUCTIONS}, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(out.logprobs, _reference_log_probs(policy, out.forward_inputs), atol=1e-5, rtol=0)


def test_deterministic_actions_are_exactly_the_centres_of_the_argmax_bins(make_tiny, make_obs):
    for name in ("openvla", "openvla_oft"):
        policy = make_tiny(name, top_k=10)
        obs = make_obs(4)
        first, second = policy.act(obs, deterministic=True), policy.act(obs, deterministic=True)
        assert torch.equal(first.actions, second.actions)
        bins = action_tokens.token_ids_to_bins(first.forward_inputs["action_tokens"], policy.config.action_token_begin)
        assert torch.equal(first.actions, action_tokens.bin_centres()[bins])
        assert set(first.actions.flatten().tolist()) <= set(action_tokens.bin_centres().tolist())
        with torch.no_grad():
            hidden, _ = policy.action_hidden(first.forward_inputs, first.forward_inputs["action_tokens"].flatten(1))
            log_probs = policy.bin_log_probs(hidden)
        assert torch.equal(bins.flatten(1), log_probs.argmax(dim=-1))
        torch.testing.assert_close(policy.evaluate_actions(first.forward_inputs).logprobs, first.logprobs,
                                   atol=1e-5, rtol=0)
        assert torch.equal(policy.act(obs, deterministic=True, zero_start=True).actions, first.actions)


@pytest.mark.parametrize("name", ["openvla", "openvla_oft"])
def test_a_generator_per_row_samples_a_rows_tokens_independently_of_its_batch(make_tiny, make_obs, name):
    policy = make_tiny(name, temperature=2.0)
    obs = make_obs(4)
    generators = lambda seeds: [torch.Generator().manual_seed(seed) for seed in seeds]  # noqa: E731
    together = policy.act(obs, generator=generators([10, 11, 12, 13]))
    alone = policy.act({key: value[2:] for key, value in obs.items()}, generator=generators([12, 13]))
    assert torch.equal(alone.forward_inputs["action_tokens"], together.forward_inputs["action_tokens"][2:])
    other = policy.act(obs, generator=generators([20, 21, 22, 23]))
    assert not torch.equal(other.forward_inputs["action_tokens"], together.forward_inputs["action_tokens"])


def test_sampling_is_reproducible_with_a_generator_and_varies_without(make_tiny, make_obs):
    policy = make_tiny("openvla")
    obs = make_obs(16)
    first = policy.act(obs, generator=torch.Generator().manual_seed(5))
    again = policy.act(obs, generator=torch.Generator().manual_seed(5))
    other = policy.act(obs, generator=torch.Generator().manual_seed(6))
    assert torch.equal(first.actions, again.actions) and not torch.equal(first.actions, other.actions)


def _count_language_model_passes(policy):
    calls = []
    policy.language_model.model.register_forward_hook(lambda module, args, output: calls.append(1))
    return calls


def test_openvla_decodes_token_by_token_and_oft_in_one_pass(make_tiny, make_obs):
    openvla = make_tiny("openvla", action_chunk=2)
    calls = _count_language_model_passes(openvla)
    out = openvla.act(make_obs(2))
    assert len(calls) == 2 * ACTION_DIM
    openvla.evaluate_actions(out.forward_inputs)
    assert len(calls) == 2 * ACTION_DIM + 1
    oft = make_tiny("openvla_oft")
    calls = _count_language_model_passes(oft)
    out = oft.act(make_obs(2))
    oft.evaluate_actions(out.forward_inputs)
    assert len(calls) == 2


def test_oft_tokens_are_independent_and_openvla_tokens_condition_on_earlier_ones(make_tiny, make_obs):
    for name, later_tokens_move in (("openvla", True), ("openvla_oft", False)):
        policy = make_tiny(name, action_chunk=2)
        inputs = dict(policy.act(make_obs(2)).forward_inputs)
        before = policy.evaluate_actions(inputs).logprobs.flatten(1)
        changed = inputs["action_tokens"].clone()
        changed[:, 0, 0] = torch.where(changed[:, 0, 0] == policy.config.action_token_begin,
                                       changed[:, 0, 0] + 1, changed[:, 0, 0] - 1)
        after = policy.evaluate_actions({**inputs, "action_tokens": changed}).logprobs.flatten(1)
        assert not torch.allclose(before[:, 0], after[:, 0])
        assert torch.allclose(before[:, 1:], after[:, 1:], atol=1e-6) is not later_tokens_move


def test_oft_attends_bidirectionally_over_the_placeholders(make_tiny, make_obs):
    """With a causal mask the first tokens could not see how many placeholders follow; OFT's can."""
    long_chunk = make_tiny("openvla_oft", action_chunk=4)
    short_chunk = make_tiny("openvla_oft", action_chunk=1)
    short_chunk.load_state_dict(long_chunk.state_dict())
    inputs = dict(long_chunk.act(make_obs(2)).forward_inputs)
    first_step = long_chunk.evaluate_actions(inputs).logprobs[:, :1]
    alone = short_chunk.evaluate_actions({**inputs, "action_tokens": inputs["action_tokens"][:, :1]}).logprobs
    assert not torch.allclose(first_step, alone, atol=1e-4)


def test_oft_reads_the_state_only_with_proprio(make_tiny, make_obs):
    obs = make_obs(2)
    moved = {**obs, "states": obs["states"] + 0.5}
    for use_proprio in (True, False):
        policy = make_tiny("openvla_oft", use_proprio=use_proprio)
        inputs = policy.act(obs).forward_inputs
        moved_inputs = {**inputs, "states": policy.act(moved).forward_inputs["states"]}
        same = torch.equal(policy.evaluate_actions(inputs).logprobs, policy.evaluate_actions(moved_inputs).logprobs)
        assert same is not use_proprio


def test_openvla_needs_no_state(make_tiny, make_obs):
    policy = make_tiny("openvla")
    obs = make_obs(2)
    del obs["states"]
    out = policy.act(obs)
    assert "states" not in out.forward_inputs
    policy.set_state_stats(mean=[0.0] * STATE_DIM, std=[1.0] * STATE_DIM)


def test_oft_takes_the_wrist_camera_as_a_second_image_when_sent(make_tiny, make_obs):
    with_wrist_slot = make_tiny("openvla_oft")
    main_only = make_tiny("openvla_oft", camera_keys=("main_images",))
    main_only.load_state_dict(with_wrist_slot.state_dict())
    obs = make_obs(2)
    without = with_wrist_slot.act(obs, deterministic=True)
    assert without.forward_inputs["image_masks"].tolist() == [[True, False]] * 2
    torch.testing.assert_close(without.logprobs, main_only.act(obs, deterministic=True).logprobs, atol=1e-5, rtol=0)
    wrist = {**obs, "wrist_images": make_obs(2, seed=9)["main_images"]}
    with_camera = with_wrist_slot.act(wrist, deterministic=True)
    assert with_camera.forward_inputs["image_masks"].all()
    assert not torch.allclose(with_camera.logprobs, without.logprobs)
    torch.testing.assert_close(with_wrist_slot.evaluate_actions(with_camera.forward_inputs).logprobs,
                               with_camera.logprobs, atol=1e-5, rtol=0)


def _grad_norm(module: torch.nn.Module) -> float:
    grads = [p.grad.norm() for p in module.parameters() if p.grad is not None]
    return float(torch.stack(grads).sum()) if grads else 0.0


@pytest.mark.parametrize("name", ["openvla", "openvla_oft"])
def test_gradients_reach_every_part(make_tiny, make_obs, name):
    policy = make_tiny(name)
    out = policy.act(make_obs(2))
    policy.train()
    evaluated = policy.evaluate_actions(out.forward_inputs)
    (evaluated.logprobs.sum() + evaluated.values.sum() + evaluated.entropy.sum()).backward()
    for module in (policy.vision_backbone.featurizer, policy.vision_backbone.fused_featurizer, policy.projector,
                   policy.language_model.model, policy.language_model.lm_head, policy.value_head):
        assert _grad_norm(module) > 0


def test_detached_critic_input_keeps_value_loss_out_of_the_backbone(make_tiny, make_obs):
    policy = make_tiny("openvla", detach_critic_input=True)
    policy.evaluate_actions(policy.act(make_obs(2)).forward_inputs).values.sum().backward()
    assert _grad_norm(policy.value_head) > 0 and _grad_norm(policy.language_model) == 0.0


@pytest.mark.parametrize("name", ["openvla", "openvla_oft"])
def test_lora_trains_adapters_of_the_rank_asked_and_the_heads(make_tiny, make_obs, name):
    policy = make_tiny(name, lora_rank=4, **({"use_proprio": True} if name == "openvla_oft" else {}))
    vla = (policy.vision_backbone, policy.projector, policy.language_model)
    trainable = [n for module in vla for n, p in module.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    adapters = dict(policy.language_model.named_parameters())
    assert adapters["model.layers.0.self_attn.q_proj.lora_A.default.weight"].shape[0] == 4
    assert adapters["lm_head.lora_B.default.weight"].shape[1] == 4
    heads = [policy.value_head] + ([policy.proprio_projector] if name == "openvla_oft" else [])
    assert all(p.requires_grad for head in heads for p in head.parameters())
    out = policy.act(make_obs(2))
    policy.train()
    evaluated = policy.evaluate_actions(out.forward_inputs)
    torch.testing.assert_close(evaluated.logprobs, out.logprobs, atol=1e-5, rtol=0)
    evaluated.logprobs.sum().backward()
    for module in vla:
        assert all(p.grad is None for n, p in module.named_parameters() if "lora_" not in n)
        assert any(p.grad is not None and bool(p.grad.abs().sum() > 0) for n, p in module.named_parameters()
                   if "lora_B" in n)
    groups = policy.parameter_groups()
    assert {id(p) for p in groups["value_head"]} == {id(p) for p in policy.value_head.parameters()}


@pytest.mark.parametrize("name", ["openvla", "openvla_oft"])
def test_gradient_checkpointing_gives_the_same_gradients(make_tiny, make_obs, name):
    plain = make_tiny(name)
    checkpointed = make_tiny(name, gradient_checkpointing=True)
    checkpointed.load_state_dict(plain.state_dict())
    plain.train(), checkpointed.train()
    obs = make_obs(2)
    out = checkpointed.act(obs, generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(plain.act(obs, generator=torch.Generator().manual_seed(4)).logprobs, out.logprobs,
                               atol=1e-5, rtol=0)
    for policy in (plain, checkpointed):
        evaluated = policy.evaluate_actions(out.forward_inputs)
        (evaluated.logprobs.sum() + evaluated.values.sum()).backward()
    for (parameter_name, a), (_, b) in zip(plain.named_parameters(), checkpointed.named_parameters(), strict=True):
        if a.grad is not None or b.grad is not None:
            torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4, msg=parameter_name)
    assert checkpointed.language_model.model.gradient_checkpointing
    assert checkpointed.vision_backbone.featurizer.grad_checkpointing


def test_bfloat16_acts_and_evaluates(make_tiny, make_obs):
    policy = make_tiny("openvla_oft", dtype="bfloat16", use_proprio=True)
    assert policy.language_model.model.layers[0].mlp.up_proj.weight.dtype == torch.bfloat16
    assert policy.value_head.mlp[0].weight.dtype == torch.float32
    out = policy.act(make_obs(2))
    assert out.logprobs.dtype == out.actions.dtype == torch.float32
    torch.testing.assert_close(policy.evaluate_actions(out.forward_inputs).logprobs, out.logprobs, atol=1e-5, rtol=0)


def test_sft_loss_is_the_cross_entropy_of_the_demonstrated_bins(make_tiny, make_obs):
    policy = make_tiny("openvla_oft", action_chunk=2)
    actions = torch.rand(3, 2, ACTION_DIM) * 2 - 1
    loss, metrics = policy.sft_loss({**make_obs(3), "actions": actions})
    bins = action_tokens.actions_to_bins(actions).flatten(1)
    with torch.no_grad():
        hidden, _ = policy.action_hidden(policy.observation_encoder(make_obs(3)))
        expected = torch.nn.functional.cross_entropy(policy.bin_logits(hidden).flatten(0, 1), bins.flatten())
    torch.testing.assert_close(loss.detach(), expected, atol=1e-5, rtol=0)
    assert set(metrics) == {"sft/loss", "sft/loss_env_dims", "sft/accuracy", "sft/action_l1"}
    loss.backward()
    assert _grad_norm(policy.language_model) > 0
    with pytest.raises(ValueError, match=r"must be float \[B, H, A\] = \[3, 2, 3\]"):
        policy.sft_loss({**make_obs(3), "actions": torch.zeros(3, 1, ACTION_DIM)})


@pytest.mark.slow
@pytest.mark.parametrize("name", ["openvla", "openvla_oft"])
def test_sft_loss_decreases_on_a_tiny_batch(make_tiny, make_obs, name):
    policy = make_tiny(name)
    chunk = policy.config.action_horizon
    batch = {**make_obs(4), "actions": torch.linspace(-0.9, 0.9, 4 * chunk * ACTION_DIM).view(4, chunk, ACTION_DIM)}
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    policy.train()
    losses, accuracies = [], []
    for _ in range(40):
        loss, metrics = policy.sft_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        accuracies.append(float(metrics["sft/accuracy"]))
    assert losses[-1] < 0.2 * losses[0]
    assert accuracies[-1] > 0.5
    policy.eval()
    obs = {key: value for key, value in batch.items() if key != "actions"}
    error = (policy.act(obs, deterministic=True).actions - batch["actions"]).abs().mean()
    assert error < 0.2


def test_select_action_pops_a_chunk_step_by_step(make_tiny, make_obs):
    policy = make_tiny("openvla_oft", action_chunk=3)
    obs = make_obs(2)
    chunk = policy.predict_action_chunk(obs)
    popped = [policy.select_action(obs) for _ in range(3)]
    torch.testing.assert_close(torch.stack(popped, dim=1), chunk)
    policy.reset()
    assert not policy._action_queue


def test_evaluate_rejects_foreign_forward_inputs(make_tiny, make_obs):
    policy = make_tiny("openvla")
    inputs = dict(policy.act(make_obs(2)).forward_inputs)
    with pytest.raises(ValueError, match=r"lacks \['action_tokens'\]"):
        policy.evaluate_actions({key: value for key, value in inputs.items() if key != "action_tokens"})
    with pytest.raises(ValueError, match=r"action_tokens'\] must have shape \[2, 1, 3\]"):
        policy.evaluate_actions({**inputs, "action_tokens": inputs["action_tokens"].repeat(1, 2, 1)})
