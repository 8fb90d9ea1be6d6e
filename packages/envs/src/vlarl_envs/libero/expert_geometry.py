"""The hand's and the grasp's geometry, shared by LIBERO's scripted experts (``vlarl_envs.libero.experts``):
the hand pointing down and its yaw, the rotation between two orientations as robosuite's axis-angle, and where
and across which direction the fingers close on an object (across a narrow object, on a bowl's rim).
"""

from __future__ import annotations

import numpy as np

from vlarl_envs.libero.privileged import Entity

TOWARDS_ROBOT = np.array([-1.0, 0.0, 0.0])
"""LIBERO mounts the robot at the table's -x edge, facing +x."""
HAND_DOWN = np.diag([1.0, -1.0, -1.0])
"""The hand pointing straight down with its fingers closing along world y (LIBERO's start pose)."""

MAX_GRASP_WIDTH = 0.07
"""Widest side (m) grasped across whole; the Panda's fingers open to about 0.078."""
GRASP_DEPTH = 0.035
"""How far below an object's top the fingertips close (m), at most."""
RIM_DEPTH = 0.02
"""How far below a bowl's rim the fingertips close (m)."""
RIM_INSET = 0.008
"""How far inside a bowl's outer radius the fingers centre on its wall (m)."""
FLOOR_CLEARANCE = 0.012
"""Lowest fingertip height above an object's bottom (m): lower, they press on its support."""


def yaw_across(direction: np.ndarray, current_yaw: float) -> float:
    """The hand yaw closing the fingers along the horizontal ``direction``, the nearest to
    ``current_yaw`` of its two (half a turn apart)."""
    wanted = float(np.arctan2(direction[0], -direction[1]))
    return current_yaw + float((wanted - current_yaw + np.pi / 2) % np.pi - np.pi / 2)


def hand_yaw(rotation: np.ndarray) -> float:
    """The yaw of a downward hand, as ``downward_hand`` turns it: its finger axis (its own y axis)
    is (sin yaw, -cos yaw) in the world."""
    finger_axis = rotation[:, 1]
    return float(np.arctan2(finger_axis[0], -finger_axis[1]))


def downward_hand(yaw: float) -> np.ndarray:
    """The rotation of the hand pointing down, turned by ``yaw`` about world z."""
    cosine, sine = np.cos(yaw), np.sin(yaw)
    return np.array([[cosine, -sine, 0.0], [sine, cosine, 0.0], [0.0, 0.0, 1.0]]) @ HAND_DOWN


def over(hand_position: np.ndarray, waypoint: np.ndarray) -> np.ndarray:
    """``waypoint``, or while the hand is not yet above it, the point above it at the hand's height
    if that is higher: the hand comes down only over its goal, never sweeping low over the scene."""
    if np.linalg.norm(hand_position[:2] - waypoint[:2]) < 0.03:
        return waypoint
    return np.append(waypoint[:2], max(hand_position[2], waypoint[2]))


def rotation_vector(rotation: np.ndarray) -> np.ndarray:
    """The axis-angle (3,) of a rotation matrix."""
    cosine = np.clip((np.trace(rotation) - 1) / 2, -1.0, 1.0)
    angle = float(np.arccos(cosine))
    if angle < 1e-6:
        return np.zeros(3)
    axis = np.array([rotation[2, 1] - rotation[1, 2], rotation[0, 2] - rotation[2, 0], rotation[1, 0] - rotation[0, 1]])
    norm = np.linalg.norm(axis)
    return axis / norm * angle if norm > 1e-9 else np.zeros(3)


def spans(entity: Entity) -> bool:
    """Whether the open gripper spans the object across some side, however it lies: a box's second
    largest size fits (a bowl's and a plate's do not)."""
    return 2 * float(np.sort(entity.box_half)[1]) <= MAX_GRASP_WIDTH


def horizontal_axes(entity: Entity) -> list[tuple[np.ndarray, float]]:
    """The two box axes nearest the horizontal, each as a horizontal unit vector and the box's
    half-size along it, narrowest first."""
    axes = sorted(range(3), key=lambda axis: abs(entity.rotation[2, axis]))[:2]
    found = []
    for axis in axes:
        flat = entity.rotation[:2, axis]
        found.append((np.append(flat / np.linalg.norm(flat), 0.0), float(entity.box_half[axis])))
    return sorted(found, key=lambda pair: pair[1])


def grasp_direction(entity: Entity, hand_position: np.ndarray, attempt: int) -> np.ndarray:
    """The horizontal direction the fingers close along: across the narrow side of an object the
    gripper spans; else radially on a rim, first the side nearest the hand, then, should that grasp
    fail (the hand, long along its finger axis, catching on what stands by: a cabinet's top over
    a drawer), the sides facing towards and away from the robot in turn."""
    if spans(entity):
        return horizontal_axes(entity)[0][0]
    toward_hand = np.append(hand_position[:2] - entity.box_world_center[:2], 0.0)
    candidates = (toward_hand / max(np.linalg.norm(toward_hand), 1e-6), TOWARDS_ROBOT, -TOWARDS_ROBOT)
    return candidates[attempt % len(candidates)]


def rim(entity: Entity) -> tuple[np.ndarray, np.ndarray, float]:
    """The rim circle of a bowl, however it is tilted: centre, normal and radius.

    The bowl's axis is its box's shortest; its body origin sits at the base, so the box centre lies
    towards the opening.
    """
    axis = int(np.argmin(entity.box_half))
    opening = np.zeros(3)
    opening[axis] = 1.0 if entity.box_center[axis] >= 0 else -1.0
    center = entity.position + entity.rotation @ (entity.box_center + opening * entity.box_half[axis])
    radius = float(np.delete(entity.box_half, axis).min())
    return center, entity.rotation @ opening, radius


def grasp_point(entity: Entity, direction: np.ndarray) -> np.ndarray:
    """Where the fingertips close: the centre, a little below the top, of an object the gripper
    spans; else on the rim towards ``direction``, one finger in the bowl and one outside."""
    if spans(entity):
        center = entity.box_world_center
        height = max(center[2], entity.top - GRASP_DEPTH, entity.bottom + FLOOR_CLEARANCE)
        return np.array([center[0], center[1], height])
    center, normal, radius = rim(entity)
    along_rim = direction - normal * float(direction @ normal)
    point = center + along_rim / np.linalg.norm(along_rim) * (radius - RIM_INSET)
    point[2] -= RIM_DEPTH
    return point
