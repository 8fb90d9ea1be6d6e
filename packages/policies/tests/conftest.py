"""Shared fixtures: a synthetic observation batch in the env contract and tiny policies."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import vlarl_policies

ACTION_DIM = 3
STATE_DIM = 5


def observation_batch(batch: int, seed: int = 0, image_size: int = 64, state_dim: int = STATE_DIM) -> dict:
    """An obs batch as a vector env returns it: uint8 images, float32 states, a tuple of instructions."""
    rng = np.random.default_rng(seed)
    return {
        "main_images": rng.integers(0, 256, (batch, image_size, image_size, 3), dtype=np.uint8),
        "states": rng.uniform(-1, 1, (batch, state_dim)).astype(np.float32),
        "task_description": tuple(f"pick up the {color} cube" for color in rng.choice(["red", "blue"], batch)),
    }


def tiny_policy(name: str = "pi0", **config) -> vlarl_policies.VLAPolicy:
    """A tiny policy in fp32 with a fixed seed, so that tests are reproducible."""
    torch.manual_seed(0)
    return vlarl_policies.make(name, preset="tiny", action_dim=ACTION_DIM, state_dim=STATE_DIM, **config)


def parameter_count(name: str, preset: str, **config) -> int:
    """Parameters of a preset (7-D actions), built on the meta device: the published size allocates no memory."""
    cls = vlarl_policies.policy_class(name)
    policy_config = cls.config_class.from_dict({**cls.presets[preset], "action_dim": 7, **config})
    tokenizer = vlarl_policies.PromptTokenizer.train(["pick up the cube"], vocab_size=300)
    with torch.device("meta"):
        policy = cls(policy_config, tokenizer)
    return sum(p.numel() for p in policy.parameters())


@pytest.fixture(autouse=True)
def single_thread():
    """Run each test on one intra-op thread: on a shared 2-core machine, more threads spin and stall."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def make_obs():
    """Factory fixture: ``make_obs(batch, seed=0, image_size=64, state_dim=5)``."""
    return observation_batch


@pytest.fixture
def count_parameters():
    """Factory fixture: ``count_parameters(name, preset, **config)``."""
    return parameter_count


@pytest.fixture
def make_tiny():
    """Factory fixture: ``make_tiny(name="pi0", **config)`` with action_dim 3 and state_dim 5."""
    return tiny_policy
