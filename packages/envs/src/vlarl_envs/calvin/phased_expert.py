"""``PhasedExpert``, the state machine every scripted CALVIN expert (``vlarl_envs.calvin.experts``) is built
on, with the scale of calvin's relative actions and the tolerances the experts move by.

calvin's robot integrates those actions into a target pose that its inverse kinematics tracks
(``use_target_pose``), so an expert keeps its own copy of that target, starting from the hand's pose at the
episode's first observation, and steps it towards each waypoint by at most the action's bound: a hand held
back by a handle or a block never winds the target up beyond where the expert wants it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from vlarl_envs.calvin.expert_geometry import angle_between, wrapped
from vlarl_envs.calvin.privileged import PrivilegedState, read_privileged_state

POSITION_STEP = 0.02
"""Metres per unit of the position action (calvin's ``max_rel_pos``)."""
ROTATION_STEP = 0.05
"""Radians per unit of the Euler-angle action (calvin's ``max_rel_orn``)."""
OPEN, CLOSE = 1.0, -1.0
"""The gripper action: open where positive."""
TRAVEL_SPEED = 0.75
"""Fraction of the action's bound the target moves by in free space: at full speed the arm lags its
target by several centimetres and sags on the way, brushing blocks it passes over."""
WORK_SPEED = 0.5
"""Fraction of the bound for moves against something: pulling, pushing, lifting, lowering."""

APPROACH_HEIGHT = 0.08
"""Distance (m) from a grasp or a push point at which the hand lines up before moving in."""
ARRIVED = 0.02
"""Distance (m) from a waypoint at which the hand counts as there."""
TURNED = 0.08
"""Rotation (rad) from the wanted orientation under which the hand counts as turned."""
CLOSE_STEPS = 8
"""Steps the fingers take to close on a handle or a block."""
RELEASE_STEPS = 6
"""Steps the fingers take to open off it."""


class PhasedExpert:
    """A state machine over the hand: each step runs the method ``_<phase>`` of the current phase.

    It keeps calvin's target pose (see the module docstring) and notices when the hand has stopped
    moving (pressed on something, or at the end of its reach), which ends a phase as well as reaching
    its goal does.
    """

    STALL_STEPS = 6
    STALL_DISTANCE = 0.002
    """The hand stalls when it moves less than this (m) over ``STALL_STEPS`` steps."""

    def __init__(self, first_phase: str) -> None:
        self.target_position = np.zeros(3)
        self.target_euler = np.zeros(3)
        self.started = False
        self.recent: list[np.ndarray] = []
        self.enter(first_phase)

    def enter(self, phase: str) -> None:
        self.phase, self.steps_in_phase = phase, 0

    def __call__(self, observation: Mapping[str, Any]) -> np.ndarray:
        state = read_privileged_state(observation["privileged_state"])
        if not self.started:
            self.started = True
            self.target_position = state.tcp_position.copy()
            self.target_euler = state.tcp_euler.copy()
            self.begin(state)
        self.recent = [*self.recent[-self.STALL_STEPS:], state.tcp_position.copy()]
        self.steps_in_phase += 1
        return getattr(self, f"_{self.phase}")(state)

    def begin(self, state: PrivilegedState) -> None:
        """What an expert reads off the episode's first observation."""

    def stalled(self) -> bool:
        """Whether the hand has barely moved over the last steps of this phase."""
        if self.steps_in_phase < self.STALL_STEPS:
            return False
        return float(np.linalg.norm(self.recent[-1] - self.recent[-self.STALL_STEPS])) < self.STALL_DISTANCE

    def move(self, goal: np.ndarray, orientation: np.ndarray, gripper: float,
             speed: float = TRAVEL_SPEED) -> np.ndarray:
        """The action stepping the target towards ``goal`` and ``orientation`` (Euler angles), with the gripper."""
        step = np.clip(goal - self.target_position, -speed * POSITION_STEP, speed * POSITION_STEP)
        turn = np.clip(wrapped(orientation - self.target_euler), -ROTATION_STEP, ROTATION_STEP)
        self.target_position = self.target_position + step
        self.target_euler = self.target_euler + turn
        return np.array([*(step / POSITION_STEP), *(turn / ROTATION_STEP), gripper], dtype=np.float32)

    def hold(self, gripper: float) -> np.ndarray:
        """Keep the target where it is, with the gripper command."""
        return self.move(self.target_position, self.target_euler, gripper)

    def blocked(self, state: PrivilegedState, goal: np.ndarray) -> bool:
        """Whether the hand has stopped short of ``goal``, which the target has reached."""
        stopped_short = float(np.linalg.norm(state.tcp_position - goal)) > ARRIVED
        return bool(np.linalg.norm(self.target_position - goal) <= 0.002 and stopped_short and self.stalled())

    def at(self, state: PrivilegedState, goal: np.ndarray, orientation: np.ndarray | None = None,
           tolerance: float = ARRIVED) -> bool:
        """Whether the target has reached ``goal`` and the hand is within ``tolerance`` of it, turned to
        ``orientation`` where one is given."""
        if np.linalg.norm(self.target_position - goal) > 0.002:
            return False
        if orientation is not None and angle_between(state.tcp_euler, orientation) > TURNED:
            return False
        return float(np.linalg.norm(state.tcp_position - goal)) < tolerance
