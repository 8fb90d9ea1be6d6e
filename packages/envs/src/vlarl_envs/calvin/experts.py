"""Scripted CALVIN experts read off ``privileged_state`` (``vlarl_envs.calvin.privileged``): the source of
CALVIN demonstrations.

Each is a small state machine over calvin's relative actions. calvin's robot integrates those actions
into a target pose that its inverse kinematics tracks (``use_target_pose``), so an expert keeps its own
copy of that target, starting from the hand's pose at the episode's first observation, and steps it
towards each waypoint by at most the action's bound: a hand held back by a handle or a block never
winds the target up beyond where the expert wants it.

- Fixtures (drawer, sliding door, switch): the hand goes to the fixture point of ``privileged_state``,
  closes on the handle (or, for the switch, pushes its bar with the closed fingers from in front of the
  switch's slanted panel) and moves it along its joint; the button is pressed from above.
- Blocks: the hand comes down over the block with the fingers across its narrow side, closes and
  lifts; then, by task, it holds the block up (lifting, unstacking), carries it into the sliding
  cabinet's open side, into the drawer or onto another block and lets go (placing, stacking, pushing
  into the drawer), turns it by 75 degrees on the table (rotating) or slides it 13 cm along the table
  (pushing). Far from the robot, the hand tilts outwards, which reaches further than pointing down; in
  the sliding cabinet it leans away from the door, the wall and the cabinet's top. A grasp that holds
  nothing, a block that slips out and a hand stopped on its way start the grasp over.

``scripted_expert`` answers None for a task without an expert (``EXPERT_TASKS`` lists those with one).

>>> expert = scripted_expert("open_drawer")        # doctest: +SKIP
>>> obs, *_ = env.step(expert(obs))                 # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vlarl_envs.calvin.privileged import Block, PrivilegedState, read_privileged_state
from vlarl_envs.calvin.tasks import BLOCK_COLORS, TASK_NAMES
from vlarl_envs.families import Expert

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

ROBOT_BASE = np.array([-0.34, -0.46])
"""Where the arm stands (x, y), the same in scenes A-D."""
REACH_TILT_START, REACH_TILT_FULL = 0.6, 0.8
"""Horizontal distances (m) from the arm's base between which the hand tilts outwards, from pointing
straight down up to ``REACH_TILT``: out there the hand straight down is beyond calvin's inverse
kinematics by up to 6 cm."""
REACH_TILT = 0.3
TABLE_TOP = 0.44
"""Height of the table top and of the sliding cabinet's shelf (m), the same in scenes A-D."""
BLOCK_HALF_HEIGHT = 0.02
"""Half the height (m) of every block lying flat (4 cm, calvin's 5 cm scaled by 0.8)."""

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
HELD_OPENING, OPEN_OPENING = 0.01, 0.075
"""Finger openings (m) between which closed fingers hold something: below, they closed on nothing; above,
something kept them from closing."""


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


def expert_factories() -> dict[str, Callable[[], Expert]]:
    """Every task with an expert -> a function building a fresh one."""
    factories: dict[str, Callable[[], Expert]] = {
        "open_drawer": lambda: DrawerExpert(opening=True),
        "close_drawer": lambda: DrawerExpert(opening=False),
        "move_slider_left": lambda: slider_expert(leftwards=True),
        "move_slider_right": lambda: slider_expert(leftwards=False),
        "turn_on_lightbulb": lambda: switch_expert(up=True),
        "turn_off_lightbulb": lambda: switch_expert(up=False),
        "turn_on_led": PressExpert,
        "turn_off_led": PressExpert,
        "place_in_slider": lambda: PlaceExpert(into_slider),
        "place_in_drawer": lambda: PlaceExpert(into_drawer),
        "stack_block": lambda: PlaceExpert(onto_block),
        "push_into_drawer": lambda: PlaceExpert(into_drawer, choose=block_on_table),
        "unstack_block": lambda: BlockExpert(top_block),
    }
    for color in BLOCK_COLORS:
        for source in ("table", "slider", "drawer"):
            factories[f"lift_{color}_block_{source}"] = functools.partial(BlockExpert, the_block(color))
        for side, sign in (("left", 1.0), ("right", -1.0)):  # left: counter-clockwise, and towards -x
            factories[f"rotate_{color}_block_{side}"] = functools.partial(RotateExpert, color, sign * ROTATION)
            factories[f"push_{color}_block_{side}"] = functools.partial(PushExpert, color, -sign * PUSH_DISTANCE)
    return factories


EXPERT_FACTORIES = expert_factories()
EXPERT_TASKS = tuple(task for task in TASK_NAMES if task in EXPERT_FACTORIES)
"""The tasks with an expert, in calvin's order."""


def scripted_expert(task: str) -> Expert | None:
    """A fresh expert for a CALVIN task, or None where there is none (it keeps state: build one per episode)."""
    factory = EXPERT_FACTORIES.get(task)
    return factory() if factory else None
