"""The graspable objects of PutOnPlate, each built from ManiSkill primitives and named.

An object is a few primitive parts (boxes, spheres, cylinders, capsules), described standing
on z = 0 around the vertical axis through the origin. Each object also names where a parallel gripper should close on it
(``grasp_point``, ``grasp_yaw``): the scripted expert reads that, the task does not.

``TRAIN_OBJECTS`` (26) appear in every split; ``UNSEEN_OBJECTS`` (8: colours and shapes
that training never shows) only in the ``semantic`` split's unseen-object episodes.
Nothing here imports ManiSkill; ``build_object`` takes the scene's actor builder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

COLOURS = {
    "red": (0.85, 0.1, 0.1),
    "green": (0.15, 0.65, 0.2),
    "blue": (0.1, 0.25, 0.85),
    "yellow": (0.95, 0.85, 0.1),
    "orange": (0.95, 0.5, 0.05),
    "purple": (0.5, 0.15, 0.7),
    "white": (0.92, 0.92, 0.92),
    "black": (0.08, 0.08, 0.08),
    "pink": (0.95, 0.45, 0.65),
    "brown": (0.45, 0.28, 0.12),
    "cyan": (0.1, 0.8, 0.85),
    "grey": (0.5, 0.5, 0.5),
    # Held out: only unseen objects wear these.
    "teal": (0.0, 0.45, 0.42),
    "magenta": (0.85, 0.0, 0.6),
    "olive": (0.45, 0.45, 0.05),
    "navy": (0.05, 0.08, 0.4),
    "gold": (0.85, 0.65, 0.15),
    "lime": (0.6, 0.95, 0.2),
}


@dataclass(frozen=True)
class Part:
    """One primitive of an object.

    Attributes:
        kind: "box", "sphere", "cylinder" or "capsule".
        size: box half extents (x, y, z); sphere (radius,); cylinder and capsule
            (radius, half_length) along ``axis``.
        offset: centre of the part in the object frame (metres).
        axis: "x", "y" or "z", the long axis of a cylinder or capsule.
    """

    kind: str
    size: tuple[float, ...]
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    axis: str = "x"

    def half_height(self) -> float:
        """Half the part's extent along z."""
        if self.kind == "box":
            return self.size[2]
        if self.kind == "sphere":
            return self.size[0]
        radius, half_length = self.size
        if self.axis != "z":
            return radius
        return half_length + (radius if self.kind == "capsule" else 0.0)

    def reach(self) -> float:
        """Largest horizontal distance from the object origin to a point of the part."""
        centre = math.hypot(self.offset[0], self.offset[1])
        if self.kind == "sphere" or (self.kind != "box" and self.axis == "z"):
            return centre + self.size[0]
        if self.kind == "box":
            half_x, half_y = self.size[0], self.size[1]
        else:
            radius, half_length = self.size
            along = half_length + (radius if self.kind == "capsule" else 0.0)
            half_x, half_y = (along, radius) if self.axis == "x" else (radius, along)
        return max(
            math.hypot(self.offset[0] + sx * half_x, self.offset[1] + sy * half_y) for sx in (-1, 1) for sy in (-1, 1)
        )


@dataclass(frozen=True)
class ObjectSpec:
    """A named graspable object.

    Attributes:
        name: what instructions call it ("red cube", "long cyan bar").
        colour: a key of ``COLOURS``.
        parts: its primitives, standing on z = 0.
        grasp_point: where the fingertips should meet, in the object frame.
        grasp_yaw: direction the fingers close along, in the object's xy plane (radians).
    """

    name: str
    colour: str
    parts: tuple[Part, ...]
    grasp_point: tuple[float, float, float]
    grasp_yaw: float

    @property
    def footprint(self) -> float:
        """Radius of a circle around the origin that covers the object seen from above;
        placement keeps these circles apart."""
        return max(part.reach() for part in self.parts)

    @property
    def height(self) -> float:
        return max(part.offset[2] + part.half_height() for part in self.parts)


FINGER_DEPTH = 0.03
"""How far below an object's top the fingertips may close before the palm touches it."""


def _grasp_height(height: float) -> float:
    """Mid-height, or FINGER_DEPTH below the top for objects taller than twice that."""
    return max(height / 2, height - FINGER_DEPTH)


def _centered(kind: str, size: tuple[float, ...], axis: str = "x") -> Part:
    """A part resting on the table with its centre above the origin."""
    part = Part(kind, size, axis=axis)
    return Part(kind, size, (0.0, 0.0, part.half_height()), axis)


def box(name: str, colour: str, hx: float, hy: float, hz: float) -> ObjectSpec:
    """A box; the fingers close across its narrower side."""
    yaw = 0.0 if hx <= hy else math.pi / 2
    return ObjectSpec(name, colour, (_centered("box", (hx, hy, hz)),), (0.0, 0.0, _grasp_height(2 * hz)), yaw)


def ball(name: str, colour: str, radius: float) -> ObjectSpec:
    return ObjectSpec(name, colour, (_centered("sphere", (radius,)),), (0.0, 0.0, radius), 0.0)


def can(name: str, colour: str, radius: float, half_height: float) -> ObjectSpec:
    """An upright cylinder."""
    part = _centered("cylinder", (radius, half_height), axis="z")
    return ObjectSpec(name, colour, (part,), (0.0, 0.0, _grasp_height(2 * half_height)), 0.0)


def lying(name: str, colour: str, kind: str, radius: float, half_length: float) -> ObjectSpec:
    """A cylinder ("roller") or capsule ("pill") lying along x; grasped across its middle."""
    part = _centered(kind, (radius, half_length), axis="x")
    return ObjectSpec(name, colour, (part,), (0.0, 0.0, radius), math.pi / 2)


def dumbbell(name: str, colour: str) -> ObjectSpec:
    """A thin bar between two cubes; grasped at the bar."""
    end = 0.018
    parts = (
        Part("box", (end, end, end), (-0.05, 0.0, end)),
        Part("box", (end, end, end), (0.05, 0.0, end)),
        Part("cylinder", (0.011, 0.035), (0.0, 0.0, end), "x"),
    )
    return ObjectSpec(name, colour, parts, (0.0, 0.0, end), math.pi / 2)


def l_block(name: str, colour: str) -> ObjectSpec:
    """Two bars at a right angle; grasped across the long bar."""
    parts = (
        Part("box", (0.04, 0.014, 0.016), (0.0, 0.0, 0.016)),
        Part("box", (0.014, 0.025, 0.016), (0.026, 0.039, 0.016)),
    )
    return ObjectSpec(name, colour, parts, (-0.01, 0.0, 0.016), math.pi / 2)


def t_block(name: str, colour: str) -> ObjectSpec:
    """A T; grasped across its stem."""
    parts = (
        Part("box", (0.045, 0.014, 0.016), (0.0, 0.03, 0.016)),
        Part("box", (0.014, 0.035, 0.016), (0.0, -0.02, 0.016)),
    )
    return ObjectSpec(name, colour, parts, (0.0, -0.02, 0.016), 0.0)


def step_block(name: str, colour: str) -> ObjectSpec:
    """A two-step stair; grasped across its taller half."""
    parts = (
        Part("box", (0.02, 0.018, 0.025), (-0.02, 0.0, 0.025)),
        Part("box", (0.02, 0.018, 0.012), (0.02, 0.0, 0.012)),
    )
    return ObjectSpec(name, colour, parts, (-0.02, 0.0, 0.025), math.pi / 2)


TRAIN_OBJECTS: tuple[ObjectSpec, ...] = (
    box("red cube", "red", 0.02, 0.02, 0.02),
    box("blue cube", "blue", 0.02, 0.02, 0.02),
    box("small green cube", "green", 0.015, 0.015, 0.015),
    box("big yellow cube", "yellow", 0.026, 0.026, 0.026),
    box("orange block", "orange", 0.032, 0.018, 0.02),
    box("purple block", "purple", 0.032, 0.018, 0.02),
    box("long red bar", "red", 0.06, 0.014, 0.014),
    box("long cyan bar", "cyan", 0.06, 0.014, 0.014),
    box("brown slab", "brown", 0.035, 0.028, 0.013),
    box("grey pillar", "grey", 0.017, 0.017, 0.045),
    box("yellow pillar", "yellow", 0.017, 0.017, 0.045),
    box("pink domino", "pink", 0.012, 0.03, 0.028),
    ball("green ball", "green", 0.022),
    ball("small yellow ball", "yellow", 0.017),
    ball("white ball", "white", 0.024),
    ball("pink ball", "pink", 0.021),
    can("red can", "red", 0.022, 0.03),
    can("blue can", "blue", 0.022, 0.03),
    can("white can", "white", 0.02, 0.035),
    lying("green roller", "green", "cylinder", 0.018, 0.045),
    lying("orange roller", "orange", "cylinder", 0.018, 0.045),
    lying("purple pill", "purple", "capsule", 0.017, 0.03),
    lying("cyan pill", "cyan", "capsule", 0.017, 0.03),
    dumbbell("black dumbbell", "black"),
    l_block("red l-block", "red"),
    t_block("blue t-block", "blue"),
)

UNSEEN_OBJECTS: tuple[ObjectSpec, ...] = (
    box("teal cube", "teal", 0.02, 0.02, 0.02),
    ball("magenta ball", "magenta", 0.022),
    can("olive can", "olive", 0.022, 0.03),
    box("long navy bar", "navy", 0.06, 0.014, 0.014),
    lying("gold roller", "gold", "cylinder", 0.018, 0.045),
    can("lime puck", "lime", 0.03, 0.012),
    step_block("white step", "white"),
    t_block("gold t-block", "gold"),
)

ALL_OBJECTS: tuple[ObjectSpec, ...] = TRAIN_OBJECTS + UNSEEN_OBJECTS
OBJECTS_BY_NAME = {spec.name: spec for spec in ALL_OBJECTS}


def shape_of(spec: ObjectSpec) -> str:
    """The last word of the name (cube, ball, can, ...): objects that share it look alike."""
    return spec.name.split()[-1]


def build_object(builder, spec: ObjectSpec, physical_material, render_material_factory) -> None:
    """Add ``spec``'s collision and visual parts to a ManiSkill/SAPIEN actor builder.

    The actor's origin is the centre of the object's bounding box, ``height / 2`` above the
    table when it stands there, so a rolling ball or roller keeps its origin on its axis.

    Args:
        builder: ``scene.create_actor_builder()``.
        spec: the object.
        physical_material: a ``sapien.physx.PhysxMaterial`` (friction) for every part.
        render_material_factory: rgb tuple -> ``sapien.render.RenderMaterial``.
    """
    import sapien

    material = render_material_factory(COLOURS[spec.colour])
    for part in spec.parts:
        centred = (part.offset[0], part.offset[1], part.offset[2] - spec.height / 2)
        pose = sapien.Pose(p=centred, q=_axis_rotation(part.axis))
        if part.kind == "box":
            builder.add_box_collision(pose, half_size=part.size, material=physical_material)
            builder.add_box_visual(pose, half_size=part.size, material=material)
        elif part.kind == "sphere":
            builder.add_sphere_collision(pose, radius=part.size[0], material=physical_material)
            builder.add_sphere_visual(pose, radius=part.size[0], material=material)
        elif part.kind in ("cylinder", "capsule"):
            add_collision = builder.add_cylinder_collision if part.kind == "cylinder" else builder.add_capsule_collision
            add_visual = builder.add_cylinder_visual if part.kind == "cylinder" else builder.add_capsule_visual
            radius, half_length = part.size
            add_collision(pose, radius=radius, half_length=half_length, material=physical_material)
            add_visual(pose, radius=radius, half_length=half_length, material=material)
        else:
            raise ValueError(f"object {spec.name!r}: unknown part kind {part.kind!r}")


def _axis_rotation(axis: str) -> tuple[float, float, float, float]:
    """Quaternion (w, x, y, z) turning SAPIEN's x-aligned cylinders and capsules onto ``axis``."""
    half = math.sqrt(0.5)
    return {"x": (1.0, 0.0, 0.0, 0.0), "y": (half, 0.0, 0.0, half), "z": (half, 0.0, -half, 0.0)}[axis]
