"""Scripted experts for PutOnPlate and PickCube: the source of demonstrations.

They act in the env's default action space (7-D end-effector delta pose + gripper, Panda
``pd_ee_delta_pose``), so recorded episodes train a policy as they are. ManiSkill's motion
planners (mplib) output joint-position trajectories instead, which a delta-pose policy
cannot imitate; hence a closed-loop end-effector script: hover over the grasp point with
the fingers across the object, descend, close, lift, carry, lower, open, retreat. Every
step re-reads the object from ``obs["privileged_state"]``, so a target that is moved
mid-episode is followed, and a dropped one is picked up again.

>>> expert = put_on_plate_expert()                                     # doctest: +SKIP
>>> obs, _ = env.reset(options={"episode_id": 3}); expert.reset()      # doctest: +SKIP
>>> obs, *_ = env.step(expert(obs))                                    # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

POSITION_STEP = 0.1
"""Metres per unit of the position action (Panda pd_ee_delta_pose limits)."""
ROTATION_STEP = -0.1
"""Radians per unit of the rotation action, about world axes. Measured on ManiSkill 3.0.1:
a positive rotation action turns the TCP the negative way about the world axis (the
controller's target is exactly -0.1 rad per unit), hence the sign."""
DOWN = np.array([0.0, 1.0, 0.0, 0.0])
"""TCP orientation (wxyz) pointing straight down; its fingers then close along world y."""

PUT_ON_PLATE_LAYOUT = {
    "tcp_pose": slice(-23, -16),
    "target_pose": slice(-16, -9),
    "grasp_point": slice(-9, -6),
    "grasp_yaw": -6,
    "grasp_height": -5,
    "plate_position": slice(-4, -1),  # centre of the plate's top surface
    "is_grasped": -1,
}
"""Where PutOnPlate's task facts sit at the end of ``privileged_state`` (ManiSkill's state
vector: robot qpos and qvel, then the task's extra observations)."""

PICK_CUBE_LAYOUT = {
    "is_grasped": -24,
    "tcp_pose": slice(-23, -16),
    "goal_position": slice(-16, -13),
    "cube_pose": slice(-13, -6),
}
"""The same for ManiSkill's PickCube-v1 (extra: is_grasped, tcp_pose, goal_pos, obj_pose,
tcp_to_obj_pos, obj_to_goal_pos)."""

HOVER = 0.08
MIN_CARRY_HEIGHT = 0.1
MIN_GRASP_HEIGHT = 0.02
"""Lowest TCP height for a grasp: below it the fingertips press on the table."""
CUBE_HALF_SIZE = 0.02
PLACE_CLEARANCE = 0.015
"""How far above the plate the object's bottom is when the gripper opens."""


@dataclass(frozen=True)
class Goal:
    """What one step of a pick-and-place needs to know, read from the privileged state.

    Attributes:
        tcp_pose: (7,) TCP position and wxyz orientation.
        grasp_point: (3,) where the fingertips should meet.
        closing_yaw: direction (world xy, radians) the fingers should close along.
        symmetry: the object looks the same after turning by this angle (pi or pi/2).
        grasped: whether the fingers hold the object.
        destination: (3,) where the TCP should carry the object.
        release: open the gripper at the destination (place) or hold still there (pick).
    """

    tcp_pose: np.ndarray
    grasp_point: np.ndarray
    closing_yaw: float
    symmetry: float
    grasped: bool
    destination: np.ndarray
    release: bool


def read_put_on_plate(privileged: np.ndarray) -> Goal:
    layout = PUT_ON_PLATE_LAYOUT
    plate_top = privileged[layout["plate_position"]]
    grasp_height = float(privileged[layout["grasp_height"]])
    destination = plate_top + np.array([0.0, 0.0, grasp_height + PLACE_CLEARANCE])
    return Goal(
        tcp_pose=privileged[layout["tcp_pose"]],
        grasp_point=privileged[layout["grasp_point"]],
        closing_yaw=float(privileged[layout["grasp_yaw"]]),
        symmetry=np.pi,
        grasped=bool(privileged[layout["is_grasped"]] > 0.5),
        destination=destination,
        release=True,
    )


def read_pick_cube(privileged: np.ndarray) -> Goal:
    layout = PICK_CUBE_LAYOUT
    cube = privileged[layout["cube_pose"]]
    return Goal(
        tcp_pose=privileged[layout["tcp_pose"]],
        grasp_point=cube[:3],
        closing_yaw=yaw_of(cube[3:]),
        symmetry=np.pi / 2,
        grasped=bool(privileged[layout["is_grasped"]] > 0.5),
        destination=privileged[layout["goal_position"]],
        release=False,
    )


class PickAndPlaceExpert:
    """A closed-loop pick-and-place script over ``pd_ee_delta_pose``.

    Call ``reset()`` at the start of each episode, then ``expert(obs)`` each step.

    Args:
        read_goal: privileged state -> ``Goal``.
        gain: fraction of the remaining position error commanded per step.
    """

    CLOSE_STEPS = 6
    RELEASE_STEPS = 4

    def __init__(self, read_goal: Callable[[np.ndarray], Goal], gain: float = 0.9) -> None:
        self.read_goal = read_goal
        self.gain = gain
        self.reset()

    def reset(self) -> None:
        self.phase = "approach"
        self._counter = 0

    def __call__(self, observation: Mapping[str, Any]) -> np.ndarray:
        goal = self.read_goal(np.asarray(observation["privileged_state"], dtype=np.float64))
        grasp = goal.grasp_point.copy()
        grasp[2] = max(grasp[2], MIN_GRASP_HEIGHT)
        position = goal.tcp_pose[:3]
        yaw = self._target_yaw(goal)
        hover = grasp + [0.0, 0.0, HOVER]
        misaligned = np.linalg.norm(position[:2] - grasp[:2]) > 0.015

        if self.phase in ("lift", "carry", "lower") and not goal.grasped:
            self.phase = "approach"  # dropped it: start over from above
        if self.phase == "descend" and misaligned:
            self.phase = "approach"  # the object moved away: go back up over it

        if self.phase == "approach":
            above = np.linalg.norm(position[:2] - hover[:2]) < 0.03
            waypoint = hover if above else np.append(hover[:2], max(position[2], hover[2]))  # no sweeping low
            if np.linalg.norm(position - hover) < 0.01 and abs(self._yaw_error(goal, yaw)) < 0.05:
                self.phase = "descend"
            return self._action(goal, waypoint, yaw, gripper=1.0)
        if self.phase == "descend":
            if abs(position[2] - grasp[2]) < 0.008:
                self.phase, self._counter = "close", 0
            return self._action(goal, grasp, yaw, gripper=1.0)
        if self.phase == "close":
            self._counter += 1
            if self._counter >= self.CLOSE_STEPS:
                self.phase = "lift" if goal.grasped else "approach"
            return self._action(goal, position, yaw, gripper=-1.0)
        carry_height = max(goal.destination[2] + (HOVER if goal.release else 0.0), MIN_CARRY_HEIGHT)
        carry = np.append(goal.destination[:2], carry_height)
        if self.phase == "lift":
            lift = np.append(position[:2], carry[2])
            if position[2] > carry[2] - 0.02:
                self.phase = "carry"
            return self._action(goal, lift, yaw, gripper=-1.0)
        if self.phase == "carry":
            if np.linalg.norm(position[:2] - carry[:2]) < 0.01:
                self.phase = "lower"
            return self._action(goal, carry, yaw, gripper=-1.0)
        if self.phase == "lower":
            if goal.release and np.linalg.norm(position - goal.destination) < 0.008:
                self.phase, self._counter = "release", 0
            return self._action(goal, goal.destination, yaw, gripper=-1.0)
        if self.phase == "release":
            self._counter += 1
            if self._counter >= self.RELEASE_STEPS:
                self.phase = "retreat"
            return self._action(goal, position, yaw, gripper=1.0)
        return self._action(goal, np.append(position[:2], goal.destination[2] + HOVER), yaw, gripper=1.0)

    def _target_yaw(self, goal: Goal) -> float:
        """TCP yaw that closes the fingers along ``closing_yaw``, the nearest of its symmetric copies."""
        wanted = goal.closing_yaw - np.pi / 2
        current = tcp_yaw(goal.tcp_pose[3:])
        return current + _wrap(wanted - current, goal.symmetry)

    def _yaw_error(self, goal: Goal, yaw: float) -> float:
        return _wrap(yaw - tcp_yaw(goal.tcp_pose[3:]), 2 * np.pi)

    def _action(self, goal: Goal, waypoint: np.ndarray, yaw: float, gripper: float) -> np.ndarray:
        translation = np.clip(self.gain * (waypoint - goal.tcp_pose[:3]) / POSITION_STEP, -1.0, 1.0)
        desired = quaternion_multiply(np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]), DOWN)
        rotation = np.clip(rotation_vector(desired, goal.tcp_pose[3:]) / ROTATION_STEP, -1.0, 1.0)
        return np.concatenate([translation, rotation, [gripper]]).astype(np.float32)


def put_on_plate_expert() -> PickAndPlaceExpert:
    """The expert of ``vlarl/ManiSkill-PutOnPlate-v0``."""
    return PickAndPlaceExpert(read_put_on_plate)


def pick_cube_expert() -> PickAndPlaceExpert:
    """The expert of ``vlarl/ManiSkill-PickCube-v1``: grasp the cube, hold it at the goal."""
    return PickAndPlaceExpert(read_pick_cube)


def quaternion_multiply(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Hamilton product of wxyz quaternions."""
    w1, x1, y1, z1 = left
    w2, x2, y2, z2 = right
    return np.array([
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    ])


def rotation_vector(desired: np.ndarray, current: np.ndarray) -> np.ndarray:
    """World-frame axis * angle turning orientation ``current`` into ``desired`` (wxyz)."""
    error = quaternion_multiply(desired, current * [1.0, -1.0, -1.0, -1.0])
    if error[0] < 0:
        error = -error
    sine = np.linalg.norm(error[1:])
    if sine < 1e-9:
        return np.zeros(3)
    return error[1:] / sine * 2 * np.arctan2(sine, error[0])


def yaw_of(quaternion: np.ndarray) -> float:
    """Heading of a wxyz quaternion (rotation about world z)."""
    w, x, y, z = quaternion
    return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


def tcp_yaw(quaternion: np.ndarray) -> float:
    """Yaw of a (roughly) downward TCP orientation, in the frame where ``DOWN`` has yaw 0."""
    return yaw_of(quaternion_multiply(quaternion, DOWN * [1.0, -1.0, -1.0, -1.0]))


def _wrap(angle: float, period: float) -> float:
    """``angle`` shifted by a multiple of ``period`` into [-period/2, period/2)."""
    return float((angle + period / 2) % period - period / 2)
