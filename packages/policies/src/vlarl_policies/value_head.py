"""The critic head shared by the policies: a pooled feature in, one value per sample out."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn


class ValueHead(nn.Module):
    """ReLU MLP from a pooled feature [B, in_dim] to a value [B] (last layer with a bias, as in RLinf)."""

    def __init__(self, in_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = in_dim
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, features: Tensor) -> Tensor:
        return self.mlp(features).squeeze(-1)
