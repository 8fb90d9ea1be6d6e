"""The privileged state of a CALVIN env: what a scripted expert plans from, read into named parts.

``privileged_state`` is one flat float32 vector of ``PRIVILEGED_STATE_DIM`` values, the same in every
scene (world frame, metres and radians):

    [0:15]   calvin's ``robot_obs``:
             [0:3] TCP position, [3:6] TCP Euler angles (x, y, z), [6] gripper opening (0.08 open),
             [7:14] the 7 arm joints, [14] the last gripper command (1 open, -1 closed)
    [15:39]  calvin's ``scene_obs`` in scene D's layout:
             [15] sliding door (0 at its right end), [16] drawer (0 closed), [17] button, [18] switch
             (0 down), [19] lightbulb (0 or 1), [20] LED (0 or 1), then [21:27] the red, [27:33] the
             blue and [33:39] the pink block, each position and Euler angles
    [39:51]  fixture points (``vlarl_envs.calvin.simulator.FIXTURE_POINTS``): [39:42] the middle of
             the drawer handle's bar, [42:45] of the sliding door handle's bar, [45:48] of the
             button's top, [48:51] of the switch handle's bar

The fixture points are where the table's moving parts are in this scene and at this moment: scenes
A-D mount the drawer, the door, the button and the switch in different places, and ``scene_obs``
holds only their joints. Nothing here imports the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vlarl_envs.calvin.tasks import BLOCK_COLORS

ROBOT_OBS_DIM, SCENE_OBS_DIM, FIXTURE_POINTS_DIM = 15, 24, 12
PRIVILEGED_STATE_DIM = ROBOT_OBS_DIM + SCENE_OBS_DIM + FIXTURE_POINTS_DIM
BLOCKS_START = 21
"""Index of the red block's position; each block takes 6 values."""


@dataclass(frozen=True)
class Block:
    """A block's pose: the position of its centre and its Euler angles."""

    position: np.ndarray
    euler: np.ndarray

    @property
    def yaw(self) -> float:
        return float(self.euler[2])


@dataclass(frozen=True)
class PrivilegedState:
    """One ``privileged_state``, by name (see the module docstring for the layout)."""

    tcp_position: np.ndarray
    tcp_euler: np.ndarray
    gripper_opening: float
    slider: float
    drawer: float
    button: float
    switch: float
    lightbulb: float
    led: float
    blocks: dict[str, Block]
    drawer_handle: np.ndarray
    slider_handle: np.ndarray
    button_top: np.ndarray
    switch_handle: np.ndarray


def read_privileged_state(vector: np.ndarray) -> PrivilegedState:
    """Name the parts of a ``privileged_state`` vector (``PRIVILEGED_STATE_DIM`` values)."""
    state = np.asarray(vector, dtype=np.float64)
    if state.shape != (PRIVILEGED_STATE_DIM,):
        raise ValueError(f"expected a CALVIN privileged_state of shape ({PRIVILEGED_STATE_DIM},), got {state.shape}")
    blocks = {}
    for index, color in enumerate(BLOCK_COLORS):
        start = BLOCKS_START + 6 * index
        blocks[color] = Block(position=state[start:start + 3], euler=state[start + 3:start + 6])
    fixtures = ROBOT_OBS_DIM + SCENE_OBS_DIM
    return PrivilegedState(
        tcp_position=state[0:3], tcp_euler=state[3:6], gripper_opening=float(state[6]),
        slider=float(state[15]), drawer=float(state[16]), button=float(state[17]), switch=float(state[18]),
        lightbulb=float(state[19]), led=float(state[20]), blocks=blocks,
        drawer_handle=state[fixtures:fixtures + 3], slider_handle=state[fixtures + 3:fixtures + 6],
        button_top=state[fixtures + 6:fixtures + 9], switch_handle=state[fixtures + 9:fixtures + 12],
    )
