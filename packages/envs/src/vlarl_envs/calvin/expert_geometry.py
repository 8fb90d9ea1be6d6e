"""Rotations and the play table's fixed geometry, shared by CALVIN's scripted experts
(``vlarl_envs.calvin.experts``): Euler angles as pybullet reads them, the hand's orientation over a point
(tilted outwards far from the arm) and whether a block lies on the table or on the sliding cabinet's shelf.
Both the fixture and the block experts use it, so it has a module of its own.
"""

from __future__ import annotations

import numpy as np

from vlarl_envs.calvin.privileged import Block

ROBOT_BASE = np.array([-0.34, -0.46])
"""Where the arm stands (x, y), the same in scenes A-D."""
REACH_TILT_START, REACH_TILT_FULL = 0.6, 0.8
"""Horizontal distances (m) from the arm's base between which the hand tilts outwards, from pointing
straight down up to ``REACH_TILT``: out there the hand straight down is beyond calvin's inverse
kinematics by up to 6 cm."""
REACH_TILT = 0.3
TABLE_TOP = 0.44
"""Height of the table top and of the sliding cabinet's shelf (m), the same in scenes A-D."""


def wrapped(angle: np.ndarray | float) -> np.ndarray:
    """Angles in [-pi, pi)."""
    return (np.asarray(angle) + np.pi) % (2 * np.pi) - np.pi


def rotation_of(euler: np.ndarray) -> np.ndarray:
    """The rotation matrix of Euler angles as pybullet reads them (x, then y, then z, about world axes)."""
    roll, pitch, yaw = euler
    about_x = np.array([[1, 0, 0], [0, np.cos(roll), -np.sin(roll)], [0, np.sin(roll), np.cos(roll)]])
    about_y = np.array([[np.cos(pitch), 0, np.sin(pitch)], [0, 1, 0], [-np.sin(pitch), 0, np.cos(pitch)]])
    about_z = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
    return about_z @ about_y @ about_x


def euler_of(rotation: np.ndarray) -> np.ndarray:
    """The Euler angles (x, y, z) of a rotation matrix, ``rotation_of``'s inverse away from pitch +-pi/2."""
    pitch = -np.arcsin(np.clip(rotation[2, 0], -1.0, 1.0))
    return np.array([np.arctan2(rotation[2, 1], rotation[2, 2]), pitch, np.arctan2(rotation[1, 0], rotation[0, 0])])


def axis_rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """The rotation by ``angle`` about the unit ``axis`` (Rodrigues)."""
    cross = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * cross + (1 - np.cos(angle)) * cross @ cross


def angle_between(first: np.ndarray, second: np.ndarray) -> float:
    """The rotation (rad) between two orientations given as Euler angles."""
    relative = rotation_of(first).T @ rotation_of(second)
    return float(np.arccos(np.clip((np.trace(relative) - 1) / 2, -1.0, 1.0)))


def hand_down(yaw: float) -> np.ndarray:
    """Euler angles of the hand pointing straight down, its fingers closing along (sin yaw, -cos yaw)."""
    return np.array([np.pi, 0.0, yaw])


def reaching_hand(yaw: float, point: np.ndarray) -> np.ndarray:
    """``hand_down(yaw)``, tilted about the horizontal axis square to the direction from the arm's base to
    ``point`` so that the fingertips lean away from the base when ``point`` is far from it (see
    ``REACH_TILT``)."""
    radial = point[:2] - ROBOT_BASE
    distance = float(np.linalg.norm(radial))
    share = np.clip((distance - REACH_TILT_START) / (REACH_TILT_FULL - REACH_TILT_START), 0.0, 1.0)
    if share == 0.0:
        return hand_down(yaw)
    tilt_axis = np.array([-radial[1], radial[0], 0.0]) / distance
    return euler_of(axis_rotation(tilt_axis, -REACH_TILT * share) @ rotation_of(hand_down(yaw)))


def nearest_turn(angle: float, current: float, period: float = np.pi) -> float:
    """The angle equal to ``angle`` up to whole ``period``s that is nearest to ``current``."""
    return current + float((angle - current + period / 2) % period - period / 2)


def on_table(block: Block) -> bool:
    """Whether a block lies on the table top (the table's free area is in front of the sliding cabinet,
    y < 0; the drawer is lower)."""
    return bool(block.position[1] < 0.0 and block.position[2] > TABLE_TOP)


def on_shelf(block: Block) -> bool:
    """Whether a block lies in the sliding cabinet, on its shelf."""
    return bool(block.position[1] > 0.03 and block.position[2] > TABLE_TOP)
