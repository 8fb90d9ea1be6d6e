"""Random draws for ``act`` from one generator, or from one generator per row of the batch.

With one generator per row (per env), what a row draws depends on its own generator alone, not on the
other rows of its batch: an evaluation that seeds each episode's generator from the episode scores it
the same whichever envs, workers and rounds its episodes were spread over.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

Generators = torch.Generator | Sequence[torch.Generator] | None
"""What ``act`` samples from: torch's global generator (None), one generator, or one per row of the batch."""


def _per_row(generator: Generators, rows: int) -> Sequence[torch.Generator] | None:
    """The generators of ``rows`` rows, or None when one generator (or the global one) draws for all."""
    if generator is None or isinstance(generator, torch.Generator):
        return None
    if len(generator) != rows:
        raise ValueError(f"one generator per row of the batch: expected {rows}, got {len(generator)}")
    return generator


def normal(shape: tuple[int, ...], device: torch.device, generator: Generators, only: Tensor | None = None
           ) -> Tensor:
    """Standard normal draws of ``shape`` (rows first) on ``device``, drawn on the generators' device.

    ``only`` [B] (bool) says which rows need draws: with one generator per row, the others draw nothing
    and get zeros, so a row's generator advances by its own needs alone; one generator draws every row."""
    rows = _per_row(generator, shape[0])
    if rows is not None:
        needed = [True] * shape[0] if only is None else only.tolist()
        return torch.stack([torch.randn(shape[1:], generator=g, device=g.device) if need
                            else torch.zeros(shape[1:], device=g.device)
                            for g, need in zip(rows, needed, strict=True)]).to(device)
    if generator is None:
        return torch.randn(shape, device=device)
    return torch.randn(shape, generator=generator, device=generator.device).to(device)


def integers(high: int, shape: tuple[int, ...], generator: Generators) -> Tensor:
    """int64 draws from [0, high) of ``shape`` (rows first), on the CPU."""
    rows = _per_row(generator, shape[0])
    if rows is not None:
        return torch.stack([torch.randint(0, high, shape[1:], generator=g, device=g.device).cpu() for g in rows])
    device = None if generator is None else generator.device
    return torch.randint(0, high, shape, generator=generator, device=device).cpu()


def categorical(probs: Tensor, generator: Generators) -> Tensor:
    """One index per categorical of ``probs`` [B, ..., n] (rows first), on ``probs``' device."""
    rows = _per_row(generator, probs.shape[0])
    if rows is not None:
        drawn = [torch.multinomial(row.to(g.device), 1, generator=g).squeeze(-1)
                 for row, g in zip(probs.reshape(probs.shape[0], -1, probs.shape[-1]), rows, strict=True)]
        return torch.stack(drawn).to(probs.device).view(probs.shape[:-1])
    flat = probs.flatten(0, -2)
    if generator is not None:
        flat = flat.to(generator.device)
    return torch.multinomial(flat, 1, generator=generator).squeeze(-1).to(probs.device).view(probs.shape[:-1])
