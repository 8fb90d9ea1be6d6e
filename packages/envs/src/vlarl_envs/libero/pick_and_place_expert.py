"""LIBERO's pick-and-place expert (``vlarl_envs.libero.experts`` builds it by task) and where it puts the
object down: move above the grasp with the fingers across the object, descend, close, lift, carry the object
above its destination, lower, open, back off; a missed or dropped object sends it back to the approach.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vlarl_envs.libero.expert_geometry import downward_hand, grasp_direction, grasp_point, hand_yaw, over, yaw_across
from vlarl_envs.libero.phased_expert import APPROACH_HEIGHT, CLOSE, CLOSE_STEPS, OPEN, RELEASE_STEPS, PhasedExpert
from vlarl_envs.libero.privileged import Entity, PrivilegedState, read_privileged_state

CARRY_CLEARANCE = 0.08
"""Height of the carried object's bottom above the higher of its start and its destination (m)."""
PLACE_CLEARANCE = 0.01
"""Gap between a placed object's bottom and the surface it goes on when the gripper opens (m)."""
DROP_DEPTH = 0.04
"""Height of a dropped object's bottom above the floor of a containing region (m)."""
HELD_GAP = 0.004
"""Finger gap (m) above which closed fingers hold something."""
SLIP = 0.06
"""How far (m) a held object may move against the hand before it counts as dropped: a bowl held by
its rim swings by a few centimetres as it leaves its support."""


@dataclass(frozen=True)
class Placement:
    """Where a carried object goes: the target's xy and the height of the object's bottom at release."""

    xy: np.ndarray
    bottom: float
    surface: float
    """The top of what is below the destination, which the carry clears."""


def place_on(target: Entity) -> Placement:
    """Onto a body or a region's surface: centred on it, released just above its top."""
    return Placement(xy=target.position[:2].copy(), bottom=target.top + PLACE_CLEARANCE, surface=target.top)


def place_in(target: Entity) -> Placement:
    """Into a containing region (a basket's): dropped from a little above its floor, at its centre."""
    return Placement(xy=target.box_world_center[:2].copy(), bottom=target.bottom + DROP_DEPTH, surface=target.top)


class PickAndPlaceExpert(PhasedExpert):
    """Pick goal entity 0 and release it on or in goal entity 1.

    Args:
        placement: goal entity 1 -> where the object goes (``place_on`` or ``place_in``).
    """

    def __init__(self, placement: Callable[[Entity], Placement]) -> None:
        super().__init__("approach")
        self.placement = placement
        self.direction: np.ndarray | None = None
        self.attempt = 0
        self.held_offset = np.zeros(3)
        self.carry_bottom = 0.0
        self.retreat_from = np.zeros(3)

    def __call__(self, observation: Mapping[str, Any]) -> np.ndarray:
        self.item, target = read_privileged_state(observation["privileged_state"]).entities[:2]
        self.destination = self.placement(target)
        return super().__call__(observation)

    def restart(self) -> None:
        """Back to the approach, where the next grasp attempt chooses its direction again."""
        self.enter("approach")
        self.direction = None
        self.attempt += 1

    def _approach(self, state: PrivilegedState) -> np.ndarray:
        if self.direction is None:  # chosen once per attempt, so the hand homes in on a fixed yaw
            self.direction = grasp_direction(self.item, state.hand_position, self.attempt)
            self.orientation = downward_hand(yaw_across(self.direction, hand_yaw(state.hand_rotation)))
        above = grasp_point(self.item, self.direction) + [0.0, 0.0, APPROACH_HEIGHT]
        if self.arrived(state, above):
            self.enter("descend")
        elif self.stalled():  # caught on something on the way: try another side
            self.restart()
        return self.move(state, over(state.hand_position, above), OPEN)

    def _descend(self, state: PrivilegedState) -> np.ndarray:
        grasp = grasp_point(self.item, self.direction)
        if np.linalg.norm(state.hand_position[:2] - grasp[:2]) > 0.03:
            self.restart()
        elif state.hand_position[2] - grasp[2] < 0.006 or self.stalled():
            self.enter("close")
        return self.move(state, grasp, OPEN)

    def _close(self, state: PrivilegedState) -> np.ndarray:
        if self.steps_in_phase >= CLOSE_STEPS:
            if state.finger_gap > HELD_GAP:
                self.enter("lift")
                self.held_offset = self.item.position - state.hand_position
                self.carry_bottom = max(self.item.bottom, self.destination.surface) + CARRY_CLEARANCE
            else:
                self.restart()
        return self.move(state, state.hand_position, CLOSE)

    def slipped(self, state: PrivilegedState) -> bool:
        """Whether the object has left the fingers or moved against the hand since the grasp."""
        moved = np.linalg.norm(self.item.position - state.hand_position - self.held_offset)
        return state.finger_gap <= HELD_GAP or moved > SLIP

    def carried_to(self, state: PrivilegedState, xy: np.ndarray, bottom: float) -> np.ndarray:
        """The hand position that puts the held object's origin over ``xy`` with its bottom at ``bottom``."""
        return np.append(state.hand_position[:2] + xy - self.item.position[:2],
                         state.hand_position[2] + bottom - self.item.bottom)

    def _lift(self, state: PrivilegedState) -> np.ndarray:
        if self.slipped(state):
            self.restart()
            return self.move(state, state.hand_position, OPEN)
        if self.item.bottom > self.carry_bottom - 0.02 or self.stalled():
            self.enter("carry")
        return self.move(state, self.carried_to(state, self.item.position[:2], self.carry_bottom), CLOSE)

    def _carry(self, state: PrivilegedState) -> np.ndarray:
        if self.slipped(state):
            self.restart()
            return self.move(state, state.hand_position, OPEN)
        off_target = np.linalg.norm(self.destination.xy - self.item.position[:2])
        if off_target < 0.01 or (off_target < 0.02 and self.stalled()):
            self.enter("lower")
        return self.move(state, self.carried_to(state, self.destination.xy, self.carry_bottom), CLOSE)

    def _lower(self, state: PrivilegedState) -> np.ndarray:
        if self.slipped(state):
            self.restart()
            return self.move(state, state.hand_position, OPEN)
        if self.item.bottom - self.destination.bottom < 0.005 or self.stalled():
            self.enter("release")
        return self.move(state, self.carried_to(state, self.destination.xy, self.destination.bottom), CLOSE)

    def _release(self, state: PrivilegedState) -> np.ndarray:
        if self.steps_in_phase >= RELEASE_STEPS:
            self.enter("retreat")
            self.retreat_from = state.hand_position.copy()
        return self.move(state, state.hand_position, OPEN)

    def _retreat(self, state: PrivilegedState) -> np.ndarray:
        return self.move(state, self.retreat_from + [0.0, 0.0, APPROACH_HEIGHT], OPEN)
