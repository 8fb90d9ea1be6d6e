"""The ManiSkill family: ManiSkill3's offline table-top tasks and PutOnPlate, batched on a GPU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vlarl_envs.families import EnvFamily, deferred, registered_kwargs
from vlarl_envs.instructions import InstructionSet
from vlarl_envs.maniskill.instructions import MANISKILL_INSTRUCTIONS

PUT_ON_PLATE = "PutOnPlate"
SEEDED_SPLITS = ("train", "test", "semantic")
"""The splits of ManiSkill's own tasks (``maniskill.episodes.SeededEpisodes``)."""
PANDA_FEATURE_NAMES = {
    "observation.state": [f"joint_{index}" for index in range(1, 8)] + ["gripper_opening"],
    "action": ["delta_x", "delta_y", "delta_z", "delta_roll", "delta_pitch", "delta_yaw", "gripper"],
}
"""The Panda's ``states`` (7 arm joints, gripper opening) and end-effector delta actions, in ManiSkill and GSEnv."""


def maniskill_task(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """A ManiSkill id holds one task; its keywords do not change which."""
    return (registered_kwargs(env_id)["task"],)


def maniskill_splits(env_id: str) -> tuple[str, ...]:
    from vlarl_envs.maniskill.put_on_plate.episodes import SPLIT_STREAMS

    return tuple(SPLIT_STREAMS) if maniskill_task(env_id) == (PUT_ON_PLATE,) else SEEDED_SPLITS


def maniskill_instructions(env_id: str) -> InstructionSet:
    from vlarl_envs.maniskill.put_on_plate.instructions import PUT_ON_PLATE_INSTRUCTIONS

    return PUT_ON_PLATE_INSTRUCTIONS if maniskill_task(env_id) == (PUT_ON_PLATE,) else MANISKILL_INSTRUCTIONS


def maniskill_expert(task: str):
    """PutOnPlate's and PickCube's pick-and-place experts; the other tasks have none."""
    from vlarl_envs.maniskill.experts import pick_cube_expert, put_on_plate_expert

    experts = {PUT_ON_PLATE: put_on_plate_expert, "PickCube": pick_cube_expert}
    return experts[task]() if task in experts else None


def put_on_plate_variation(task: str, split: str, episode_id: int) -> str | None:
    """PutOnPlate reports each out-of-distribution variation (``table``, ``lighting``, ...) on its own; the
    ``train`` split, which varies nothing, has no group."""
    if task != PUT_ON_PLATE or split == "train":
        return None
    from vlarl_envs.maniskill.put_on_plate.episodes import VARIATIONS

    variations = VARIATIONS[split]
    return variations[episode_id % len(variations)]


MANISKILL_FAMILY = EnvFamily(
    name="ManiSkill", tasks=maniskill_task, splits=maniskill_splits, instructions=maniskill_instructions,
    # one batched simulator on the GPU where torch sees CUDA, single envs otherwise
    batched=True, make_episode_envs=deferred("vlarl_envs.maniskill.episode_envs:make_maniskill_episode_envs"),
    expert=maniskill_expert, group=put_on_plate_variation,
    robot_type="panda", feature_names=PANDA_FEATURE_NAMES,
)
