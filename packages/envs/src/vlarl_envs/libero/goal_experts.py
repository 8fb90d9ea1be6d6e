"""LIBERO-Goal's experts for the tasks that are no pick-and-place (``vlarl_envs.libero.experts`` builds them
by task): the stove's knob is pinched and twisted, the middle drawer is pulled open by its handle from the
front, and the plate is slid along by its rim with the closed fingers inside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from vlarl_envs.libero.expert_geometry import downward_hand, hand_yaw, yaw_across
from vlarl_envs.libero.phased_expert import APPROACH_HEIGHT, CLOSE, CLOSE_STEPS, OPEN, RELEASE_STEPS, PhasedExpert
from vlarl_envs.libero.privileged import PrivilegedState, read_privileged_state


class TurnKnobExpert(PhasedExpert):
    """Turn on goal entity 0, a stove: pinch its knob's fin from above and twist the hand.

    LIBERO's flat stove has its knob at its joint's anchor, a vertical fin along the stove's own x
    axis at joint position 0; it counts as on from ``KNOB_ON`` radians about the joint's axis (up).
    """

    KNOB_GRASP_HEIGHT = 0.025
    """Fingertips above the knob's anchor (m): across the fin, above the stove's top."""
    KNOB_ON = 0.5
    TWIST = 1.0
    """How far ahead of the knob's current angle the hand aims while twisting (rad)."""

    def __init__(self) -> None:
        super().__init__("approach")
        self.twist_start = 0.0

    def __call__(self, observation: Mapping[str, Any]) -> np.ndarray:
        self.stove = read_privileged_state(observation["privileged_state"]).entities[0]
        return super().__call__(observation)

    def knob_point(self) -> np.ndarray:
        """Where the fingertips pinch the fin."""
        return self.stove.joint_anchor + [0.0, 0.0, self.KNOB_GRASP_HEIGHT]

    def fin_direction(self) -> np.ndarray:
        """The fin's horizontal direction at the knob's current angle."""
        angle = self.stove.joint
        turn = np.array([[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0], [0.0, 0.0, 1.0]])
        return turn @ self.stove.rotation[:, 0]

    def _approach(self, state: PrivilegedState) -> np.ndarray:
        across_fin = np.cross([0.0, 0.0, 1.0], self.fin_direction())
        self.orientation = downward_hand(yaw_across(across_fin, hand_yaw(state.hand_rotation)))
        above = self.knob_point() + [0.0, 0.0, APPROACH_HEIGHT]
        if self.arrived(state, above):
            self.enter("descend")
        return self.move(state, above, OPEN)

    def _descend(self, state: PrivilegedState) -> np.ndarray:
        if abs(state.hand_position[2] - self.knob_point()[2]) < 0.006 or self.stalled():
            self.enter("close")
        return self.move(state, self.knob_point(), OPEN)

    def _close(self, state: PrivilegedState) -> np.ndarray:
        if self.steps_in_phase >= CLOSE_STEPS:
            self.enter("twist")
            self.twist_start = hand_yaw(state.hand_rotation) - self.stove.joint
        return self.move(state, self.knob_point(), CLOSE)

    def _twist(self, state: PrivilegedState) -> np.ndarray:
        self.orientation = downward_hand(self.twist_start + self.stove.joint + self.TWIST)
        if self.stalled() and self.stove.joint < self.KNOB_ON:
            self.enter("release")
        return self.move(state, self.knob_point(), CLOSE)

    def _release(self, state: PrivilegedState) -> np.ndarray:
        if self.steps_in_phase >= RELEASE_STEPS:
            self.enter("approach")
        return self.move(state, self.knob_point() + [0.0, 0.0, APPROACH_HEIGHT], OPEN)


def facing(direction: np.ndarray) -> np.ndarray:
    """The rotation of the hand pointing horizontally along ``direction``, its fingers closing vertically."""
    approach = np.array([direction[0], direction[1], 0.0]) / np.linalg.norm(direction[:2])
    fingers = np.array([0.0, 0.0, 1.0])
    return np.column_stack([np.cross(fingers, approach), fingers, approach])


class OpenDrawerExpert(PhasedExpert):
    """Open the drawer of goal entity 0 (a cabinet drawer's region) by its handle: face the handle,
    grasp it from the front with the fingers closing vertically and pull the drawer out; if it
    sticks short of open, let go and start over.

    LIBERO's wooden cabinet slides a drawer out towards negative joint positions (its joint's
    axis points into the cabinet) and counts it open below ``OPEN_AT`` m; the handle is a bar across
    the drawer's front, ``HANDLE_OUT`` m in front of the drawer's region and ``HANDLE_DROP`` m below
    its centre. Grasping the bar from above would take the hand into the drawer above.
    """

    HANDLE_OUT = 0.037
    HANDLE_DROP = -0.007
    OPEN_AT = -0.14
    PULL_TO = -0.155
    """How far the drawer is pulled (m of joint travel), a little past ``OPEN_AT``."""
    STANDOFF = 0.10
    """Distance (m) in front of the handle where the hand lines up before reaching for it."""
    REACH_IN = -0.005
    """How far past the bar's axis the fingertips go (m), so it sits between the finger pads."""

    def __init__(self) -> None:
        super().__init__("approach")

    def __call__(self, observation: Mapping[str, Any]) -> np.ndarray:
        self.drawer = read_privileged_state(observation["privileged_state"]).entities[0]
        return super().__call__(observation)

    @property
    def outward(self) -> np.ndarray:
        """The horizontal direction the drawer opens towards."""
        outward = -self.drawer.joint_axis
        return np.array([outward[0], outward[1], 0.0]) / np.linalg.norm(outward[:2])

    def grip(self) -> np.ndarray:
        """Where the fingertips hold the handle's bar: its middle, a little past its axis."""
        depth = float(self.drawer.world_half_extent @ np.abs(self.outward))
        handle = self.drawer.position + self.outward * (depth + self.HANDLE_OUT) + [0.0, 0.0, self.HANDLE_DROP]
        return handle - self.outward * self.REACH_IN

    def _approach(self, state: PrivilegedState) -> np.ndarray:
        self.orientation = facing(-self.outward)
        in_front = self.grip() + self.outward * self.STANDOFF
        if self.arrived(state, in_front):
            self.enter("reach")
        return self.move(state, in_front, OPEN)

    def _reach(self, state: PrivilegedState) -> np.ndarray:
        if np.linalg.norm(state.hand_position - self.grip()) < 0.008 or self.stalled():
            self.enter("close")
        return self.move(state, self.grip(), OPEN)

    def _close(self, state: PrivilegedState) -> np.ndarray:
        if self.steps_in_phase >= CLOSE_STEPS:
            self.enter("pull")
        return self.move(state, self.grip(), CLOSE)

    def _pull(self, state: PrivilegedState) -> np.ndarray:
        if self.stalled() and self.drawer.joint > self.OPEN_AT:
            self.enter("release")
        goal = self.grip() + self.outward * (self.drawer.joint - self.PULL_TO)
        return self.move(state, goal, CLOSE)

    def _release(self, state: PrivilegedState) -> np.ndarray:
        if self.steps_in_phase >= RELEASE_STEPS:
            self.enter("approach")
        return self.move(state, state.hand_position, OPEN)


class DragExpert(PhasedExpert):
    """Slide goal entity 0, a plate, across the table until its centre is over goal entity 1 (a region).

    The closed fingers go down into the plate and move towards the region, taking the plate along
    by its raised rim; pushing from behind would need the hand beyond the arm's reach.
    """

    FINGER_HEIGHT = 0.008
    """Fingertips above the plate's bottom (m): below its rim, above its floor."""
    LEAD = 0.5
    """Where the fingers end up ahead of the plate's centre, as a fraction of its radius."""

    def __init__(self) -> None:
        super().__init__("approach")
        self.direction = np.array([1.0, 0.0, 0.0])

    def __call__(self, observation: Mapping[str, Any]) -> np.ndarray:
        self.item, self.region = read_privileged_state(observation["privileged_state"]).entities[:2]
        to_region = np.append(self.region.position[:2] - self.item.position[:2], 0.0)
        self.direction = to_region / max(np.linalg.norm(to_region), 1e-6)
        return super().__call__(observation)

    def inside(self) -> np.ndarray:
        """Where the fingertips go down: the plate's centre, just above its floor."""
        point = self.item.box_world_center.copy()
        point[2] = self.item.bottom + self.FINGER_HEIGHT
        return point

    def _approach(self, state: PrivilegedState) -> np.ndarray:
        above = self.inside() + [0.0, 0.0, APPROACH_HEIGHT]
        if self.arrived(state, above):
            self.enter("descend")
        return self.move(state, above, CLOSE)

    def _descend(self, state: PrivilegedState) -> np.ndarray:
        if state.hand_position[2] - self.inside()[2] < 0.006 or self.stalled():
            self.enter("drag")
        return self.move(state, self.inside(), CLOSE)

    def _drag(self, state: PrivilegedState) -> np.ndarray:
        radius = float(np.max(self.item.world_half_extent[:2]))
        goal = np.append(self.region.position[:2] + self.direction[:2] * radius * self.LEAD, self.inside()[2])
        return self.move(state, goal, CLOSE)
