"""The CALVIN family: its ids' tasks, splits, instructions and scripted experts, and what a dataset calls its
robot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vlarl_envs.families import EnvFamily, deferred, registered_kwargs
from vlarl_envs.instructions import InstructionSet


def calvin_tasks(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """CALVIN's 34 tasks in calvin's order, or the subset ``env_kwargs["tasks"]``."""
    from vlarl_envs.calvin.registration import chosen_tasks

    return chosen_tasks(env_id, registered_kwargs(env_id, env_kwargs).get("tasks"))


def calvin_instructions(env_id: str) -> InstructionSet:
    """CALVIN's validation sentence per task, its training sentences as paraphrases."""
    from vlarl_envs.calvin.assets import calvin_instructions as read_annotations

    return read_annotations()


def calvin_splits(env_id: str) -> tuple[str, ...]:
    from vlarl_envs.calvin.env import SPLITS

    return SPLITS


CALVIN_FAMILY = EnvFamily(
    name="CALVIN", tasks=calvin_tasks, splits=calvin_splits, instructions=calvin_instructions,
    expert=deferred("vlarl_envs.calvin.experts:scripted_expert"),  # reads privileged_state; None where there is none
    robot_type="panda",
    feature_names={
        "observation.state": ["tcp_x", "tcp_y", "tcp_z", "tcp_roll", "tcp_pitch", "tcp_yaw", "gripper_opening",
                              *(f"joint_{index}" for index in range(7)), "gripper_command"],
        "action": ["delta_x", "delta_y", "delta_z", "delta_roll", "delta_pitch", "delta_yaw", "gripper_open"],
    },
)
