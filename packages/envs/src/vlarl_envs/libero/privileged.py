"""The privileged state of a LIBERO env: the robot's hand and the poses of what the task's goal names.

A scripted expert sees only the observation, so everything it plans from is in one flat float32
vector of ``PRIVILEGED_STATE_DIM`` values, the same size for every task of every suite (vector envs
and datasets mix tasks):

    [0:3]    end-effector position (world, m)
    [3:7]    end-effector orientation, quaternion (w, x, y, z)
    [7:9]    the two finger joints (m; about +-0.039 open, 0 closed on nothing)
    [9:29]   goal entity 0, then entities 1 to 3 at 20 values each

The goal entities are the objects, fixtures and regions LIBERO's bddl goal names, in the order they
first appear: for ``(On akita_black_bowl_1 plate_1)`` the bowl, then the plate; for
``(In milk_1 basket_1_contain_region)`` the milk, then the basket's region; for
``(Open wooden_cabinet_1_middle_region)`` the middle drawer's region. Each entity is

    [0:3]    position: an object's body origin (what LIBERO's predicates test), a region's centre
    [3:7]    orientation, quaternion (w, x, y, z); all zeros marks an unused slot
    [7:10]   centre of its bounding box, in its own frame
    [10:13]  half-sizes of that box: an object's collision geometry (with its moving parts), a region's box
    [13]     its first hinge or slide joint's position (a drawer's slide in m, a knob's turn in
             radians), 0 without one
    [14:17]  that joint's anchor (world, m): where a knob turns
    [17:20]  that joint's axis (world, unit): which way a drawer slides or a knob turns

Four slots hold the largest goal of any suite (LIBERO-10's two-object goals).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

ROBOT_STATE_DIM = 9
ENTITY_STATE_DIM = 20
GOAL_ENTITY_SLOTS = 4
PRIVILEGED_STATE_DIM = ROBOT_STATE_DIM + GOAL_ENTITY_SLOTS * ENTITY_STATE_DIM

SLIDE_JOINT, HINGE_JOINT = 2, 3
"""MuJoCo's ``mjJNT_SLIDE`` and ``mjJNT_HINGE``: the joints of drawers, doors and knobs."""

BOX_CORNER_SIGNS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)


def quaternion_of(rotation: np.ndarray) -> np.ndarray:
    """The unit quaternion (w, x, y, z), w >= 0, of a 3x3 rotation matrix."""
    trace = np.trace(rotation)
    candidates = np.array([trace, rotation[0, 0], rotation[1, 1], rotation[2, 2]])
    largest = int(np.argmax(candidates))
    if largest == 0:
        scale = 2.0 * np.sqrt(1.0 + trace)
        quaternion = [scale / 4, (rotation[2, 1] - rotation[1, 2]) / scale,
                      (rotation[0, 2] - rotation[2, 0]) / scale, (rotation[1, 0] - rotation[0, 1]) / scale]
    else:
        i = largest - 1
        j, k = (i + 1) % 3, (i + 2) % 3
        scale = 2.0 * np.sqrt(1.0 + rotation[i, i] - rotation[j, j] - rotation[k, k])
        vector = np.zeros(3)
        vector[i] = scale / 4
        vector[j] = (rotation[j, i] + rotation[i, j]) / scale
        vector[k] = (rotation[k, i] + rotation[i, k]) / scale
        quaternion = [(rotation[k, j] - rotation[j, k]) / scale, *vector]
    quaternion = np.asarray(quaternion)
    return quaternion if quaternion[0] >= 0 else -quaternion


def rotation_of(quaternion_wxyz: np.ndarray) -> np.ndarray:
    """The 3x3 rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = np.asarray(quaternion_wxyz, dtype=np.float64) / np.linalg.norm(quaternion_wxyz)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def goal_entity_names(goal: Any, known: Iterable[str]) -> tuple[str, ...]:
    """The names of known entities in a parsed bddl goal (nested lists such as
    ``[["on", "akita_black_bowl_1", "plate_1"]]``), in the order they first appear."""
    known = set(known)
    names: list[str] = []

    def visit(term: Any) -> None:
        if isinstance(term, str):
            if term in known and term not in names:
                names.append(term)
        else:
            for part in term:
                visit(part)

    visit(goal)
    return tuple(names)


@dataclass(frozen=True)
class BodyEntity:
    """An object or fixture: its root body, the collision geoms of its subtree and its joints."""

    body: int
    geoms: np.ndarray
    joints: tuple[int, ...]

    def pose_and_box(self, data: Any, model: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Position, rotation and the bounding box (centre, half-sizes) of its geoms in its own frame."""
        position, rotation = data.xpos[self.body].copy(), data.xmat[self.body].reshape(3, 3).copy()
        local_boxes = model.geom_aabb[self.geoms]
        corners = local_boxes[:, None, :3] + local_boxes[:, None, 3:] * BOX_CORNER_SIGNS
        geom_rotations = data.geom_xmat[self.geoms].reshape(-1, 3, 3)
        world = data.geom_xpos[self.geoms][:, None, :] + np.einsum("gij,gkj->gki", geom_rotations, corners)
        own = (world.reshape(-1, 3) - position) @ rotation
        low, high = own.min(axis=0), own.max(axis=0)
        return position, rotation, (low + high) / 2, (high - low) / 2


@dataclass(frozen=True)
class SiteEntity:
    """A region: a site whose box LIBERO's predicates test, moving with its body (a drawer's)."""

    site: int
    joints: tuple[int, ...]

    def pose_and_box(self, data: Any, model: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        rotation = data.site_xmat[self.site].reshape(3, 3).copy()
        return data.site_xpos[self.site].copy(), rotation, np.zeros(3), model.site_size[self.site].copy()


def subtree_bodies(model: Any, root: int) -> list[int]:
    """``root`` and every body below it (a cabinet's drawers, a stove's knob)."""
    bodies = []
    for body in range(model.nbody):
        ancestor = body
        while ancestor not in (root, 0):
            ancestor = int(model.body_parentid[ancestor])
        if ancestor == root:
            bodies.append(body)
    return bodies


def moving_joints(model: Any, named_joints: Iterable[str], joint_id: Any) -> tuple[int, ...]:
    """The ids of the hinge and slide joints among ``named_joints`` (free joints dropped)."""
    ids = [joint_id(name) for name in named_joints]
    return tuple(i for i in ids if int(model.jnt_type[i]) in (SLIDE_JOINT, HINGE_JOINT))


def joint_state(joints: tuple[int, ...], data: Any, model: Any) -> np.ndarray:
    """Position, world anchor and world axis (7,) of the first of ``joints``; zeros without one."""
    if not joints:
        return np.zeros(7)
    joint = joints[0]
    return np.concatenate([[data.qpos[model.jnt_qposadr[joint]]], data.xanchor[joint], data.xaxis[joint]])


def locate_entity(problem: Any, name: str) -> BodyEntity | SiteEntity:
    """Where the simulator keeps ``name``: a region's site or an object's bodies and geoms."""
    model = problem.sim.model._model
    joint_id = problem.sim.model.joint_name2id
    if name in problem.object_sites_dict:
        joints = getattr(problem.object_sites_dict[name], "joints", None) or ()
        return SiteEntity(site=problem.sim.model.site_name2id(name), joints=moving_joints(model, joints, joint_id))
    body = int(problem.obj_body_id[name])
    bodies = subtree_bodies(model, body)
    collides = (model.geom_contype != 0) | (model.geom_conaffinity != 0)
    geoms = np.flatnonzero(np.isin(model.geom_bodyid, bodies) & collides)
    joints = problem.get_object(name).joints
    return BodyEntity(body=body, geoms=geoms, joints=moving_joints(model, joints, joint_id))


class PrivilegedStateReader:
    """Reads the privileged state of one LIBERO simulator; its goal's entities are located once.

    Args:
        simulator: LIBERO's ``OffScreenRenderEnv`` of the task.
    """

    def __init__(self, simulator: Any) -> None:
        problem = simulator.env
        self.simulator = simulator
        self.names = goal_entity_names(problem.parsed_problem["goal_state"], problem.object_states_dict)
        if len(self.names) > GOAL_ENTITY_SLOTS:
            raise ValueError(f"the goal of {problem.parsed_problem['problem_name']} names {len(self.names)} "
                             f"entities {list(self.names)}; the privileged state holds {GOAL_ENTITY_SLOTS}")
        self.entities = [locate_entity(problem, name) for name in self.names]

    def __call__(self, robot_obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """The (PRIVILEGED_STATE_DIM,) float32 vector of the current simulator state."""
        model, data = self.simulator.sim.model._model, self.simulator.sim.data._data
        state = np.zeros(PRIVILEGED_STATE_DIM, dtype=np.float64)
        x, y, z, w = robot_obs["robot0_eef_quat"]
        state[:ROBOT_STATE_DIM] = np.concatenate([robot_obs["robot0_eef_pos"], [w, x, y, z],
                                                  robot_obs["robot0_gripper_qpos"]])
        for slot, entity in enumerate(self.entities):
            position, rotation, box_center, box_half = entity.pose_and_box(data, model)
            start = ROBOT_STATE_DIM + slot * ENTITY_STATE_DIM
            state[start:start + ENTITY_STATE_DIM] = np.concatenate(
                [position, quaternion_of(rotation), box_center, box_half, joint_state(entity.joints, data, model)])
        return state.astype(np.float32)


@dataclass(frozen=True)
class Entity:
    """One goal entity read back from the vector, with the geometry an expert plans from."""

    position: np.ndarray
    rotation: np.ndarray
    box_center: np.ndarray
    box_half: np.ndarray
    joint: float
    joint_anchor: np.ndarray
    joint_axis: np.ndarray

    @property
    def box_world_center(self) -> np.ndarray:
        return self.position + self.rotation @ self.box_center

    @property
    def world_half_extent(self) -> np.ndarray:
        """Half-sizes of the world-aligned box around its (rotated) bounding box."""
        return np.abs(self.rotation) @ self.box_half

    @property
    def top(self) -> float:
        return float(self.box_world_center[2] + self.world_half_extent[2])

    @property
    def bottom(self) -> float:
        return float(self.box_world_center[2] - self.world_half_extent[2])


@dataclass(frozen=True)
class PrivilegedState:
    """The privileged state vector read back: hand pose, finger joints and goal entities."""

    hand_position: np.ndarray
    hand_rotation: np.ndarray
    fingers: np.ndarray
    entities: tuple[Entity, ...]

    @property
    def finger_gap(self) -> float:
        """Distance between the fingers' joint positions (m): about 0.078 open, 0 closed on nothing."""
        return float(self.fingers[0] - self.fingers[1])


def read_privileged_state(vector: np.ndarray) -> PrivilegedState:
    """Split a privileged state vector into the hand and its used goal entity slots."""
    vector = np.asarray(vector, dtype=np.float64)
    entities = []
    for slot in range(GOAL_ENTITY_SLOTS):
        values = vector[ROBOT_STATE_DIM + slot * ENTITY_STATE_DIM:ROBOT_STATE_DIM + (slot + 1) * ENTITY_STATE_DIM]
        if not values[3:7].any():
            break
        entities.append(Entity(position=values[0:3], rotation=rotation_of(values[3:7]), box_center=values[7:10],
                               box_half=values[10:13], joint=float(values[13]), joint_anchor=values[14:17],
                               joint_axis=values[17:20]))
    return PrivilegedState(hand_position=vector[0:3], hand_rotation=rotation_of(vector[3:7]),
                           fingers=vector[7:9], entities=tuple(entities))
