"""CALVIN's scripted experts for the fixtures (``vlarl_envs.calvin.experts`` builds them by task): the hand
goes to the fixture point of ``privileged_state``, closes on the handle of the drawer or the sliding door (or,
for the switch, pushes its bar with the closed fingers from in front of its slanted panel) and moves it along
its joint; the button is pressed from above.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from vlarl_envs.calvin.expert_geometry import axis_rotation, euler_of, hand_down, on_table, rotation_of
from vlarl_envs.calvin.phased_expert import (
    APPROACH_HEIGHT,
    CLOSE,
    CLOSE_STEPS,
    OPEN,
    POSITION_STEP,
    RELEASE_STEPS,
    WORK_SPEED,
    PhasedExpert,
)
from vlarl_envs.calvin.privileged import PrivilegedState


class FixtureExpert(PhasedExpert):
    """Move a handle: line up ``APPROACH_HEIGHT`` behind the grip point along the hand's pointing
    direction, move in, close, move the grip ``distance`` along ``direction``, let go and back off.

    Args:
        fixture: the fixture point to grip, read from the state each step (it moves with its joint).
        orientation: the hand's Euler angles throughout.
        direction: where the handle goes (world, any length).
        distance: how far (m); the move also ends where the hand stalls (a joint's limit).
        grip_offset: the grip point's offset from the fixture point (world, m).
    """

    def __init__(self, fixture: Callable[[PrivilegedState], np.ndarray], orientation: np.ndarray,
                 direction: np.ndarray, distance: float, grip_offset: tuple[float, ...] = (0.0, 0.0, 0.0)) -> None:
        super().__init__("approach")
        self.fixture = fixture
        self.orientation = np.asarray(orientation, dtype=float)
        self.pointing = rotation_of(self.orientation)[:, 2]
        self.direction = np.asarray(direction, dtype=float) / np.linalg.norm(direction)
        self.distance = distance
        self.grip_offset = np.asarray(grip_offset, dtype=float)
        self.pull_from = np.zeros(3)

    def grip(self, state: PrivilegedState) -> np.ndarray:
        return self.fixture(state) + self.grip_offset

    def _approach(self, state: PrivilegedState) -> np.ndarray:
        standoff = self.grip(state) - self.pointing * APPROACH_HEIGHT
        if self.at(state, standoff, self.orientation):
            self.enter("reach")
        return self.move(standoff, self.orientation, OPEN)

    def _reach(self, state: PrivilegedState) -> np.ndarray:
        if self.at(state, self.grip(state), tolerance=0.005) or self.stalled():
            self.enter("close")
        return self.move(self.grip(state), self.orientation, OPEN, WORK_SPEED)

    def _close(self, state: PrivilegedState) -> np.ndarray:
        if self.steps_in_phase >= CLOSE_STEPS:
            self.enter("pull")
            self.pull_from = self.target_position.copy()
        return self.hold(CLOSE)

    def _pull(self, state: PrivilegedState) -> np.ndarray:
        goal = self.pull_from + self.direction * self.distance
        if self.at(state, goal) or self.stalled():
            self.enter("release")
        return self.move(goal, self.orientation, CLOSE, WORK_SPEED)

    def _release(self, state: PrivilegedState) -> np.ndarray:
        if self.steps_in_phase >= RELEASE_STEPS:
            self.enter("back_off")
        return self.hold(OPEN)

    def _back_off(self, state: PrivilegedState) -> np.ndarray:
        return self.move(self.target_position - self.pointing * POSITION_STEP, self.orientation, OPEN)


SWITCH_FACING = euler_of(axis_rotation(np.array([1.0, 0.0, 0.0]), np.pi / 3) @ rotation_of(hand_down(np.pi / 2)))
"""The hand pointing into the switch's panel, which leans back by 30 degrees, its fingers closing along
x: straight down, the hand, as wide as the switch, runs into the panel above the switch."""
SWITCH_UP = np.array([0.0, 0.5, np.sqrt(3) / 2])
"""The direction the switch slides up (the lightbulb lights above half its 8.8 cm travel)."""
SWITCH_PUSH_OFFSET = 0.03
"""Distance (m) along the switch's travel from the middle of its bar to the closed fingertips pushing it:
its bar is 3.2 cm across."""
SWITCH_TRAVEL = 0.1


def switch_expert(up: bool) -> FixtureExpert:
    """Push the switch's bar up (lightbulb on) or down (off) with the closed fingers."""
    direction = SWITCH_UP if up else -SWITCH_UP
    return FixtureExpert(lambda state: state.switch_handle, SWITCH_FACING, direction, SWITCH_TRAVEL,
                         grip_offset=tuple(-direction * SWITCH_PUSH_OFFSET))


class DrawerExpert(FixtureExpert):
    """Grasp the drawer's handle bar from above, the fingers across it, and pull the drawer out or push it
    in (it slides along -y, 22 cm; calvin counts 12).

    Over the bar the hand is 17 cm wide along y and reaches over the table's front edge: it grips the
    bar (19 cm long) where it keeps ``BLOCK_CLEARANCE`` from the blocks lying there, in the middle where
    it can.
    """

    GRIP_SHIFTS = (0.0, -0.035, 0.035, -0.07, 0.07)
    """Offsets (m, along x) from the middle of the bar where the hand may grip it, in order of preference."""
    BLOCK_CLEARANCE = 0.065
    """Distance (m) in x between the grip and a block at the table's front edge: half the hand's thickness
    (3.5 cm) and half a block's extent along x (up to 3 cm, lying within 22.5 degrees of a quarter turn)."""
    FRONT_EDGE_ROW = -0.1
    """Blocks on the table with their centre in front of this y (m) reach under the hand."""

    def __init__(self, opening: bool) -> None:
        super().__init__(lambda state: state.drawer_handle, hand_down(0.0),
                         np.array([0.0, -1.0 if opening else 1.0, 0.0]), 0.16)

    def begin(self, state: PrivilegedState) -> None:
        handle = float(state.drawer_handle[0])
        front = [float(block.position[0]) for block in state.blocks.values()
                 if on_table(block) and block.position[1] < self.FRONT_EDGE_ROW]

        def clearance(shift: float) -> float:
            return min((abs(handle + shift - x) for x in front), default=np.inf)

        clear = [shift for shift in self.GRIP_SHIFTS if clearance(shift) >= self.BLOCK_CLEARANCE]
        shift = clear[0] if clear else max(self.GRIP_SHIFTS, key=clearance)
        self.grip_offset = np.array([shift, 0.0, 0.0])


def slider_expert(leftwards: bool) -> FixtureExpert:
    """Grasp the sliding door's handle from above, the fingers across it, and slide the door
    (24-30 cm of travel along x by scene; calvin counts 15)."""
    return FixtureExpert(lambda state: state.slider_handle, hand_down(np.pi / 2),
                         np.array([-1.0 if leftwards else 1.0, 0.0, 0.0]), 0.2)


class PressExpert(PhasedExpert):
    """Press the button (which toggles the LED) with the closed fingers from above, then rise."""

    PRESS_DEPTH = 0.03
    """How far below the button's top the fingertips aim (m); it travels 2 cm and toggles at half."""

    def __init__(self) -> None:
        super().__init__("approach")
        self.led_before = 0.0
        self.orientation = hand_down(0.0)

    def begin(self, state: PrivilegedState) -> None:
        self.led_before = state.led
        self.orientation = hand_down(float(state.tcp_euler[2]))

    def _approach(self, state: PrivilegedState) -> np.ndarray:
        above = state.button_top + [0.0, 0.0, APPROACH_HEIGHT]
        if self.at(state, above):
            self.enter("press")
        return self.move(above, self.orientation, CLOSE)

    def _press(self, state: PrivilegedState) -> np.ndarray:
        if state.led != self.led_before or self.stalled():
            self.enter("rise")
        return self.move(state.button_top - [0.0, 0.0, self.PRESS_DEPTH], self.orientation, CLOSE, WORK_SPEED)

    def _rise(self, state: PrivilegedState) -> np.ndarray:
        return self.move(state.button_top + [0.0, 0.0, APPROACH_HEIGHT], self.orientation, CLOSE)
