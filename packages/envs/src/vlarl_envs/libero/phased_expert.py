"""``PhasedExpert``, the state machine every scripted LIBERO expert (``vlarl_envs.libero.experts``) is built
on, with the scale and gains of robosuite's OSC_POSE deltas and the tolerances the experts move by.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from vlarl_envs.libero.expert_geometry import HAND_DOWN, rotation_vector
from vlarl_envs.libero.privileged import PrivilegedState, read_privileged_state

POSITION_STEP = 0.05
"""Metres per unit of the position action (robosuite's OSC_POSE ``output_max``)."""
ROTATION_STEP = 0.5
"""Radians per unit of the rotation action, an axis-angle about the world axes."""
OPEN, CLOSE = -1.0, 1.0
"""LIBERO's gripper action: -1 opens, +1 closes."""
APPROACH_HEIGHT = 0.10
"""Height above the grasp point of the approach waypoint (m)."""
POSITION_GAIN = 2.0
"""Position action per unit of remaining error (in ``POSITION_STEP``s): above 1, since the
controller lags its target and stops short of it under load."""
ROTATION_GAIN = 1.0
CLOSE_STEPS = 10
"""Steps the fingers take to close on an object."""
RELEASE_STEPS = 8
"""Steps the fingers take to open off an object."""
ARRIVED = 0.015
"""Distance (m) from a waypoint at which the hand counts as there."""
ALIGNED = 0.08
"""Rotation (rad) from the wanted orientation under which the hand counts as turned."""


class PhasedExpert:
    """A state machine over the hand: each step runs the method ``_<phase>`` of the current phase.

    It turns the hand to ``orientation`` (pointing down unless a phase says otherwise) and notices
    when the hand has stopped moving (pressed on something, or at the end of its reach), which ends
    a phase as well as reaching its goal does.
    """

    STALL_STEPS = 6
    STALL_DISTANCE = 0.002
    """The hand stalls when it moves less than this (m) over ``STALL_STEPS`` steps."""

    def __init__(self, first_phase: str) -> None:
        self.orientation = HAND_DOWN
        self.recent: list[np.ndarray] = []
        self.enter(first_phase)

    def enter(self, phase: str) -> None:
        self.phase, self.steps_in_phase = phase, 0

    def stalled(self) -> bool:
        """Whether the hand has barely moved over the last steps of this phase."""
        if self.steps_in_phase < self.STALL_STEPS:
            return False
        return float(np.linalg.norm(self.recent[-1] - self.recent[-self.STALL_STEPS])) < self.STALL_DISTANCE

    def __call__(self, observation: Mapping[str, Any]) -> np.ndarray:
        state = read_privileged_state(observation["privileged_state"])
        self.recent = [*self.recent[-self.STALL_STEPS:], state.hand_position]
        self.steps_in_phase += 1
        return getattr(self, f"_{self.phase}")(state)

    def turning(self, state: PrivilegedState) -> np.ndarray:
        """The rotation (axis-angle, world) from the hand's orientation to ``orientation``."""
        return rotation_vector(self.orientation @ state.hand_rotation.T)

    def arrived(self, state: PrivilegedState, waypoint: np.ndarray) -> bool:
        """Whether the hand is at ``waypoint`` and turned to ``orientation``."""
        turned = float(np.linalg.norm(self.turning(state))) < ALIGNED
        return float(np.linalg.norm(state.hand_position - waypoint)) < ARRIVED and turned

    def move(self, state: PrivilegedState, goal: np.ndarray, gripper: float) -> np.ndarray:
        """The action taking the hand towards ``goal`` and ``orientation``, with the gripper command."""
        action = np.zeros(7, dtype=np.float32)
        action[:3] = np.clip(POSITION_GAIN * (goal - state.hand_position) / POSITION_STEP, -1.0, 1.0)
        error = self.turning(state)
        action[3:6] = np.clip(ROTATION_GAIN * error / ROTATION_STEP, -1.0, 1.0)
        action[6] = gripper
        return action
