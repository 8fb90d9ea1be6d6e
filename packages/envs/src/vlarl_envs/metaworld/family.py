"""The MetaWorld family: its ids' tasks, experts, splits and difficulty groups."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vlarl_envs.families import EnvFamily, deferred, registered_kwargs
from vlarl_envs.metaworld.instructions import METAWORLD_INSTRUCTIONS
from vlarl_envs.metaworld.tasks import difficulty_of


def metaworld_tasks(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """One task for ``vlarl/MetaWorld-<task>``, the suite's for ``vlarl/MetaWorld-<suite>-v3``, or the
    subset ``env_kwargs["tasks"]`` of the suite's."""
    from vlarl_envs.metaworld.registration import chosen_tasks

    kwargs = registered_kwargs(env_id, env_kwargs)
    return chosen_tasks(env_id, kwargs.get("task"), kwargs.get("suite"), kwargs.get("tasks"))


def metaworld_splits(env_id: str) -> tuple[str, ...]:
    from vlarl_envs.metaworld.env import SPLIT_STREAMS  # the env module sets MuJoCo's GL backend on import

    return tuple(SPLIT_STREAMS)


METAWORLD_FAMILY = EnvFamily(
    name="MetaWorld", tasks=metaworld_tasks, splits=metaworld_splits,
    instructions=lambda env_id: METAWORLD_INSTRUCTIONS, expert=deferred("vlarl_envs.metaworld.experts:scripted_expert"),
    group=lambda task, split, episode_id: difficulty_of(task),
    robot_type="sawyer",
    feature_names={
        "observation.state": ["hand_x", "hand_y", "hand_z", "gripper_opening"],
        "action": ["delta_x", "delta_y", "delta_z", "gripper_effort"],
    },
)
