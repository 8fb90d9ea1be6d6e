"""flow-noise's learned exploration std."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from vlarl_policies.pi0.flow import bounded_std
from vlarl_policies.value_head import mlp


class NoiseStdHead(nn.Module):
    """flow-noise: a tanh MLP from each action token's expert output [B, H, W] to a std [B, H, D].

    The std is bounded so that its log-variance stays in [2 log min_std, 2 log max_std]; this keeps
    exploration from collapsing to zero or blowing up while PPO trains the head.
    """

    def __init__(self, in_dim: int, hidden: Sequence[int], out_dim: int, std_range: tuple[float, float]) -> None:
        super().__init__()
        self.mlp = mlp(in_dim, hidden, out_dim, nn.Tanh)
        self.std_range = std_range

    def forward(self, features: Tensor) -> Tensor:
        return bounded_std(self.mlp(features), self.std_range)
