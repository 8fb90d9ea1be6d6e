"""OpenVLA's action tokens as pure tensor functions: binning, decoding, the masked categorical.

An action value a in [-1, 1] is binned with numpy's ``digitize`` against the 256 edges
``linspace(-1, 1, 256)``, giving d in 1..256, and written as token id ``end - d``, where ``end`` is
the tokenizer's vocabulary size (32,000 for Llama 2): the action bins are the last 256 ids, the
highest value on the lowest id. Decoding maps a token to the centre of the (d - 1)-th of the 255
intervals, d = 256 (only a = 1 reaches it) clipped to the last interval, so two tokens share the top
centre. This is OpenVLA's ``ActionTokenizer`` arithmetic, written on tensors.

Here a token is handled by its bin index k = id - (end - 256), k in 0..255, so that logits,
samples and log-probs live on the 256 bins alone: every other id is masked out, which gives the
same categorical as a softmax over the whole vocabulary with those ids at minus infinity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from vlarl_policies import sampling
from vlarl_policies.sampling import Generators

N_BINS = 256


def bin_edges(n_bins: int = N_BINS) -> Tensor:
    """float64 [n_bins]: the edges, numpy's linspace(-1, 1, n_bins) to the last bit (torch's linspace
    rounds some edges the other way, which would move actions lying on an edge into the next bin). Made on
    the default device, so a policy built under ``torch.device("cuda")`` holds its bin centres there."""
    return torch.tensor(np.linspace(-1.0, 1.0, n_bins))


def bin_centres(n_bins: int = N_BINS) -> Tensor:
    """float32 [n_bins]: the continuous value of each bin index k (index 0 is the top bin)."""
    edges = bin_edges(n_bins)
    centres = (edges[:-1] + edges[1:]) / 2.0
    digitized = n_bins - torch.arange(n_bins)
    return centres[(digitized - 1).clamp(0, n_bins - 2)].float()


def actions_to_bins(actions: Tensor, n_bins: int = N_BINS) -> Tensor:
    """Normalized actions (any shape, clipped to [-1, 1]) -> int64 bin indices k in [0, n_bins)."""
    edges = bin_edges(n_bins).to(actions.device)
    clipped = actions.double().clamp(-1.0, 1.0)
    digitized = torch.bucketize(clipped, edges, right=True)
    return n_bins - digitized


def bins_to_actions(bins: Tensor, n_bins: int = N_BINS) -> Tensor:
    """int bin indices k (any shape) -> float32 bin centres."""
    return bin_centres(n_bins).to(bins.device)[bins]


def bins_to_token_ids(bins: Tensor, begin: int) -> Tensor:
    """Bin indices -> vocabulary ids ``begin + k`` (``begin`` = tokenizer vocab size - n_bins)."""
    return bins + begin


def token_ids_to_bins(token_ids: Tensor, begin: int) -> Tensor:
    """Vocabulary ids of action tokens -> bin indices ``id - begin``."""
    return token_ids - begin


def bin_log_probs(bin_logits: Tensor, temperature: float, top_k: int) -> Tensor:
    """Log-probs [..., n_bins] of the sampling distribution: logits / temperature, then the top-k bins.

    Bins below the k-th largest logit get -inf (ties at the k-th value are kept, as transformers'
    TopKLogitsWarper keeps them); ``top_k = 0`` keeps every bin. Computed in float32.
    """
    scaled = bin_logits.float() / temperature
    if 0 < top_k < scaled.shape[-1]:
        kth_largest = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth_largest, float("-inf"))
    return F.log_softmax(scaled, dim=-1)


def sample_bins(log_probs: Tensor, generator: Generators = None) -> Tensor:
    """One bin index per row of ``log_probs`` [B, ..., n_bins], drawn on the generators' device (one
    generator, or one per row of B: ``vlarl_policies.sampling``)."""
    return sampling.categorical(log_probs.exp(), generator)


def categorical_entropy(log_probs: Tensor) -> Tensor:
    """Entropy [...] of categoricals given as log-probs [..., n]; masked bins (-inf) add nothing."""
    probs = log_probs.exp()
    return -torch.where(probs > 0, probs * log_probs, torch.zeros_like(probs)).sum(dim=-1)


def unnormalize_actions(actions: Tensor, stats: Mapping[str, Any]) -> Tensor:
    """Normalized actions [..., A] -> robot units with OpenVLA's q01/q99 rule.

    Dimensions where ``stats["mask"]`` is true map [-1, 1] linearly onto [q01, q99]; the others
    (the gripper, as published) stay as they are. Without a mask every dimension is mapped.
    """
    low = torch.as_tensor(stats["q01"], dtype=torch.float32, device=actions.device)
    high = torch.as_tensor(stats["q99"], dtype=torch.float32, device=actions.device)
    mask = torch.as_tensor(stats.get("mask", [True] * low.numel()), dtype=torch.bool, device=actions.device)
    if not low.shape == high.shape == mask.shape == actions.shape[-1:]:
        raise ValueError(f"action statistics q01 {list(low.shape)}, q99 {list(high.shape)} and mask "
                         f"{list(mask.shape)} must match the action dimension {actions.shape[-1]}")
    robot_units = 0.5 * (actions.float() + 1.0) * (high - low) + low
    return torch.where(mask, robot_units, actions.float())
