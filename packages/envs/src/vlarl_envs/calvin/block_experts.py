"""CALVIN's scripted experts for the blocks (``vlarl_envs.calvin.experts`` builds them by task), with the
choice of block and of where it goes: the hand comes down over the block with the fingers across its narrow
side, closes and lifts; then, by task, it holds the block up, carries it into the sliding cabinet's open side,
into the drawer or onto another block and lets go, turns it on the table or slides it along the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vlarl_envs.calvin.expert_geometry import (
    TABLE_TOP,
    axis_rotation,
    euler_of,
    hand_down,
    nearest_turn,
    on_shelf,
    on_table,
    reaching_hand,
    rotation_of,
)
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
from vlarl_envs.calvin.privileged import Block, PrivilegedState
from vlarl_envs.calvin.tasks import BLOCK_COLORS

BLOCK_HALF_HEIGHT = 0.02
"""Half the height (m) of every block lying flat (4 cm, calvin's 5 cm scaled by 0.8)."""
HELD_OPENING, OPEN_OPENING = 0.01, 0.075
"""Finger openings (m) between which closed fingers hold something: below, they closed on nothing; above,
something kept them from closing."""

SHELF_Y = 0.085
"""The middle of the sliding cabinet's shelf in y (calvin's scenes put blocks on it between 0.05 and 0.12)."""
DOOR_TO_OPENING = 0.27
"""Distance (m) in x from the sliding door's handle to the middle of the cabinet's open side, in every
scene: the door is 28 cm wide and the open side, next to it, 24 cm."""
OPENING_HALF_WIDTH = 0.12
SLIDER_MIDDLE = 0.12
"""A door position (m) between its ends: below, the door is at its right end and the left side is open."""
SHELF_APPROACH_HEIGHT = 0.04
"""``APPROACH_HEIGHT`` over a block on the cabinet's shelf: higher, the hand meets the cabinet's top."""
SHELF_LEAN = 0.35
"""How far (rad) the hand leans, about y, towards the middle of the cabinet's open side over a block
``SHELF_LEAN_FULL`` m or more from it: the hand is 17 cm wide across its fingers, the open side 24 cm,
and blocks lie up against its wall or the door."""
SHELF_LEAN_FULL = 0.06
SHELF_BACK_TILT = 0.3
"""How far (rad) the hand tilts, about x, its top towards the robot, over a block on the shelf, keeping
it clear of the cabinet's top; the fingers' pads stay parallel to the block's sides."""


def nearest_block(state: PrivilegedState, colors: tuple[str, ...]) -> str:
    """The color among ``colors`` of the block nearest to the hand."""
    return min(colors, key=lambda color: float(np.linalg.norm(state.blocks[color].position - state.tcp_position)))


def the_block(color: str) -> Callable[[PrivilegedState], str]:
    """Choose the block of ``color`` whatever the state."""
    return lambda state: color


def block_on_table(state: PrivilegedState) -> str:
    """The block nearest the hand among those on the table."""
    return nearest_block(state, tuple(color for color in BLOCK_COLORS if on_table(state.blocks[color])))


def top_block(state: PrivilegedState) -> str:
    """The highest block: the top of a stack."""
    return max(BLOCK_COLORS, key=lambda color: float(state.blocks[color].position[2]))


def opening_middle(state: PrivilegedState) -> float:
    """The x of the middle of the sliding cabinet's open side, beside the door."""
    side = -1.0 if state.slider < SLIDER_MIDDLE else 1.0
    return float(state.slider_handle[0] + side * DOOR_TO_OPENING)


def grasp_orientation(state: PrivilegedState, block: Block, current_yaw: float, lengthwise: bool = False) -> np.ndarray:
    """The hand over a block, its fingers across the block's narrow side (the yaw nearest
    ``current_yaw``), or along the block where ``lengthwise``: tilted outwards far from the arm, and
    across a block in the cabinet leaning towards the middle of its open side and back towards the robot."""
    across = block.yaw + (np.pi / 2 if lengthwise else 0.0)
    orientation = reaching_hand(nearest_turn(across, current_yaw), block.position)
    if not on_shelf(block) or lengthwise:
        return orientation
    offset = opening_middle(state) - float(block.position[0])
    lean = SHELF_LEAN * float(np.clip(offset / SHELF_LEAN_FULL, -1.0, 1.0))
    leaning = axis_rotation(np.array([1.0, 0.0, 0.0]), SHELF_BACK_TILT) @ axis_rotation(np.array([0.0, 1.0, 0.0]), lean)
    return euler_of(leaning @ rotation_of(orientation))


@dataclass(frozen=True)
class Placement:
    """Where a carried block goes: its centre's xy, and the height of its bottom when the fingers open."""

    xy: np.ndarray
    bottom: float


PLACE_CLEARANCE = 0.01
"""Gap (m) between a placed block's bottom and what it goes on when the fingers open."""
DRAWER_FLOOR_FROM_HANDLE = np.array([0.0, 0.19, -0.018])
"""The middle of the drawer's floor from the middle of its handle's bar (m), from calvin's drawer mesh."""


def into_slider(state: PrivilegedState, held: str) -> Placement:
    """The middle of the sliding cabinet's open side, on its shelf, or the half of it away from a block
    already there."""
    middle = opening_middle(state)
    x = middle
    for color in BLOCK_COLORS:
        other = state.blocks[color]
        if color != held and on_shelf(other) and abs(float(other.position[0]) - middle) < OPENING_HALF_WIDTH:
            x = middle + (OPENING_HALF_WIDTH if other.position[0] < middle else -OPENING_HALF_WIDTH) / 2
    return Placement(np.array([x, SHELF_Y]), TABLE_TOP + PLACE_CLEARANCE)


def into_drawer(state: PrivilegedState, held: str) -> Placement:
    """The middle of the open drawer's floor."""
    floor = state.drawer_handle + DRAWER_FLOOR_FROM_HANDLE
    return Placement(floor[:2].copy(), float(floor[2]) + PLACE_CLEARANCE)


def onto_block(state: PrivilegedState, held: str) -> Placement:
    """On top of the nearest other block on the table."""
    others = tuple(color for color in BLOCK_COLORS if color != held and on_table(state.blocks[color]))
    below = state.blocks[nearest_block(state, others)].position
    return Placement(below[:2].copy(), float(below[2]) + BLOCK_HALF_HEIGHT + PLACE_CLEARANCE)


class BlockExpert(PhasedExpert):
    """Grasp a block from above across its narrow side and lift it, then go on with ``after_lift``.

    Closed fingers that hold nothing (or that something kept open), a block slipping out on the lift
    and a hand stopped on its way to the block send the hand back to the approach (``try_again``). This
    expert holds the block up (lifting, unstacking); subclasses add what follows the lift, ending with
    ``release`` and ``rise``.

    Args:
        choose: the state at the episode's start -> the color of the block to take.
        lift: how far (m) the hand rises with the block.
        first_phase: ``approach``, or a phase after the lift for a block held from the start.
    """

    SET_DOWN_DEPTH = 0.005
    """How far (m) below where it took the block the hand sets it down: pressed on the table, not dropped."""

    def __init__(self, choose: Callable[[PrivilegedState], str], lift: float = 0.1,
                 first_phase: str = "approach") -> None:
        super().__init__(first_phase)
        self.choose = choose
        self.color = BLOCK_COLORS[0]
        self.lift = lift
        self.grasp_orientation = hand_down(0.0)
        self.attempt = 0
        self.grasp_point = np.zeros(3)
        """Where the fingertips go down to: the block's centre when the descent began (a block the
        fingers nudge on the way stays where it was aimed at, rather than leading the hand on)."""
        self.grasped_at = np.zeros(3)
        self.set_down_at = np.zeros(3)

    def begin(self, state: PrivilegedState) -> None:
        self.color = self.choose(state)

    def block(self, state: PrivilegedState) -> Block:
        return state.blocks[self.color]

    def _approach(self, state: PrivilegedState) -> np.ndarray:
        block = self.block(state)
        lengthwise = on_shelf(block) and self.attempt % 2 == 1
        self.grasp_orientation = grasp_orientation(state, block, float(self.target_euler[2]), lengthwise)
        above = block.position + [0.0, 0.0, SHELF_APPROACH_HEIGHT if on_shelf(block) else APPROACH_HEIGHT]
        if self.at(state, above, self.grasp_orientation):
            self.grasp_point = block.position.copy()
            self.enter("descend")
        elif self.blocked(state, above):
            self.try_again()
        return self.move(above, self.grasp_orientation, OPEN)

    def _descend(self, state: PrivilegedState) -> np.ndarray:
        if self.at(state, self.grasp_point, tolerance=0.005) or self.stalled():
            self.enter("close")
        return self.move(self.grasp_point, self.grasp_orientation, OPEN, WORK_SPEED)

    def _close(self, state: PrivilegedState) -> np.ndarray:
        if self.steps_in_phase >= CLOSE_STEPS:
            if HELD_OPENING < state.gripper_opening < OPEN_OPENING:
                self.grasped_at = self.target_position.copy()
                self.enter("lift")
            else:
                self.try_again()
        return self.hold(CLOSE)

    def try_again(self) -> None:
        """Back to the approach after a grasp that failed; in the cabinet, every other attempt takes the
        block along its length instead of across (which a block lying against the door or a wall leaves
        no room for)."""
        self.attempt += 1
        self.enter("approach")

    def _lift(self, state: PrivilegedState) -> np.ndarray:
        if state.gripper_opening <= HELD_OPENING:  # the block slipped out
            self.try_again()
            return self.hold(OPEN)
        goal = self.grasped_at + [0.0, 0.0, self.lift]
        if self.at(state, goal):
            self.enter(self.after_lift(state))
        return self.move(goal, self.grasp_orientation, CLOSE, WORK_SPEED)

    def after_lift(self, state: PrivilegedState) -> str:
        """The phase after the lift."""
        return "hold_up"

    def _hold_up(self, state: PrivilegedState) -> np.ndarray:
        return self.hold(CLOSE)

    def _set_down(self, state: PrivilegedState) -> np.ndarray:
        if self.at(state, self.set_down_at, tolerance=0.005) or self.stalled():
            self.enter("release")
        return self.move(self.set_down_at, self.grasp_orientation, CLOSE, WORK_SPEED)

    def _release(self, state: PrivilegedState) -> np.ndarray:
        if self.steps_in_phase >= RELEASE_STEPS:
            self.enter("rise")
        return self.hold(OPEN)

    def _rise(self, state: PrivilegedState) -> np.ndarray:
        return self.move(self.target_position + [0.0, 0.0, POSITION_STEP], self.grasp_orientation, OPEN)


class PlaceExpert(BlockExpert):
    """Take a block (or start with it in the hand) and let it go at ``destination``: carry it above, lower
    it until it is about to touch down, open and rise.

    Args:
        destination: (state, the held block's color) -> where the block goes.
        choose: the block to take; None starts with the block nearest the hand held.
    """

    CARRY_CLEARANCE = 0.04
    """Height (m) of the carried block's bottom above the higher of where it goes and the top of a block on
    the table."""

    def __init__(self, destination: Callable[[PrivilegedState, str], Placement],
                 choose: Callable[[PrivilegedState], str] | None = None) -> None:
        super().__init__(choose or (lambda state: nearest_block(state, BLOCK_COLORS)), lift=0.08,
                         first_phase="approach" if choose else "carry")
        self.destination = destination

    def begin(self, state: PrivilegedState) -> None:
        super().begin(state)
        self.grasp_orientation = state.tcp_euler.copy()

    def after_lift(self, state: PrivilegedState) -> str:
        return "carry"

    def carry_bottom(self, placement: Placement) -> float:
        """The height of the carried block's bottom: over the blocks on the table and the destination."""
        return max(TABLE_TOP + 2 * BLOCK_HALF_HEIGHT, placement.bottom) + self.CARRY_CLEARANCE

    def carried_to(self, state: PrivilegedState, xy: np.ndarray, bottom: float) -> np.ndarray:
        """The target that puts the held block's centre over ``xy`` with its bottom at ``bottom``."""
        block = self.block(state).position
        offset = np.array([*(xy - block[:2]), bottom - (block[2] - BLOCK_HALF_HEIGHT)])
        return state.tcp_position + offset

    def _carry(self, state: PrivilegedState) -> np.ndarray:
        if state.gripper_opening <= HELD_OPENING:  # dropped on the way: take it again
            self.try_again()
        placement = self.destination(state, self.color)
        self.grasp_orientation = reaching_hand(float(self.target_euler[2]), placement.xy)
        off_target = float(np.linalg.norm(placement.xy - self.block(state).position[:2]))
        if off_target < 0.01 or (off_target < 0.04 and self.stalled()):
            self.enter("lower")
        goal = self.carried_to(state, placement.xy, self.carry_bottom(placement))
        return self.move(goal, self.grasp_orientation, CLOSE)

    def _lower(self, state: PrivilegedState) -> np.ndarray:
        placement = self.destination(state, self.color)
        bottom = float(self.block(state).position[2]) - BLOCK_HALF_HEIGHT
        if bottom - placement.bottom < 0.004 or self.stalled():
            self.enter("release")
        goal = self.carried_to(state, placement.xy, placement.bottom)
        return self.move(goal, self.grasp_orientation, CLOSE, WORK_SPEED)


ROTATION = np.radians(75)
"""How far the rotating expert turns a block (calvin counts 60 degrees)."""


class RotateExpert(BlockExpert):
    """Take a block, raise it by a centimetre, turn it by ``angle`` (rad) about the vertical, set it down on
    the table and let go."""

    def __init__(self, color: str, angle: float) -> None:
        super().__init__(the_block(color), lift=0.01)
        self.angle = angle

    def after_lift(self, state: PrivilegedState) -> str:
        turn = axis_rotation(np.array([0.0, 0.0, 1.0]), self.angle)
        self.grasp_orientation = euler_of(turn @ rotation_of(self.grasp_orientation))
        return "turn"

    def _turn(self, state: PrivilegedState) -> np.ndarray:
        if self.at(state, self.target_position, self.grasp_orientation):
            self.set_down_at = self.grasped_at - [0.0, 0.0, self.SET_DOWN_DEPTH]
            self.enter("set_down")
        return self.move(self.target_position, self.grasp_orientation, CLOSE)


PUSH_DISTANCE = 0.13
"""How far the pushing expert moves a block (calvin counts 10 cm)."""


class PushExpert(BlockExpert):
    """Take a block and slide it ``distance`` (m) along x, lifted by only a few millimetres, then set it
    down and let go."""

    SLIDE_HEIGHT = 0.004

    def __init__(self, color: str, distance: float) -> None:
        super().__init__(the_block(color), lift=self.SLIDE_HEIGHT)
        self.distance = distance

    def after_lift(self, state: PrivilegedState) -> str:
        return "slide"

    def _slide(self, state: PrivilegedState) -> np.ndarray:
        goal = self.grasped_at + [self.distance, 0.0, self.SLIDE_HEIGHT]
        if self.at(state, goal) or self.stalled():
            self.set_down_at = self.grasped_at + [self.distance, 0.0, -self.SET_DOWN_DEPTH]
            self.enter("set_down")
        return self.move(goal, self.grasp_orientation, CLOSE, WORK_SPEED)
