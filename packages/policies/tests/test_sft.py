"""Supervised flow matching learns: a synthetic task that needs the image, the instruction and the state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

STEPS, BATCH = 300, 16


def synthetic_task(rng: np.random.Generator, batch: int, horizon: int) -> dict:
    """A red or blue block at a random place, "push the block up/down", and a state to echo.

    The expert chunk ramps from half to full strength towards a target whose three dims read
    the block colour (+-0.6), the instruction (+-0.6) and 0.8 * the first state dimension.
    """
    blue = rng.integers(0, 2, batch)
    up = rng.integers(0, 2, batch)
    states = rng.uniform(-1, 1, (batch, 5)).astype(np.float32)
    images = np.full((batch, 64, 64, 3), 40, dtype=np.uint8)
    for row, (top, left) in enumerate(rng.integers(0, 33, (batch, 2))):
        images[row, top : top + 32, left : left + 32] = (40, 40, 230) if blue[row] else (230, 40, 40)
    target = np.stack([np.where(blue, 0.6, -0.6), np.where(up, 0.6, -0.6), 0.8 * states[:, 0]], axis=-1)
    ramp = np.linspace(0.5, 1.0, horizon)[None, :, None]
    return {
        "main_images": images,
        "states": states,
        "task_description": [f"push the block {'up' if u else 'down'}" for u in up],
        "actions": (target[:, None, :] * ramp).astype(np.float32),
    }


@pytest.mark.slow
def test_sft_cuts_the_loss_and_solves_the_task(make_tiny):
    policy = make_tiny("pi0")
    horizon, chunk = policy.config.action_horizon, policy.config.action_chunk
    rng = np.random.default_rng(0)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=2e-3, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / STEPS)
    policy.train()
    losses = []
    for _ in range(STEPS):
        loss, _ = policy.sft_loss(synthetic_task(rng, BATCH, horizon))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    assert np.mean(losses[:10]) / np.mean(losses[-10:]) > 8

    policy.eval()
    test = synthetic_task(np.random.default_rng(1), 64, horizon)
    expert_chunk = torch.from_numpy(test.pop("actions"))[:, :chunk]
    actions = policy.act(test, deterministic=True).actions
    worst_error = (actions - expert_chunk).abs().amax(dim=(1, 2))
    assert (worst_error < 0.2).float().mean() >= 0.9
