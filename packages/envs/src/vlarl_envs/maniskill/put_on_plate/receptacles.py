"""The receptacles of PutOnPlate: the training plate and those training never shows.

A receptacle is a flat base (a disc or a square slab) with a rim around it, built from
ManiSkill primitives and placed level on the table. Training only ever shows ``TRAIN_RECEPTACLE``
(the white plate, whose name is the "plate" of the canonical instruction); the ``semantic``
split's ``plate`` and ``multi_plate`` episodes name one of ``UNSEEN_RECEPTACLES`` (other
shapes, colours, sizes and rim heights), as RL4VLA's ``PutOnPlateInScene25Plate`` and
``...MultiPlate`` swap the training plate for cloths, boards, pans and the like. No unseen
name contains "plate", so "the plate" names the training plate alone when several stand on
the table. Nothing here imports ManiSkill; ``build_receptacle`` takes the scene's actor builder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

RIM_SEGMENTS = 24
"""A round rim is this many short boxes standing around the disc."""
RIM_HALF_WIDTH = 0.003
RIM_MARGIN = 0.01
"""An object counts as on a receptacle when its centre is this far inside the rim, or more."""


@dataclass(frozen=True)
class ReceptacleSpec:
    """A named receptacle standing on the table, centred on its origin.

    Attributes:
        name: what instructions call it ("plate", "blue bowl").
        colour: rgb of the base, in [0, 1].
        rim_colour: rgb of the rim.
        shape: "round" (a disc) or "square" (a slab, its sides along the table's x and y).
        half_size: the disc's radius or half the square's side (metres), where the rim stands.
        thickness: height of the base; its top is where objects rest.
        rim_height: how far the rim rises above the base's top.
    """

    name: str
    colour: tuple[float, float, float]
    rim_colour: tuple[float, float, float]
    shape: str
    half_size: float
    thickness: float
    rim_height: float

    @property
    def footprint(self) -> float:
        """Radius of a circle around the centre that covers the base, for placement (the
        training plate's is its radius, as before receptacles varied)."""
        return self.half_size if self.shape == "round" else self.half_size * math.sqrt(2)

    @property
    def square(self) -> bool:
        return self.shape == "square"


TRAIN_RECEPTACLE = ReceptacleSpec("plate", (0.95, 0.95, 0.95), (0.85, 0.85, 0.85), "round", 0.085, 0.01, 0.012)

UNSEEN_RECEPTACLES: tuple[ReceptacleSpec, ...] = (
    ReceptacleSpec("blue bowl", (0.15, 0.3, 0.8), (0.1, 0.2, 0.6), "round", 0.082, 0.012, 0.028),
    ReceptacleSpec("red tray", (0.8, 0.15, 0.12), (0.6, 0.1, 0.08), "square", 0.08, 0.008, 0.016),
    ReceptacleSpec("green mat", (0.2, 0.6, 0.25), (0.15, 0.45, 0.2), "square", 0.088, 0.004, 0.005),
    ReceptacleSpec("black dish", (0.1, 0.1, 0.1), (0.2, 0.2, 0.2), "round", 0.1, 0.008, 0.01),
    ReceptacleSpec("yellow saucer", (0.95, 0.8, 0.2), (0.85, 0.7, 0.15), "round", 0.08, 0.006, 0.008),
    ReceptacleSpec("purple tray", (0.5, 0.2, 0.65), (0.4, 0.15, 0.5), "square", 0.085, 0.01, 0.02),
    ReceptacleSpec("orange bowl", (0.95, 0.55, 0.1), (0.8, 0.4, 0.05), "round", 0.09, 0.012, 0.024),
    ReceptacleSpec("cyan board", (0.2, 0.75, 0.8), (0.15, 0.6, 0.65), "square", 0.082, 0.016, 0.005),
)

ALL_RECEPTACLES: tuple[ReceptacleSpec, ...] = (TRAIN_RECEPTACLE, *UNSEEN_RECEPTACLES)
RECEPTACLES_BY_NAME = {spec.name: spec for spec in ALL_RECEPTACLES}


def build_receptacle(builder, spec: ReceptacleSpec, render_material_factory) -> None:
    """Add ``spec``'s collision and visual shapes to a ManiSkill/SAPIEN actor builder.

    The actor's origin is the centre of the base's bottom face, so a receptacle placed at
    z = 0 stands on the table. A round rim is ``RIM_SEGMENTS`` thin boxes on the circle of
    radius ``half_size``; a square one is four walls on the square's sides.

    Args:
        builder: ``scene.create_actor_builder()``.
        spec: the receptacle.
        render_material_factory: rgb tuple -> ``sapien.render.RenderMaterial``.
    """
    import sapien

    base_material = render_material_factory(spec.colour)
    rim_material = render_material_factory(spec.rim_colour)
    thickness, half_size = spec.thickness, spec.half_size
    rim_z = thickness + spec.rim_height / 2
    if spec.square:
        base = sapien.Pose(p=[0, 0, thickness / 2])
        builder.add_box_collision(base, half_size=(half_size, half_size, thickness / 2))
        builder.add_box_visual(base, half_size=(half_size, half_size, thickness / 2), material=base_material)
        along, across, half_height = half_size + RIM_HALF_WIDTH, RIM_HALF_WIDTH, spec.rim_height / 2
        walls = [(sapien.Pose(p=[0, side * half_size, rim_z]), (along, across, half_height)) for side in (-1, 1)]
        walls += [(sapien.Pose(p=[side * half_size, 0, rim_z]), (across, along, half_height)) for side in (-1, 1)]
    else:
        disc = sapien.Pose(p=[0, 0, thickness / 2], q=[math.sqrt(0.5), 0, -math.sqrt(0.5), 0])
        builder.add_cylinder_collision(disc, radius=half_size, half_length=thickness / 2)
        builder.add_cylinder_visual(disc, radius=half_size, half_length=thickness / 2, material=base_material)
        segment = math.pi * half_size / RIM_SEGMENTS
        walls = []
        for index in range(RIM_SEGMENTS):
            angle = 2 * math.pi * index / RIM_SEGMENTS
            pose = sapien.Pose(
                p=[half_size * math.cos(angle), half_size * math.sin(angle), rim_z],
                q=[math.cos(angle / 2), 0, 0, math.sin(angle / 2)],
            )
            walls.append((pose, (RIM_HALF_WIDTH, segment * 1.05, spec.rim_height / 2)))
    for pose, wall_half_size in walls:
        builder.add_box_collision(pose, half_size=wall_half_size)
        builder.add_box_visual(pose, half_size=wall_half_size, material=rim_material)
