"""The geometry of PutCubeOnPlate and the random layout of each episode.

Everything here is plain numbers (no simulator), so the episode an ``episode_id`` gives can be
computed, tested and replayed without ManiSkill. The world frame is the robot base frame:
x forward, y left, z up, the table top at z = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TASK_NAME = "PutCubeOnPlate"
INSTRUCTION = "pick up the cube and put it on the plate"

CUBE_HALF_SIZE = 0.02
PLATE_RADIUS = 0.09
PLATE_HALF_THICKNESS = 0.006
TABLE_HALF_SIZE = (0.8, 0.8, 0.02)
TABLE_CENTRE = (0.3, 0.0, -0.02)

CUBE_X_RANGE = (0.40, 0.58)
CUBE_Y_RANGE = (0.08, 0.22)
PLATE_X_RANGE = (0.42, 0.58)
PLATE_Y_RANGE = (-0.18, -0.06)

SUCCESS_XY_DISTANCE = 0.07
"""The cube's centre is within this horizontal distance (m) of the plate's centre."""
SUCCESS_HEIGHT_RANGE = (0.0, 0.07)
"""The cube's centre is this far (m) above the plate's centre."""

CAMERA_EYE = (1.25, -0.6, 0.8)
CAMERA_TARGET = (0.32, 0.0, 0.15)
REFERENCE_IMAGE_SIZE = (480, 640)
"""(H, W) of the real camera the default view imitates."""
REFERENCE_FOCAL = 560.0
"""Focal length in pixels at REFERENCE_IMAGE_SIZE; other sizes keep the vertical field of view."""

SPLIT_STREAMS = {"train": 0, "test": 1, "robustness": 1}
"""Layout stream per split: ``train`` and ``test`` never share initial states; ``robustness``
replays ``test``'s under visual variations (``vlarl_envs.gsenv.robustness``)."""


@dataclass(frozen=True)
class Layout:
    """Where one episode starts.

    Attributes:
        cube_xy: (x, y) of the cube's centre on the table.
        cube_yaw: the cube's rotation about z (radians).
        plate_xy: (x, y) of the plate's centre.
    """

    cube_xy: tuple[float, float]
    cube_yaw: float
    plate_xy: tuple[float, float]


def sample_layout(split: str, episode_id: int) -> Layout:
    """The layout of episode ``episode_id`` of ``split``; the same arguments give the same layout."""
    rng = np.random.default_rng([SPLIT_STREAMS[split], int(episode_id)])
    return Layout(
        cube_xy=(float(rng.uniform(*CUBE_X_RANGE)), float(rng.uniform(*CUBE_Y_RANGE))),
        cube_yaw=float(rng.uniform(-np.pi / 4, np.pi / 4)),
        plate_xy=(float(rng.uniform(*PLATE_X_RANGE)), float(rng.uniform(*PLATE_Y_RANGE))),
    )


def camera_intrinsics(height: int, width: int) -> np.ndarray:
    """(3, 3) intrinsics of the default camera at ``height`` x ``width`` (square pixels, centred)."""
    focal = REFERENCE_FOCAL * height / REFERENCE_IMAGE_SIZE[0]
    return np.array([[focal, 0.0, width / 2], [0.0, focal, height / 2], [0.0, 0.0, 1.0]])

