"""Which scripted expert demonstrates which env family: a small registry keyed by env-id prefix.

A family entry says how to build the expert of one task, which tasks an env holds, and what
the dataset should call the robot and the state and action dimensions. ManiSkill and GSEnv
plug in with ``register_expert_family`` once their experts exist in vlarl-envs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

Expert = Callable[[Mapping[str, Any]], np.ndarray]
"""obs -> action in [-1, 1]; built fresh for every episode, so it may keep state."""


@dataclass(frozen=True)
class ExpertFamily:
    """How to demonstrate the envs whose id starts with ``id_prefix``."""

    id_prefix: str
    make_expert: Callable[[str], Expert]
    env_tasks: Callable[[gym.Env], tuple[str, ...]]
    robot_type: str
    feature_names: dict[str, list[str]] = field(default_factory=dict)


def _metaworld_expert(task: str) -> Expert:
    from vlarl_envs.metaworld import scripted_expert

    return scripted_expert(task)


def _metaworld_tasks(env: gym.Env) -> tuple[str, ...]:
    return tuple(env.unwrapped.tasks)


EXPERT_FAMILIES: dict[str, ExpertFamily] = {}


def register_expert_family(family: ExpertFamily) -> None:
    if family.id_prefix in EXPERT_FAMILIES:
        raise ValueError(f"an expert family for env ids {family.id_prefix!r}* is already registered")
    EXPERT_FAMILIES[family.id_prefix] = family


def expert_family(env_id: str) -> ExpertFamily:
    """The family whose prefix the id starts with (``vlarl_envs:`` module prefixes are ignored)."""
    bare_id = env_id.split(":", 1)[-1]
    for prefix, family in EXPERT_FAMILIES.items():
        if bare_id.startswith(prefix):
            return family
    raise ValueError(f"no scripted expert for env id {env_id!r}; expected an id starting with one of "
                     f"{sorted(EXPERT_FAMILIES)}")


register_expert_family(ExpertFamily(
    id_prefix="vlarl/MetaWorld-",
    make_expert=_metaworld_expert,
    env_tasks=_metaworld_tasks,
    robot_type="sawyer",
    feature_names={
        "observation.state": ["hand_x", "hand_y", "hand_z", "gripper_opening"],
        "action": ["delta_x", "delta_y", "delta_z", "gripper_effort"],
    },
))
