"""A scripted pick-and-place for GSEnv PutCubeOnPlate, read off ``privileged_state``.

It is a function of the current observation only (no memory), so it can take over at any
step: hover over the cube with the fingers square to its faces, descend, close, lift,
carry over the plate, lower, open, back off.
"""

from __future__ import annotations

import numpy as np

from vlarl_envs.gsenv.layout import CUBE_HALF_SIZE, PLATE_HALF_THICKNESS, SUCCESS_XY_DISTANCE

HOVER_HEIGHT = 0.10
"""Above the cube's centre while lining up, and the carrying height of the TCP (m)."""
CARRY_HEIGHT = 0.14
RELEASE_CLEARANCE = 0.015
"""Gap (m) left between the held cube's bottom face and the plate when the gripper opens."""
POSITION_GAIN = 0.6
"""Fraction of the remaining position error commanded per step (the controller's unit is 10 cm)."""
ROTATION_GAIN = 0.6
ALIGNED = 0.012
"""Horizontal error (m) under which the TCP counts as over its goal."""


def _yaw(quaternion: np.ndarray) -> float:
    """Heading of the body x axis in the world xy plane, from a (w, x, y, z) quaternion."""
    w, x, y, z = quaternion
    return float(np.arctan2(2 * (x * y + w * z), 1 - 2 * (y * y + z * z)))


def _quarter_turn_error(target: float, current: float) -> float:
    """The smallest rotation about z taking ``current`` to ``target`` modulo 90 degrees."""
    return float((target - current + np.pi / 4) % (np.pi / 2) - np.pi / 4)


def pick_and_place_action(observation: dict) -> np.ndarray:
    """One normalized 7-D action for the current observation of GSEnv PutCubeOnPlate."""
    state = np.asarray(observation["privileged_state"], dtype=np.float64)
    tcp, tcp_quat = state[0:3], state[3:7]
    cube, cube_quat = state[7:10], state[10:14]
    plate, grasped = state[14:17], state[17] > 0.5

    open_gripper, closed_gripper = 1.0, -1.0
    yaw_error = 0.0
    cube_to_plate = np.linalg.norm(cube[:2] - plate[:2])
    if grasped:
        gripper = closed_gripper
        if tcp[2] < cube[2] + 0.05 and np.linalg.norm(plate[:2] - tcp[:2]) > ALIGNED and cube[2] < CARRY_HEIGHT - 0.05:
            goal = np.array([tcp[0], tcp[1], CARRY_HEIGHT])  # lift straight up first
        elif np.linalg.norm(plate[:2] - tcp[:2]) > ALIGNED:
            goal = np.array([plate[0], plate[1], CARRY_HEIGHT])
        else:
            release_z = plate[2] + PLATE_HALF_THICKNESS + CUBE_HALF_SIZE + RELEASE_CLEARANCE + (tcp[2] - cube[2])
            goal = np.array([plate[0], plate[1], release_z])
            if tcp[2] <= release_z + 0.01:
                gripper = open_gripper
    elif cube_to_plate <= SUCCESS_XY_DISTANCE and cube[2] > plate[2]:
        goal, gripper = np.array([tcp[0], tcp[1], CARRY_HEIGHT]), open_gripper  # placed: back off
    else:
        yaw_error = _quarter_turn_error(_yaw(cube_quat), _yaw(tcp_quat))
        lined_up = np.linalg.norm(cube[:2] - tcp[:2]) <= ALIGNED and abs(yaw_error) < 0.05
        if not lined_up:
            goal, gripper = np.array([cube[0], cube[1], cube[2] + HOVER_HEIGHT]), open_gripper
        elif tcp[2] > cube[2] + 0.005:
            goal, gripper = cube.copy(), open_gripper
        else:
            goal, gripper = cube.copy(), closed_gripper
    action = np.zeros(7, dtype=np.float32)
    action[:3] = np.clip(POSITION_GAIN * (goal - tcp) / 0.1, -1, 1)
    action[5] = np.clip(-ROTATION_GAIN * yaw_error / 0.1, -1, 1)
    action[6] = gripper
    return action
