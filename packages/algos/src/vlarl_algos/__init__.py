"""vlarl_algos: PPO and GRPO for action-chunk policies as pure torch functions.

Shapes are time first: rewards ``[T, B]`` (chunk level) or ``[T, B, C]`` (action level),
values and dones ``[T + 1, B]``, loss masks ``[T, B]``; per-dimension log-probs
``[*L, C, A]``. Importing this package needs neither gymnasium nor anything else beyond
torch; ``benchmarks/ppo_learner.py`` shows the functions in a whole gymnasium PPO trainer.
"""

from importlib.metadata import version as _installed_version

from vlarl_algos.gae import compute_gae, compute_gae_reference
from vlarl_algos.grpo import group_advantages, group_filter, grpo_advantages, grpo_scores
from vlarl_algos.masks import (
    explained_variance,
    first_done_mask,
    length_normalized_weights,
    masked_mean,
    normalize_advantages,
)
from vlarl_algos.ppo import aggregate_logprobs, entropy_loss, ppo_actor_loss, value_loss
from vlarl_algos.signal import SIGNAL_TOLERANCE, groups_with_signal

__version__ = _installed_version("vlarl-algos")

__all__ = [
    "SIGNAL_TOLERANCE",
    "aggregate_logprobs",
    "compute_gae",
    "compute_gae_reference",
    "entropy_loss",
    "explained_variance",
    "first_done_mask",
    "group_advantages",
    "group_filter",
    "grpo_advantages",
    "grpo_scores",
    "groups_with_signal",
    "length_normalized_weights",
    "masked_mean",
    "normalize_advantages",
    "ppo_actor_loss",
    "value_loss",
]
