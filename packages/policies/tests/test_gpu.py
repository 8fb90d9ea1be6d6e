"""The published sizes with random weights on a GPU, in bf16: act, evaluate and backward of pi0 / pi0.5, and of
OpenVLA / OpenVLA-OFT as RLinf's ManiSkill recipe runs them (LoRA rank 32, gradient checkpointing)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import vlarl_policies


def act_and_backpropagate(policy, image_size: int, label: str):
    """One act and one evaluate + backward on a batch of 4; prints their times and the peak memory, and
    checks that evaluate gives act's log-probs (to bf16 precision) and a finite loss."""
    batch = 4
    rng = np.random.default_rng(0)
    obs = {
        "main_images": rng.integers(0, 256, (batch, image_size, image_size, 3), dtype=np.uint8),
        "wrist_images": rng.integers(0, 256, (batch, image_size, image_size, 3), dtype=np.uint8),
        "states": rng.uniform(-1, 1, (batch, 8)).astype(np.float32),
        "task_description": ["put the carrot on the plate"] * batch,
    }
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    out = policy.act(obs)
    torch.cuda.synchronize()
    act_seconds = time.perf_counter() - start
    policy.train()
    start = time.perf_counter()
    evaluated = policy.evaluate_actions(out.forward_inputs)
    loss = -evaluated.logprobs.mean() - 0.01 * evaluated.entropy.mean() + evaluated.values.square().mean()
    loss.backward()
    torch.cuda.synchronize()
    train_seconds = time.perf_counter() - start
    peak_gib = torch.cuda.max_memory_allocated() / 2**30
    print(f"\n{label} batch {batch}: act {act_seconds:.2f} s, evaluate + backward {train_seconds:.2f} s, "
          f"peak memory {peak_gib:.1f} GiB")
    assert bool(torch.isfinite(evaluated.logprobs).all()) and bool(torch.isfinite(loss))
    torch.testing.assert_close(evaluated.logprobs.cpu(), out.logprobs, atol=0.1, rtol=0.05)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["pi0", "pi05"])
def test_published_pi0_acts_evaluates_and_backpropagates_in_bf16(name):
    torch.manual_seed(0)
    policy = vlarl_policies.make(name, preset="base", action_dim=7, state_dim=8, dtype="bfloat16", device="cuda",
                                 noise_method="flow_noise")
    act_and_backpropagate(policy, 256, f"{name} base bf16")
    assert policy.expert.layers[0].self_attn.q_proj.weight.grad is not None
    assert policy.vlm.language_model.layers[0].self_attn.k_proj.weight.grad is not None


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "config"), [("openvla", {}), ("openvla_oft", {"use_proprio": True})])
def test_published_openvla_acts_evaluates_and_backpropagates_in_bf16_with_lora(name, config):
    torch.manual_seed(0)
    policy = vlarl_policies.make(name, preset="base", action_dim=7, state_dim=8, dtype="bfloat16", device="cuda",
                                 lora_rank=32, gradient_checkpointing=True, **config)
    act_and_backpropagate(policy, 224, f"{name} base bf16 LoRA 32")
    adapter = policy.language_model.model.layers[0].self_attn.q_proj.lora_B.default.weight
    assert adapter.grad is not None and bool(adapter.grad.abs().sum() > 0)
