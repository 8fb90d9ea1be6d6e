"""The critic head shared by the policies, and the small MLP builder the RL heads use."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn


def mlp(in_dim: int, hidden: Sequence[int], out_dim: int, activation: type[nn.Module]) -> nn.Sequential:
    """Linear layers in_dim -> hidden... -> out_dim with ``activation`` between them (none after the last)."""
    layers: list[nn.Module] = []
    width = in_dim
    for size in hidden:
        layers += [nn.Linear(width, size), activation()]
        width = size
    layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)


class ValueHead(nn.Module):
    """ReLU MLP from a pooled feature [B, in_dim] to a value [B], or [B, num_values] for one value per
    chunk step (last layer with a bias, as in RLinf)."""

    def __init__(self, in_dim: int, hidden: Sequence[int], num_values: int = 1) -> None:
        super().__init__()
        self.num_values = num_values
        self.mlp = mlp(in_dim, hidden, num_values, nn.ReLU)

    def forward(self, features: Tensor) -> Tensor:
        values = self.mlp(features)
        return values.squeeze(-1) if self.num_values == 1 else values
