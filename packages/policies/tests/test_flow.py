"""The flow-matching math in isolation: grid, SDE step, densities, bounded std."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vlarl_policies.pi0 import flow

steps = st.integers(min_value=1, max_value=12)
levels = st.floats(min_value=0.05, max_value=1.5)
seeds = st.integers(min_value=0, max_value=2**16)


def test_time_grid_runs_from_noise_to_actions():
    grid = flow.time_grid(4)
    assert torch.allclose(grid, torch.tensor([1.0, 0.75, 0.5, 0.25, 0.0]))


@settings(deadline=None, max_examples=30)
@given(seed=seeds)
def test_gaussian_logprob_matches_torch_normal(seed):
    generator = torch.Generator().manual_seed(seed)
    x, mean = torch.randn(3, 4, generator=generator), torch.randn(3, 4, generator=generator)
    std = torch.rand(3, 4, generator=generator) + 0.05
    expected = torch.distributions.Normal(mean, std).log_prob(x)
    assert torch.allclose(flow.gaussian_logprob(x, mean, std), expected, atol=1e-5)
    assert torch.allclose(flow.gaussian_entropy(std), torch.distributions.Normal(mean, std).entropy(), atol=1e-5)


def test_zero_std_has_zero_logprob_instead_of_nan():
    x = torch.ones(2, 3)
    assert torch.equal(flow.gaussian_logprob(x, x, torch.zeros_like(x)), torch.zeros_like(x))


@settings(deadline=None, max_examples=40)
@given(num_steps=steps, step=st.integers(min_value=0, max_value=11), seed=seeds)
def test_sde_with_zero_noise_is_the_euler_step(num_steps, step, seed):
    step = min(step, num_steps - 1)
    generator = torch.Generator().manual_seed(seed)
    x, v = torch.randn(2, 5, 3, generator=generator), torch.randn(2, 5, 3, generator=generator)
    index = torch.full((2,), step)
    sigma = flow.sde_sigma(index, num_steps, noise_level=0.0)
    mean, std = flow.sde_step(x, v, flow.time_grid(num_steps)[index], 1.0 / num_steps, sigma)
    assert torch.allclose(mean, flow.ode_mean(x, v, 1.0 / num_steps), atol=1e-5)
    assert torch.equal(std, torch.zeros_like(std))


@settings(deadline=None, max_examples=40)
@given(num_steps=st.integers(min_value=2, max_value=12), step=st.integers(min_value=0, max_value=11),
       level=levels, seed=seeds)
def test_sde_mean_is_euler_plus_score_correction(num_steps, step, level, seed):
    """mean = x - delta v + (delta sigma^2 / 2) * score, score = -(x + (1 - t) v) / t; std = sqrt(delta) sigma."""
    step = min(step, num_steps - 1)
    generator = torch.Generator().manual_seed(seed)
    x, v = torch.randn(1, 4, 2, generator=generator), torch.randn(1, 4, 2, generator=generator)
    t = 1.0 - step / num_steps
    t_for_sigma = 1.0 - 1.0 / num_steps if step == 0 else t
    sigma = level * math.sqrt(t / (1.0 - t_for_sigma))
    delta = 1.0 / num_steps
    score = -(x + (1.0 - t) * v) / t
    expected_mean = x - delta * v + 0.5 * delta * sigma**2 * score
    index = torch.tensor([step])
    mean, std = flow.sde_step(x, v, torch.tensor([t]), delta, flow.sde_sigma(index, num_steps, level))
    assert torch.allclose(mean, expected_mean, atol=1e-4, rtol=1e-4)
    assert torch.allclose(std, torch.full_like(std, math.sqrt(delta) * sigma), atol=1e-5)


def test_sde_sampler_keeps_the_marginals_of_the_ode():
    """With the exact velocity of Gaussian data, the SDE chain ends at the data distribution.

    Data x0 ~ N(m, s^2); x_t = (1 - t) x0 + t eps is Gaussian, so v(x, t) = E[eps - x0 | x_t = x]
    is linear in x. Without the score correction the injected noise would inflate the variance.
    """
    m, s, num_steps, count = 0.7, 0.3, 100, 20000
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(count, 1, 1, generator=generator, dtype=torch.float64)
    grid = flow.time_grid(num_steps).double()
    for step in range(num_steps):
        t = grid[step]
        variance = (1 - t) ** 2 * s**2 + t**2
        residual = x - (1 - t) * m
        v = (t / variance) * residual - (m + (1 - t) * s**2 / variance * residual)
        index = torch.full((count,), step)
        sigma = flow.sde_sigma(index, num_steps, noise_level=0.7).double()
        mean, std = flow.sde_step(x, v, torch.full((count,), float(t), dtype=torch.float64), 1.0 / num_steps, sigma)
        x = mean + std * torch.randn(x.shape, generator=generator, dtype=torch.float64)
    assert abs(x.mean().item() - m) < 0.02
    assert abs(x.std().item() - s) < 0.02


@settings(deadline=None, max_examples=30)
@given(low=st.floats(min_value=0.01, max_value=0.5), ratio=st.floats(min_value=1.0, max_value=4.0), seed=seeds)
def test_bounded_std_stays_in_its_range(low, ratio, seed):
    raw = torch.randn(64, generator=torch.Generator().manual_seed(seed)) * 20
    std = flow.bounded_std(raw, (low, low * ratio))
    assert bool((std >= low * (1 - 1e-5)).all()) and bool((std <= low * ratio * (1 + 1e-5)).all())


def test_time_embedding_distinguishes_nearby_times():
    t = torch.tensor([0.0, 0.25, 0.26, 1.0])
    embedding = flow.sinusoidal_time_embedding(t, 16, 4e-3, 4.0)
    assert embedding.shape == (4, 16)
    assert torch.cdist(embedding, embedding)[1, 2] > 0.05


def test_training_times_lie_in_the_unit_interval():
    torch.manual_seed(0)
    t = flow.sample_training_time(2000, (1.5, 1.0), torch.device("cpu"))
    assert float(t.min()) >= 0.001 and float(t.max()) <= 1.0
    assert abs(float(t.mean()) - (0.6 * 0.999 + 0.001)) < 0.02
