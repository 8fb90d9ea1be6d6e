"""``set_gradient_checkpointing`` of every policy family: the same log-probs, values and gradients as
without it, with the watched layers run again during the backward pass (and not without it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch import Tensor, nn

import vlarl_policies

CASES = [
    pytest.param("pi0", {}, id="pi0"),
    pytest.param("pi0", {"lora_rank": 4, "noise_method": "flow_noise"}, id="pi0-lora-flow_noise"),
    pytest.param("pi05", {}, id="pi05"),
    pytest.param("openvla", {}, id="openvla"),
    pytest.param("openvla_oft", {"use_proprio": True}, id="openvla_oft-proprio"),
]


def test_every_registered_policy_is_covered():
    assert {case.values[0] for case in CASES} == set(vlarl_policies.available_policies())


def watched_layers(policy: vlarl_policies.VLAPolicy) -> dict[str, nn.Module]:
    """One layer of each transformer the switch covers, among those that train (a frozen tower under
    LoRA has no backward pass to recompute for)."""
    if policy.name in ("pi0", "pi05"):
        layers = {
            "SigLIP": policy.vlm.vision_tower.vision_model.encoder.layers[0],
            "Gemma": policy.vlm.language_model.layers[0].mlp,
            "expert": policy.expert.layers[0].mlp,
        }
    else:
        layers = {
            "DINOv2": policy.vision_backbone.featurizer.blocks[0],
            "SigLIP": policy.vision_backbone.fused_featurizer.blocks[0],
            "Llama": policy.language_model.model.layers[0],
        }
    return {name: layer for name, layer in layers.items() if any(p.requires_grad for p in layer.parameters())}


@contextmanager
def forward_calls(modules: dict[str, nn.Module]) -> Iterator[dict[str, int]]:
    """Counts of forward calls per watched module while the block runs, counted as they start: a
    recomputation stops as soon as it has given back every activation the backward pass needs."""
    counts = dict.fromkeys(modules, 0)

    def counter(name: str):
        def hook(*_) -> None:
            counts[name] += 1
        return hook

    handles = [module.register_forward_pre_hook(counter(name)) for name, module in modules.items()]
    try:
        yield counts
    finally:
        for handle in handles:
            handle.remove()


def train_pass(policy: vlarl_policies.VLAPolicy, forward_inputs: dict[str, Tensor]
               ) -> tuple[vlarl_policies.EvalOutput, dict[str, Tensor], dict[str, int]]:
    """``evaluate_actions`` and the backward pass of a loss on all its outputs: the outputs (detached), every
    parameter's gradient, and the watched layers' forward calls during the backward pass alone."""
    policy.zero_grad(set_to_none=True)
    out = policy.evaluate_actions(forward_inputs)
    loss = -out.logprobs.sum() + out.values.square().sum()
    if out.entropy is not None:
        loss = loss - out.entropy.sum()
    with forward_calls(watched_layers(policy)) as recomputed:
        loss.backward()
    gradients = {name: p.grad.clone() for name, p in policy.named_parameters() if p.grad is not None}
    detached = vlarl_policies.EvalOutput(
        *(None if field is None else field.detach() for field in (out.logprobs, out.entropy, out.values)))
    return detached, gradients, recomputed


@pytest.mark.parametrize(("name", "config"), CASES)
def test_checkpointing_recomputes_the_layers_and_changes_no_number(make_tiny, make_obs, name, config):
    policy = make_tiny(name, **config)
    saved_config, saved_keys = policy.config.to_dict(), list(policy.state_dict())
    obs = make_obs(3)
    rollout = policy.act(obs, generator=torch.Generator().manual_seed(2))
    policy.train()
    plain, plain_gradients, plain_recomputed = train_pass(policy, rollout.forward_inputs)

    policy.set_gradient_checkpointing(True)
    checkpointed, gradients, recomputed = train_pass(policy, rollout.forward_inputs)

    assert all(count == 0 for count in plain_recomputed.values()), plain_recomputed
    assert all(count > 0 for count in recomputed.values()), recomputed
    for field in ("logprobs", "entropy", "values"):
        torch.testing.assert_close(getattr(checkpointed, field), getattr(plain, field), atol=1e-6, rtol=1e-6)
    assert gradients.keys() == plain_gradients.keys() and gradients
    for parameter_name, gradient in gradients.items():
        torch.testing.assert_close(gradient, plain_gradients[parameter_name], atol=1e-6, rtol=1e-5,
                                   msg=lambda message, n=parameter_name: f"{n}: {message}")
    assert policy.config.to_dict() == saved_config and list(policy.state_dict()) == saved_keys
    policy.eval()
    again = policy.act(obs, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(again.actions, rollout.actions, atol=1e-6, rtol=0)

    policy.train()
    policy.set_gradient_checkpointing(False)
    _, _, switched_off = train_pass(policy, rollout.forward_inputs)
    assert all(count == 0 for count in switched_off.values()), switched_off
