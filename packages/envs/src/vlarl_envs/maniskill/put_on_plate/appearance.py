"""What the PutOnPlate scene looks like: table surfaces, lighting and the main camera's pose.

Training sees ``TRAIN_TABLES`` under mildly jittered ``TRAIN_LIGHTING`` from a camera near
``CAMERA_EYE``; the ``vision`` split swaps in one unseen factor per episode (a table from
``UNSEEN_TABLES``, a lighting draw outside the training range, or a displaced camera).
Nothing here imports ManiSkill.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TableLook:
    """A table surface: a plain colour, or a procedural texture of two colours.

    Attributes:
        name: identifies the look in episode records.
        colour: main colour, rgb in [0, 1].
        pattern: "plain", "checker", "stripes" or "speckle".
        second_colour: the pattern's other colour.
        cells: pattern frequency (checker squares or stripes across the table).
    """

    name: str
    colour: tuple[float, float, float]
    pattern: str = "plain"
    second_colour: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cells: int = 8

    def texture(self, size: int = 256) -> np.ndarray:
        """The look as an RGBA uint8 image (size, size, 4)."""
        rows, cols = np.mgrid[0:size, 0:size] * self.cells // size
        if self.pattern == "plain":
            mask = np.zeros((size, size), bool)
        elif self.pattern == "checker":
            mask = (rows + cols) % 2 == 1
        elif self.pattern == "stripes":
            mask = cols % 2 == 1
        elif self.pattern == "speckle":
            mask = np.random.default_rng(len(self.name)).random((size, size)) < 0.35
        else:
            raise ValueError(f"table look {self.name!r}: unknown pattern {self.pattern!r}")
        image = np.where(mask[..., None], np.asarray(self.second_colour), np.asarray(self.colour))
        rgba = np.concatenate([image, np.ones((size, size, 1))], axis=-1)
        return (rgba * 255).round().astype(np.uint8)


TRAIN_TABLES: tuple[TableLook, ...] = (
    TableLook("light wood", (0.78, 0.64, 0.45)),
    TableLook("dark wood", (0.45, 0.3, 0.18)),
    TableLook("grey", (0.6, 0.6, 0.6)),
)

UNSEEN_TABLES: tuple[TableLook, ...] = (
    TableLook("blue cloth", (0.2, 0.3, 0.65)),
    TableLook("green felt", (0.15, 0.45, 0.25)),
    TableLook("black and white checker", (0.9, 0.9, 0.9), "checker", (0.1, 0.1, 0.1), 10),
    TableLook("red and cream checker", (0.95, 0.9, 0.8), "checker", (0.7, 0.1, 0.1), 6),
    TableLook("yellow stripes", (0.95, 0.85, 0.3), "stripes", (0.5, 0.4, 0.1), 12),
    TableLook("speckled granite", (0.7, 0.7, 0.68), "speckle", (0.25, 0.25, 0.28)),
)

ALL_TABLES = TRAIN_TABLES + UNSEEN_TABLES


@dataclass(frozen=True)
class Lighting:
    """Ambient light and one directional key light.

    Attributes:
        ambient: rgb ambient intensity.
        key_colour: rgb intensity of the key light.
        key_direction: direction the key light shines along (world frame).
    """

    ambient: tuple[float, float, float]
    key_colour: tuple[float, float, float]
    key_direction: tuple[float, float, float]


def train_lighting(rng: np.random.Generator) -> Lighting:
    """Neutral white light, intensity within +-15%."""
    ambient = 0.3 * rng.uniform(0.85, 1.15)
    key = rng.uniform(0.85, 1.15)
    return Lighting((ambient,) * 3, (key,) * 3, (1.0, 1.0, -1.0))


def unseen_lighting(rng: np.random.Generator) -> Lighting:
    """Dim, bright, tinted or low-angle light: each outside what ``train_lighting`` draws."""
    kind = int(rng.integers(4))
    if kind == 0:
        scale = rng.uniform(0.3, 0.5)
        return Lighting((0.3 * scale,) * 3, (scale,) * 3, (1.0, 1.0, -1.0))
    if kind == 1:
        scale = rng.uniform(1.6, 2.2)
        return Lighting((0.3 * scale,) * 3, (scale,) * 3, (1.0, 1.0, -1.0))
    if kind == 2:
        tint = np.array([(1.0, 0.65, 0.35), (0.45, 0.65, 1.0)][int(rng.integers(2))])
        return Lighting(tuple(0.35 * tint), tuple(1.1 * tint), (1.0, 1.0, -1.0))
    angle = rng.uniform(0, 2 * np.pi)
    return Lighting((0.25,) * 3, (1.2,) * 3, (float(np.cos(angle)), float(np.sin(angle)), -0.25))


CAMERA_EYE = (0.22, 0.48, 0.5)
"""The main camera faces the robot from across the table, looking down at the workspace."""
CAMERA_TARGET = (-0.08, 0.0, 0.0)


def train_camera(rng: np.random.Generator) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(eye, target) within 5 mm of the nominal pose."""
    eye = np.asarray(CAMERA_EYE) + rng.uniform(-0.005, 0.005, 3)
    return tuple(eye.tolist()), CAMERA_TARGET


def unseen_camera(rng: np.random.Generator) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(eye, target) moved 4-8 cm and aimed 2-4 cm off the nominal pose."""
    eye_offset = _random_direction(rng) * rng.uniform(0.04, 0.08)
    target_offset = _random_direction(rng) * rng.uniform(0.02, 0.04)
    target_offset[2] = 0.0
    eye = np.asarray(CAMERA_EYE) + eye_offset
    target = np.asarray(CAMERA_TARGET) + target_offset
    return tuple(eye.tolist()), tuple(target.tolist())


def _random_direction(rng: np.random.Generator) -> np.ndarray:
    vector = rng.normal(size=3)
    return vector / np.linalg.norm(vector)
