"""The fixed, seeded episode lists of PutOnPlate's splits.

An episode is everything that varies between resets: which objects stand where, which one
the instruction names, the receptacles, the table, the light, the camera, an image overlay,
the robot's start pose and an optional mid-episode move of the target. ``make_episode(split,
episode_id)`` derives it from a generator seeded by ``(split stream, episode_id)`` only, so
episode 17 of ``vision`` is the same on every machine and in every process, and evaluation
replays exactly.

Splits and their variations (each out-of-distribution split cycles through its variations by
``episode_id % len(VARIATIONS[split])``, so any contiguous block of ids covers them evenly, and
each split's size is a multiple of its variation count: 30 episodes of each vision and
semantic variation, 50 of each execution one):

- ``train``: one seen object and the white plate, as in RL4VLA's training scene, the canonical
  instruction, seen tables, neutral light, nominal camera, no overlay, robot near its rest pose,
  both in ``TRAIN_REGION``. Every other variation but ``multi_object`` keeps the one object.
- ``vision`` (210): ``table`` (unseen colours and textures), ``lighting`` (dim, bright, tinted
  or low-angle), ``camera`` (eye moved 4-8 cm, aim 2-4 cm), ``texture_weak`` and
  ``texture_strong`` (a procedural texture over the robot and objects in the image, blend
  weight 0.3 or 0.5), ``noise_weak`` and ``noise_strong`` (a procedural texture over the whole
  image, 0.3 or 0.5); ``appearance.ImageOverlay`` says exactly what the last four do.
- ``semantic`` (210): ``object`` (an unseen object is the target), ``instruction`` (an unseen
  phrasing), ``multi_object`` (4-5 distractors, at least two sharing the target's colour or
  shape, so only the full name tells them apart), ``plate`` (an unseen receptacle instead of
  the plate, named in the instruction), ``multi_plate`` (two receptacles, any two of the plate
  and the unseen ones; the instruction names the target, and only the target counts).
- ``execution`` (210): ``position`` (the target starts in a band outside ``TRAIN_REGION``),
  ``robot_pose`` (start pose 0.35-0.8 rad from rest), ``moved_object`` (the target jumps to
  a new spot a few steps in).

Only the variations that use them draw a receptacle or an overlay from the episode's generator, so
the other episodes' layouts do not depend on how many receptacles and overlays there are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vlarl_envs.maniskill.put_on_plate.appearance import (
    TRAIN_TABLES,
    UNSEEN_TABLES,
    ImageOverlay,
    Lighting,
    image_overlay,
    train_camera,
    train_lighting,
    unseen_camera,
    unseen_lighting,
)
from vlarl_envs.maniskill.put_on_plate.instructions import PUT_ON_PLATE_INSTRUCTIONS, instruction_task
from vlarl_envs.maniskill.put_on_plate.objects import (
    OBJECTS_BY_NAME,
    TRAIN_OBJECTS,
    UNSEEN_OBJECTS,
    ObjectSpec,
    shape_of,
)
from vlarl_envs.maniskill.put_on_plate.receptacles import (
    ALL_RECEPTACLES,
    RECEPTACLES_BY_NAME,
    TRAIN_RECEPTACLE,
    UNSEEN_RECEPTACLES,
    ReceptacleSpec,
)

SPLIT_STREAMS = {"train": 0, "vision": 1, "semantic": 2, "execution": 3}
VARIATIONS = {
    "train": ("none",),
    "vision": ("table", "lighting", "camera", "texture_weak", "texture_strong", "noise_weak", "noise_strong"),
    "semantic": ("object", "instruction", "multi_object", "plate", "multi_plate"),
    "execution": ("position", "robot_pose", "moved_object"),
}
SPLIT_SIZES = {"train": 2**31, "vision": 7 * 30, "semantic": 5 * 42, "execution": 3 * 70}
"""``train`` takes any id a trainer draws (``rng.integers(2**31)``, as ManiSkill's seeded tasks), each a
fresh layout. The out-of-distribution splits are fixed lists whose sizes are multiples of their variation
counts, so every variation has as many episodes, and the same for all three, so one
``eval.episodes_per_task`` can play each whole."""
OVERLAY_VARIATIONS = {
    "texture_weak": ("texture", "weak"),
    "texture_strong": ("texture", "strong"),
    "noise_weak": ("noise", "weak"),
    "noise_strong": ("noise", "strong"),
}
"""The ``vision`` variations that blend a texture into the image: variation -> (kind, strength)."""

TRAIN_REGION = ((-0.2, 0.08), (-0.22, 0.22))
"""(x range, y range) of object and plate centres in training, metres on the table top
(the robot base stands at x = -0.615)."""
UNSEEN_BAND = ((0.08, 0.13), (0.22, 0.27))
"""The ``position`` variation's target starts beyond TRAIN_REGION: at x in the first range
(any y in TRAIN_REGION) or at |y| in the second range (any x in TRAIN_REGION)."""
PLATE_RADIUS = TRAIN_RECEPTACLE.half_size
CLEARANCE = 0.012
"""Minimum gap between the footprints of two objects, two receptacles, or an object and a receptacle."""
FINGER_REACH = 0.065
"""Open Panda fingers reach this far from the grasp point: nothing else may stand closer
to the target, so a top-down grasp never lands a finger on a neighbour."""
REST_QPOS = (0.0, np.pi / 8, 0.0, -5 * np.pi / 8, 0.0, 3 * np.pi / 4, -np.pi / 4, 0.04, 0.04)
"""Panda (wrist camera) joints at rest: seven arm joints, then the two fingers, open."""
UNSEEN_POSE_SCALE = np.array([0.45, 0.25, 0.3, 0.3, 0.3, 0.25, 0.5])


@dataclass(frozen=True)
class Placement:
    """An object's start on the table: its name, centre (x, y) and yaw (radians)."""

    name: str
    x: float
    y: float
    yaw: float


@dataclass(frozen=True)
class ObjectMove:
    """Teleport the target to (x, y, yaw) before control step ``step`` (if not held)."""

    step: int
    x: float
    y: float
    yaw: float


@dataclass(frozen=True)
class PutOnPlateEpisode:
    """One episode of a split; ``placements[0]`` is the target object, ``receptacles[0]`` the
    receptacle it must go on (receptacles stand level: their yaw is 0)."""

    split: str
    episode_id: int
    variation: str
    placements: tuple[Placement, ...]
    receptacles: tuple[Placement, ...]
    instruction: str
    table: str
    lighting: Lighting
    camera_eye: tuple[float, float, float]
    camera_target: tuple[float, float, float]
    robot_qpos: tuple[float, ...]
    move: ObjectMove | None = None
    overlay: ImageOverlay | None = None

    @property
    def target(self) -> str:
        return self.placements[0].name

    @property
    def receptacle(self) -> str:
        """The name of the receptacle the target must go on."""
        return self.receptacles[0].name

    @property
    def plate_xy(self) -> tuple[float, float]:
        """Centre of the target receptacle on the table."""
        return self.receptacles[0].x, self.receptacles[0].y


def make_episode(split: str, episode_id: int) -> PutOnPlateEpisode:
    """Episode ``episode_id`` of ``split``; the same arguments always give the same episode."""
    if split not in SPLIT_STREAMS:
        raise ValueError(f"unknown PutOnPlate split {split!r}; expected one of {list(SPLIT_STREAMS)}")
    if not 0 <= episode_id < SPLIT_SIZES[split]:
        raise ValueError(f"PutOnPlate split {split!r} has episodes 0..{SPLIT_SIZES[split] - 1}, got {episode_id}")
    rng = np.random.default_rng([SPLIT_STREAMS[split], episode_id])
    variations = VARIATIONS[split]
    variation = variations[episode_id % len(variations)]

    if variation == "object":
        target = _pick(rng, UNSEEN_OBJECTS)
    elif variation == "multi_object":
        target = _pick(rng, tuple(spec for spec in TRAIN_OBJECTS if len(_similar(spec)) >= 2))
    else:
        target = _pick(rng, TRAIN_OBJECTS)
    if variation == "multi_object":
        others = [spec for spec in TRAIN_OBJECTS if spec.name != target.name]
        distractors = _similar_distractors(rng, target, others, count=int(rng.integers(4, 6)))
    else:
        distractors = []
    receptacles = _receptacles(rng, variation)

    receptacle_xys, placements = _layout(rng, target, distractors, receptacles, target_outside=variation == "position")
    tables = UNSEEN_TABLES if variation == "table" else TRAIN_TABLES
    table = tables[int(rng.integers(len(tables)))]
    lighting = unseen_lighting(rng) if variation == "lighting" else train_lighting(rng)
    eye, aim = unseen_camera(rng) if variation == "camera" else train_camera(rng)
    if variation in ("plate", "multi_plate"):
        instruction = PUT_ON_PLATE_INSTRUCTIONS.canonical(instruction_task(target.name, receptacles[0].name))
    else:
        instruction = PUT_ON_PLATE_INSTRUCTIONS.choose(target.name, variation == "instruction", rng)
    receptacle_placements = tuple(Placement(spec.name, x, y, 0.0) for spec, (x, y) in zip(receptacles, receptacle_xys))
    move = _move(rng, receptacle_placements, placements) if variation == "moved_object" else None
    robot_qpos = _robot_qpos(rng, unseen=variation == "robot_pose")
    overlay = image_overlay(rng, *OVERLAY_VARIATIONS[variation]) if variation in OVERLAY_VARIATIONS else None
    return PutOnPlateEpisode(
        split=split,
        episode_id=int(episode_id),
        variation=variation,
        placements=placements,
        receptacles=receptacle_placements,
        instruction=instruction,
        table=table.name,
        lighting=lighting,
        camera_eye=eye,
        camera_target=aim,
        robot_qpos=robot_qpos,
        move=move,
        overlay=overlay,
    )


def split_episodes(split: str) -> list[PutOnPlateEpisode]:
    """The whole fixed list of a split (``SPLIT_SIZES[split]`` episodes)."""
    return [make_episode(split, episode_id) for episode_id in range(SPLIT_SIZES[split])]


def _pick(rng: np.random.Generator, specs: tuple[ObjectSpec, ...]) -> ObjectSpec:
    return specs[int(rng.integers(len(specs)))]


def _similar(target: ObjectSpec) -> list[ObjectSpec]:
    """Training objects other than ``target`` that share its colour or its shape."""
    return [
        spec
        for spec in TRAIN_OBJECTS
        if spec.name != target.name and (spec.colour == target.colour or shape_of(spec) == shape_of(target))
    ]


def _similar_distractors(
    rng: np.random.Generator, target: ObjectSpec, others: list[ObjectSpec], count: int
) -> list[ObjectSpec]:
    """``count`` distractors, two or more of which share the target's colour or shape."""
    similar = _similar(target)
    different = [spec for spec in others if spec not in similar]
    n_similar = min(len(similar), max(2, int(rng.integers(2, count + 1))))
    picked = [similar[i] for i in rng.choice(len(similar), size=n_similar, replace=False)]
    picked += [different[i] for i in rng.choice(len(different), size=count - n_similar, replace=False)]
    return picked


def _receptacles(rng: np.random.Generator, variation: str) -> list[ReceptacleSpec]:
    """The episode's receptacles, the target first: the plate; for ``plate`` an unseen one; for
    ``multi_plate`` two different ones of all (RL4VLA's MultiPlate-train names the plate beside
    an unseen one, its MultiPlate-test two unseen ones: both happen here)."""
    if variation == "plate":
        return [_pick(rng, UNSEEN_RECEPTACLES)]
    if variation == "multi_plate":
        return [ALL_RECEPTACLES[i] for i in rng.choice(len(ALL_RECEPTACLES), size=2, replace=False)]
    return [TRAIN_RECEPTACLE]


def _uniform_in(rng: np.random.Generator, region) -> np.ndarray:
    (x_low, x_high), (y_low, y_high) = region
    return np.array([rng.uniform(x_low, x_high), rng.uniform(y_low, y_high)])


def _outside_point(rng: np.random.Generator) -> np.ndarray:
    """A point of UNSEEN_BAND: beyond the far edge of TRAIN_REGION or beyond a side."""
    (train_x, train_y), (band_x, band_y) = TRAIN_REGION, UNSEEN_BAND
    if rng.random() < 0.5:
        return np.array([rng.uniform(*band_x), rng.uniform(*train_y)])
    side = 1.0 if rng.random() < 0.5 else -1.0
    return np.array([rng.uniform(*train_x), side * rng.uniform(*band_y)])


def _layout(
    rng: np.random.Generator,
    target: ObjectSpec,
    distractors: list[ObjectSpec],
    receptacles: list[ReceptacleSpec],
    target_outside: bool,
) -> tuple[tuple[tuple[float, float], ...], tuple[Placement, ...]]:
    """Receptacle centres and object placements with no two footprints closer than CLEARANCE.

    The target receptacle first, then any others, then each object by rejection sampling; a
    layout that leaves no room for something starts over.
    """
    specs = [target, *distractors]
    receptacle_region = ((TRAIN_REGION[0][0] + 0.03, TRAIN_REGION[0][1]), TRAIN_REGION[1])
    for _ in range(100):
        first = _uniform_in(rng, receptacle_region)
        circles = [(first, receptacles[0].footprint)]
        for receptacle in receptacles[1:]:
            centre = _free_spot(rng, circles, receptacle.footprint, lambda: _uniform_in(rng, receptacle_region))
            if centre is None:
                break
            circles.append((centre, receptacle.footprint))
        else:
            placements = []
            for index, spec in enumerate(specs):
                reach = max(spec.footprint, FINGER_REACH) if index == 0 else spec.footprint
                outside = index == 0 and target_outside
                draw = (lambda: _outside_point(rng)) if outside else (lambda: _uniform_in(rng, TRAIN_REGION))
                centre = _free_spot(rng, circles, reach, draw)
                if centre is None:
                    break
                circles.append((centre, reach))
                yaw = float(rng.uniform(-np.pi, np.pi))
                placements.append(Placement(spec.name, float(centre[0]), float(centre[1]), yaw))
            else:
                centres = tuple((float(circle[0][0]), float(circle[0][1])) for circle in circles[: len(receptacles)])
                return centres, tuple(placements)
    names = [spec.name for spec in specs] + [receptacle.name for receptacle in receptacles]
    raise RuntimeError(f"no collision-free layout for {names}")


def _free_spot(rng: np.random.Generator, circles, reach: float, draw) -> np.ndarray | None:
    """A point from ``draw()`` whose circle of ``reach`` keeps CLEARANCE from every circle;
    None after 200 tries."""
    for _ in range(200):
        centre = draw()
        if all(np.linalg.norm(centre - other) >= radius + reach + CLEARANCE for other, radius in circles):
            return centre
    return None


def _move(
    rng: np.random.Generator, receptacles: tuple[Placement, ...], placements: tuple[Placement, ...]
) -> ObjectMove:
    """A new free spot for the target, at least 8 cm from where it started."""
    target = OBJECTS_BY_NAME[placements[0].name]
    keepout = max(target.footprint, FINGER_REACH)
    start = np.array([placements[0].x, placements[0].y])
    circles = [(np.array([r.x, r.y]), RECEPTACLES_BY_NAME[r.name].footprint) for r in receptacles]
    circles += [(np.array([p.x, p.y]), OBJECTS_BY_NAME[p.name].footprint) for p in placements[1:]]
    for _ in range(1000):
        centre = _uniform_in(rng, TRAIN_REGION)
        far_enough = np.linalg.norm(centre - start) >= 0.08
        if far_enough and all(np.linalg.norm(centre - c) >= r + keepout + CLEARANCE for c, r in circles):
            step = int(rng.integers(6, 13))
            return ObjectMove(step, float(centre[0]), float(centre[1]), float(rng.uniform(-np.pi, np.pi)))
    raise RuntimeError(f"no free spot to move {target.name!r} to")


def _robot_qpos(rng: np.random.Generator, unseen: bool) -> tuple[float, ...]:
    """Rest pose plus N(0, 0.02) noise in training, or 0.35-0.8 rad (norm) away from it."""
    rest = np.asarray(REST_QPOS)
    if unseen:
        while True:
            offset = rng.uniform(-1.0, 1.0, 7) * UNSEEN_POSE_SCALE
            if 0.35 <= np.linalg.norm(offset) <= 0.8:
                break
    else:
        offset = rng.normal(0.0, 0.02, 7)
    qpos = rest.copy()
    qpos[:7] += offset
    return tuple(float(v) for v in qpos)
