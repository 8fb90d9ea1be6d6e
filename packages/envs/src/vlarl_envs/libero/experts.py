"""Scripted LIBERO experts read off ``privileged_state``: the source of LIBERO demonstrations.

Each is a small state machine over robosuite's OSC_POSE deltas that re-reads the goal's entities
every step (``vlarl_envs.libero.privileged``): move above the grasp with the fingers across the
object, descend, close, lift, carry the object above its destination, lower, open, back off. A
missed or dropped object sends it back to the approach. Objects narrow enough for the open gripper
(LIBERO-Object's groceries) are grasped across their narrow side at their centre; wider ones (the
black bowl) by the rim, one finger inside the bowl and one outside. LIBERO-Goal's other tasks
have their own: the stove's knob is pinched and twisted, the middle drawer is pulled open by its
handle from the front, and the plate is slid along by its rim with the closed fingers inside it.
Every task of LIBERO-Spatial and LIBERO-Object has an expert, and every LIBERO-Goal task but
``open_the_top_drawer_and_put_the_bowl_inside``; LIBERO-10 and LIBERO-90 have none
(``scripted_expert`` answers None for a task without one).

>>> expert = scripted_expert("pick_up_the_milk_and_place_it_in_the_basket")   # doctest: +SKIP
>>> obs, *_ = env.step(expert(obs))                                            # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vlarl_envs.families import Expert
from vlarl_envs.libero.privileged import Entity, PrivilegedState, read_privileged_state

POSITION_STEP = 0.05
"""Metres per unit of the position action (robosuite's OSC_POSE ``output_max``)."""
ROTATION_STEP = 0.5
"""Radians per unit of the rotation action, an axis-angle about the world axes."""
OPEN, CLOSE = -1.0, 1.0
"""LIBERO's gripper action: -1 opens, +1 closes."""
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
APPROACH_HEIGHT = 0.10
"""Height above the grasp point of the approach waypoint (m)."""
CARRY_CLEARANCE = 0.08
"""Height of the carried object's bottom above the higher of its start and its destination (m)."""
PLACE_CLEARANCE = 0.01
"""Gap between a placed object's bottom and the surface it goes on when the gripper opens (m)."""
DROP_DEPTH = 0.04
"""Height of a dropped object's bottom above the floor of a containing region (m)."""
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
HELD_GAP = 0.004
"""Finger gap (m) above which closed fingers hold something."""
SLIP = 0.06
"""How far (m) a held object may move against the hand before it counts as dropped: a bowl held by
its rim swings by a few centimetres as it leaves its support."""


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


GOAL_EXPERTS: dict[str, Callable[[], Expert]] = {
    "turn_on_the_stove": TurnKnobExpert,
    "open_the_middle_drawer_of_the_cabinet": OpenDrawerExpert,
    "push_the_plate_to_the_front_of_the_stove": DragExpert,
}
"""LIBERO-Goal's tasks that are no pick-and-place, with their experts."""


@functools.cache
def suite_task_names(suite_name: str) -> frozenset[str]:
    """The task names of a LIBERO suite (its benchmark tables only, no simulator)."""
    from vlarl_envs.libero.suites import suite_tasks

    return frozenset(task.name for task in suite_tasks(suite_name))


GOAL_PICK_AND_PLACE: dict[str, Callable[[Entity], Placement]] = {
    "put_the_bowl_on_the_stove": place_on,
    "put_the_wine_bottle_on_top_of_the_cabinet": place_on,
    "put_the_bowl_on_top_of_the_cabinet": place_on,
    "put_the_cream_cheese_in_the_bowl": place_on,
    "put_the_bowl_on_the_plate": place_on,
    "put_the_wine_bottle_on_the_rack": place_on,
}
"""LIBERO-Goal's pick-and-place tasks: goal entity 0 goes on goal entity 1."""


def scripted_expert(task: str) -> Expert | None:
    """A fresh expert for a LIBERO task, or None where there is none (it may keep state: build
    one per episode)."""
    if task in suite_task_names("libero_spatial"):
        return PickAndPlaceExpert(place_on)
    if task in suite_task_names("libero_object"):
        return PickAndPlaceExpert(place_in)
    if task in GOAL_PICK_AND_PLACE:
        return PickAndPlaceExpert(GOAL_PICK_AND_PLACE[task])
    if task in GOAL_EXPERTS:
        return GOAL_EXPERTS[task]()
    return None
