"""What the PutOnPlate scene looks like: table surfaces, lighting, the main camera's pose and
the image overlays.

Training sees ``TRAIN_TABLES`` under mildly jittered ``TRAIN_LIGHTING`` from a camera near
``CAMERA_EYE``; the ``vision`` split swaps in one unseen factor per episode (a table from
``UNSEEN_TABLES``, a lighting draw outside the training range, a displaced camera, or an
``ImageOverlay`` of one of ``OVERLAY_TEXTURES`` blended into the rendered image). Nothing here
imports ManiSkill.
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


@dataclass(frozen=True)
class OverlayTexture:
    """A procedural texture blended into camera images by the ``vision`` split's overlays.

    RL4VLA blends photographs of table textures into its images; these are drawn from
    patterns instead, so nothing is downloaded and nothing binary is committed.

    Attributes:
        name: identifies the texture.
        pattern: "clouds" (fractal value noise), "marble" (veined sine bands), "wood" (rings),
            "bricks", "dots", "plaid", "waves" (diagonal sine stripes) or "cells" (a Voronoi
            mosaic).
        colours: the two colours the pattern runs between, rgb in [0, 1].
        scale: pattern frequency (repeats across the texture).
        seed: seeds the pattern's randomness, so the texture is the same everywhere.
    """

    name: str
    pattern: str
    colours: tuple[tuple[float, float, float], tuple[float, float, float]]
    scale: int
    seed: int

    def image(self, size: int = 256) -> np.ndarray:
        """The texture as an RGB uint8 image (size, size, 3)."""
        rng = np.random.default_rng(self.seed)
        y, x = (np.mgrid[0:size, 0:size] + 0.5) / size
        if self.pattern == "clouds":
            value = _fractal_noise(rng, size, self.scale)
        elif self.pattern == "marble":
            value = 0.5 + 0.5 * np.sin(2 * np.pi * self.scale * (x + 0.4 * y) + 6 * _fractal_noise(rng, size, 3))
        elif self.pattern == "wood":
            radius = np.hypot(x - rng.uniform(0.2, 0.8), y - rng.uniform(-0.5, 0.0))
            value = (self.scale * radius + 1.5 * _fractal_noise(rng, size, 4)) % 1.0
        elif self.pattern == "bricks":
            row = np.floor(y * self.scale)
            shifted = x * self.scale / 2 + 0.5 * (row % 2)
            mortar = (y * self.scale % 1.0 < 0.12) | (shifted % 1.0 < 0.06)
            value = np.where(mortar, 1.0, 0.25 * _fractal_noise(rng, size, 8))
        elif self.pattern == "dots":
            cell_x, cell_y = (x * self.scale) % 1.0 - 0.5, (y * self.scale) % 1.0 - 0.5
            value = (np.hypot(cell_x, cell_y) < 0.3).astype(float)
        elif self.pattern == "plaid":
            value = 0.5 * ((x * self.scale) % 1.0 < 0.35) + 0.5 * ((y * self.scale) % 1.0 < 0.35)
        elif self.pattern == "waves":
            value = 0.5 + 0.5 * np.sin(2 * np.pi * self.scale * (x - y))
        elif self.pattern == "cells":
            centres = rng.random((self.scale * self.scale, 2))
            distance = np.hypot(x[..., None] - centres[:, 0], y[..., None] - centres[:, 1])
            value = rng.random(len(centres))[distance.argmin(axis=-1)]
        else:
            raise ValueError(f"overlay texture {self.name!r}: unknown pattern {self.pattern!r}")
        first, second = np.asarray(self.colours[0]), np.asarray(self.colours[1])
        rgb = first + value[..., None] * (second - first)
        return (np.clip(rgb, 0.0, 1.0) * 255).round().astype(np.uint8)


def _fractal_noise(rng: np.random.Generator, size: int, cells: int) -> np.ndarray:
    """Value noise in [0, 1]: random grids of ``cells``, 2x, 4x cells, smoothly upsampled and
    summed with halving weights."""
    total, weight, weights = np.zeros((size, size)), 1.0, 0.0
    for octave in range(4):
        count = cells * 2**octave
        grid = rng.random((count + 1, count + 1))
        position = np.linspace(0, count, size, endpoint=False)
        index = position.astype(int)
        fraction = position - index
        fraction = fraction * fraction * (3 - 2 * fraction)
        rows = grid[index] * (1 - fraction)[:, None] + grid[index + 1] * fraction[:, None]
        layer = rows[:, index] * (1 - fraction) + rows[:, index + 1] * fraction
        total, weights, weight = total + weight * layer, weights + weight, weight / 2
    return total / weights


_OVERLAY_PALETTES = (
    ((0.85, 0.75, 0.55), (0.35, 0.2, 0.1)),
    ((0.1, 0.2, 0.45), (0.8, 0.85, 0.95)),
    ((0.9, 0.9, 0.88), (0.3, 0.32, 0.35)),
    ((0.75, 0.2, 0.15), (0.95, 0.85, 0.5)),
    ((0.1, 0.35, 0.15), (0.7, 0.9, 0.4)),
    ((0.5, 0.1, 0.5), (0.95, 0.7, 0.2)),
    ((0.05, 0.05, 0.05), (0.95, 0.95, 0.95)),
    ((0.2, 0.6, 0.75), (0.95, 0.5, 0.55)),
)
_OVERLAY_PATTERNS = (("clouds", 3), ("marble", 3), ("wood", 6), ("bricks", 8), ("dots", 7), ("plaid", 5), ("waves", 6),
                     ("cells", 5))

OVERLAY_TEXTURES: tuple[OverlayTexture, ...] = tuple(
    OverlayTexture(f"{pattern} {variant}", pattern, _OVERLAY_PALETTES[(index + 3 * variant) % len(_OVERLAY_PALETTES)],
                   scale + variant, seed=100 + 10 * index + variant)
    for variant in range(2)
    for index, (pattern, scale) in enumerate(_OVERLAY_PATTERNS)
)
"""16 textures (eight patterns in two palettes each), as RL4VLA's test set holds 16 texture
images."""

OVERLAY_STRENGTHS = {"weak": 0.3, "strong": 0.5}
"""How much of the texture an overlaid pixel takes: RL4VLA's ``...03`` and ``...05`` envs
(their test textures' own mix factor is 1, so these are the blend weights)."""


@dataclass(frozen=True)
class ImageOverlay:
    """A texture blended into the main camera's images every step, after rendering.

    Both kinds follow RL4VLA's ``PutOnPlateInScene25Vision*`` envs; each frame's foreground
    (the robot, the objects and the receptacles, from the camera's segmentation) decides where
    the texture lands, so it moves with the arm (RL4VLA's "dynamic" texture and noise):

    - ``texture`` (RL4VLA's ``VisionTexture03/05``): the texture, stretched over the bounding
      box of the foreground, replaces ``strength`` of every foreground pixel; the table and
      the background keep their colour.
    - ``noise`` (RL4VLA's ``VisionWhole03/05``): a window of the texture the size of the
      image, cut from the texture laid out at twice the image's size with its top-left corner
      at the centre of the foreground's bounding box, replaces ``strength`` of every pixel.

    Only ``main_images`` get it; ``wrist_images`` stay clean (RL4VLA's scene has a single,
    third-person camera, the one it overlays).

    Attributes:
        kind: "texture" or "noise".
        strength: the blend weight of the texture, 0.3 (weak) or 0.5 (strong).
        texture: index into ``OVERLAY_TEXTURES``.
    """

    kind: str
    strength: float
    texture: int


def image_overlay(rng: np.random.Generator, kind: str, strength: str) -> ImageOverlay:
    """An overlay of ``kind`` ("texture" or "noise") at ``strength`` ("weak" or "strong")
    with a texture drawn from ``OVERLAY_TEXTURES``."""
    return ImageOverlay(kind, OVERLAY_STRENGTHS[strength], int(rng.integers(len(OVERLAY_TEXTURES))))
