"""MetaWorld's scripted experts, reachable as one function: the source of demonstrations."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from vlarl_envs.metaworld.tasks import load_metaworld

# MetaWorld's experts warn on every step that their gains saturate; the env clips anyway.
warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high")

ExpertPolicy = Callable[[Mapping[str, Any]], np.ndarray]


def scripted_expert(task: str) -> ExpertPolicy:
    """The scripted expert of a MetaWorld v3 task as ``obs -> action``.

    The returned function reads ``obs["privileged_state"]`` (object and goal positions) and
    returns a float32 action in [-1, 1] that the env accepts as is.

    >>> expert = scripted_expert("reach-v3")          # doctest: +SKIP
    >>> action = expert(obs)                           # doctest: +SKIP
    """
    experts = load_metaworld().EXPERTS
    if task not in experts:
        raise ValueError(f"no scripted expert for MetaWorld task {task!r}; expected one of {sorted(experts)}")
    policy = experts[task]()

    def act(observation: Mapping[str, Any]) -> np.ndarray:
        state = np.asarray(observation["privileged_state"], dtype=np.float64)
        return np.clip(policy.get_action(state), -1.0, 1.0).astype(np.float32)

    return act
