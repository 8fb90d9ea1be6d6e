"""The LIBERO family: its ids' tasks, splits, instructions and scripted experts, and what a dataset
calls its robot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vlarl_envs.families import EnvFamily, deferred, registered_kwargs
from vlarl_envs.instructions import InstructionSet


def libero_tasks(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The suite's task names in benchmark order, or the subset ``env_kwargs["tasks"]``."""
    from vlarl_envs.libero.registration import chosen_tasks

    kwargs = registered_kwargs(env_id, env_kwargs)
    return tuple(task.name for task in chosen_tasks(env_id, kwargs["suite"], kwargs.get("tasks")))


def libero_instructions(env_id: str) -> InstructionSet:
    """LIBERO's own sentence for every task of the id's suite; LIBERO gives no paraphrases."""
    from vlarl_envs.libero.registration import chosen_tasks

    tasks = chosen_tasks(env_id, registered_kwargs(env_id)["suite"], None)
    return InstructionSet({task.name: (task.language,) for task in tasks})


def libero_splits(env_id: str) -> tuple[str, ...]:
    """``train``, ``test`` and the LIBERO-Pro OOD splits whose suite is installed complete for the id's suite."""
    from vlarl_envs.libero.suites import LIBERO_SUITES, available_splits

    return available_splits(LIBERO_SUITES[registered_kwargs(env_id)["suite"]].name)


LIBERO_FAMILY = EnvFamily(
    name="LIBERO", tasks=libero_tasks, splits=libero_splits, instructions=libero_instructions,
    expert=deferred("vlarl_envs.libero.experts:scripted_expert"),  # reads privileged_state; None where there is none
    robot_type="panda",
    feature_names={
        "observation.state": ["eef_x", "eef_y", "eef_z", "eef_axis_angle_x", "eef_axis_angle_y",
                              "eef_axis_angle_z", "gripper_finger_left", "gripper_finger_right"],
        "action": ["delta_x", "delta_y", "delta_z", "delta_roll", "delta_pitch", "delta_yaw", "gripper_close"],
    },
)
