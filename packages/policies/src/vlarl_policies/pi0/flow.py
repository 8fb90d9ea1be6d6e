"""Flow-matching math as pure tensor functions: time grid, Euler/SDE steps, Gaussian log-densities.

Conventions (openpi's): x_t = t * noise + (1 - t) * actions, so t = 1 is pure noise and t = 0 the
action chunk; the network predicts the velocity v = d x_t / d t = noise - actions. Sampling walks
the grid t_0 = 1 > t_1 > ... > t_K = 0 with step delta = 1 / K.

From x at time t and the velocity v, the two endpoint predictions are
    x0_hat = x - t * v          (the actions)
    x1_hat = x + (1 - t) * v    (the noise)
and a deterministic Euler step is x - delta * v. The flow-SDE keeps the marginals of that ODE while
injecting noise of scale sigma_t: it adds delta * sigma_t^2 / 2 times the score, which for this
interpolation is -x1_hat / t, to the Euler mean, and samples with std sqrt(delta) * sigma_t.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def time_grid(num_steps: int, device: torch.device | str | None = None) -> Tensor:
    """float32 [K + 1]: t_k = 1 - k / K, from 1 (noise) down to 0 (actions)."""
    return 1.0 - torch.arange(num_steps + 1, dtype=torch.float32, device=device) / num_steps


def sinusoidal_time_embedding(t: Tensor, dim: int, min_period: float, max_period: float) -> Tensor:
    """float32 [B, dim] sine-cosine features of times t [B], periods spaced geometrically."""
    if dim % 2:
        raise ValueError(f"time embedding width must be even, got {dim}")
    fraction = torch.linspace(0.0, 1.0, dim // 2, dtype=torch.float32, device=t.device)
    period = min_period * (max_period / min_period) ** fraction
    angle = t.float()[:, None] * (2 * math.pi / period)[None, :]
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)


def ode_mean(x: Tensor, v: Tensor, delta: float) -> Tensor:
    """The Euler step from t to t - delta: x - delta * v."""
    return x - delta * v


def sde_sigma(step: Tensor, num_steps: int, noise_level: float | Tensor) -> Tensor:
    """sigma_k = a * sqrt(t_k / (1 - t'_k)) for integer steps k [...] (float32, same shape); the level a
    is one number or one per step entry.

    t'_k = t_k except at k = 0, where t = 1 would divide by zero and t_1 is used instead.
    """
    grid = time_grid(num_steps, step.device)
    t = grid[step]
    t_safe = torch.where(step == 0, grid[1], t)
    return noise_level * torch.sqrt(t / (1.0 - t_safe))


def annealed_noise_level(start: float, end: float, steps: int, step: int) -> float:
    """The noise level at training step ``step``: linear from ``start`` to ``end`` over ``steps`` steps, then
    ``end``."""
    return start + (end - start) * min(step, steps) / steps


def sde_step(x: Tensor, v: Tensor, t: Tensor, delta: float, sigma: Tensor) -> tuple[Tensor, Tensor]:
    """Mean and std of the flow-SDE transition from t to t - delta.

    x, v: [B, H, D]; t, sigma: [B]. mean = (1 - (t - delta)) x0_hat + (t - delta - sigma^2 delta / (2 t)) x1_hat,
    which equals the Euler mean plus the score correction; std = sqrt(delta) * sigma, broadcast to x.
    """
    t = t[:, None, None]
    sigma = sigma[:, None, None]
    x0_hat = x - t * v
    x1_hat = x + (1.0 - t) * v
    t_next = t - delta
    mean = (1.0 - t_next) * x0_hat + (t_next - sigma**2 * delta / (2.0 * t)) * x1_hat
    std = (math.sqrt(delta) * sigma).expand_as(mean)
    return mean, std


def bounded_std(raw: Tensor, std_range: tuple[float, float]) -> Tensor:
    """Map unbounded head outputs to a std whose log-variance lies in [2 log min, 2 log max]."""
    low, high = (2.0 * math.log(bound) for bound in std_range)
    log_var = low + (high - low) * (torch.tanh(raw) + 1.0) / 2.0
    return torch.exp(0.5 * log_var)


def gaussian_logprob(x: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """Element-wise log N(x; mean, std^2); 0 where std == 0 (a deterministic step has no density)."""
    stochastic = std > 0
    safe_std = torch.where(stochastic, std, torch.ones_like(std))
    z = (x - mean) / safe_std
    logprob = -torch.log(safe_std) - LOG_SQRT_2PI - 0.5 * z**2
    return torch.where(stochastic, logprob, torch.zeros_like(logprob))


def gaussian_entropy(std: Tensor) -> Tensor:
    """Element-wise entropy 0.5 * log(2 pi e std^2) of a Gaussian."""
    return 0.5 + LOG_SQRT_2PI + torch.log(std)


def sample_training_time(batch_size: int, beta: tuple[float, float], device: torch.device) -> Tensor:
    """float32 [B] flow-matching training times: Beta(alpha, beta) scaled into [0.001, 1].

    Beta(1.5, 1) puts more weight near t = 1 (high noise), where predicting the velocity is hardest.
    """
    concentration = torch.tensor(beta, dtype=torch.float32, device=device)
    draw = torch.distributions.Beta(concentration[0], concentration[1]).sample((batch_size,))
    return draw * 0.999 + 0.001
