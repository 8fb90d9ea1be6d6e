"""Sim-to-real robustness episodes of GSEnv: what each episode of the ``robustness`` split changes.

``robustness`` is one split that cycles three visual variations by ``episode_id % 3``:

- ``camera``: the camera moved 2-5 cm in a random direction and turned 1-3 degrees about a
  random axis (a re-mounted or bumped camera);
- ``appearance``: the splats' colours scaled: scene-wide brightness 0.7-0.9 or 1.1-1.3 and a
  white-balance tint of 0.85-1.15 per channel, then each of the robot, cube, plate and table
  tinted by another 0.9-1.1 per channel (a differently lit room, another exposure);
- ``background``: the table splats recoloured with a procedural pattern (checker, stripes or
  blotches in two random colours, 4-12 cm period) and the backdrop photo replaced by a
  two-colour gradient (another table cloth, another room).

One split rather than three, as PutOnPlate's ``vision`` split does: an evaluation of its first
N episodes covers the three variations evenly, and the family's ``group`` reports each on its own
(``eval/robustness/group_success_once/camera``, ...). Episode k of ``robustness`` starts from
episode k of ``test`` (the same layout), so its success compares with ``test`` episode by episode
and the difference is the visual shift alone.

Everything here is plain numbers (no torch, no simulator), drawn from ``(ROBUSTNESS_STREAM,
episode_id)``: the same episode looks the same on every machine. ``train`` and ``test`` episodes
get ``NOMINAL``, the unchanged render. ``vlarl_envs.gsenv.restyle`` applies a ``Look`` to a splat
scene and camera.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ROBUSTNESS_SPLIT = "robustness"
VARIATIONS = ("camera", "appearance", "background")
"""The ``robustness`` variations, episode ``k`` having ``VARIATIONS[k % 3]``."""
ROBUSTNESS_STREAM = 2
"""Seeds the variation draws; ``train`` and ``test`` layouts use streams 0 and 1."""
NO_VARIATION = "none"

CAMERA_SHIFT_RANGE = (0.02, 0.05)
"""How far (m) the camera moves."""
CAMERA_TURN_RANGE = (np.deg2rad(1.0), np.deg2rad(3.0))
"""How far (rad) the camera turns."""
BRIGHTNESS_CHANGE_RANGE = (0.1, 0.3)
"""Scene brightness is 1 - c or 1 + c for c in this range (never within 10% of unchanged)."""
TINT_RANGE = (0.85, 1.15)
PART_TINT_RANGE = (0.9, 1.1)
PARTS = ("robot", "cube", "plate", "table")
"""What ``appearance`` tints separately."""
PATTERNS = ("checker", "stripes", "blotches")
PATTERN_PERIOD_RANGE = (0.04, 0.12)
COLOUR_RANGE = (0.1, 0.9)

Colour = tuple[float, float, float]


@dataclass(frozen=True)
class BackgroundStyle:
    """A procedural table and backdrop.

    Attributes:
        pattern: "checker", "stripes" or "blotches", laid over the table splats' world xy.
        colours: the pattern's two RGB colours in [0, 1].
        period: the pattern's period (m).
        angle: the pattern's rotation about z (rad).
        phase: the pattern's two phases, in periods (its offset along x and y, or the phases of
            the blotches' waves).
        backdrop: RGB at the top and at the bottom of the gradient that replaces the backdrop.
    """

    pattern: str
    colours: tuple[Colour, Colour]
    period: float
    angle: float
    phase: tuple[float, float]
    backdrop: tuple[Colour, Colour]


@dataclass(frozen=True)
class Look:
    """How one episode's images differ from the nominal render (hashable, so renders can be cached).

    Attributes:
        variation: "none", "camera", "appearance" or "background" (``info["variation"]``).
        camera_shift: (3,) world offset (m) of the camera centre.
        camera_turn: (3,) rotation vector (rad) in the camera's own frame (x right, y down, z forward).
        brightness: scene-wide colour factor.
        tint: (3,) scene-wide per-channel colour factors.
        part_tints: (part, (3,) factors) for the parts in ``PARTS``, on top of ``tint``.
        background: the replacement table and backdrop, or None.
    """

    variation: str = NO_VARIATION
    camera_shift: tuple[float, float, float] = (0.0, 0.0, 0.0)
    camera_turn: tuple[float, float, float] = (0.0, 0.0, 0.0)
    brightness: float = 1.0
    tint: Colour = (1.0, 1.0, 1.0)
    part_tints: tuple[tuple[str, Colour], ...] = ()
    background: BackgroundStyle | None = None

    @property
    def is_nominal(self) -> bool:
        return self == NOMINAL

    def colour_factor(self, part: str) -> np.ndarray:
        """(3,) what ``part``'s colours are multiplied by: brightness, tint and the part's own tint."""
        own = dict(self.part_tints).get(part, (1.0, 1.0, 1.0))
        return self.brightness * np.asarray(self.tint) * np.asarray(own)


NOMINAL = Look()
"""The look of every ``train`` and ``test`` episode: the render is unchanged."""


def variation(split: str, episode_id: int) -> str:
    """The variation of episode ``episode_id`` of ``split``: "none" outside ``robustness``."""
    return VARIATIONS[int(episode_id) % len(VARIATIONS)] if split == ROBUSTNESS_SPLIT else NO_VARIATION


def _unit_vector(rng: np.random.Generator) -> np.ndarray:
    vector = rng.normal(size=3)
    return vector / np.linalg.norm(vector)


def _colour(rng: np.random.Generator) -> Colour:
    return tuple(float(v) for v in rng.uniform(*COLOUR_RANGE, size=3))


def _triple(values: np.ndarray) -> tuple[float, float, float]:
    return tuple(float(v) for v in values)


def sample_look(split: str, episode_id: int) -> Look:
    """The look of episode ``episode_id`` of ``split``; the same arguments give the same look."""
    name = variation(split, episode_id)
    if name == NO_VARIATION:
        return NOMINAL
    rng = np.random.default_rng([ROBUSTNESS_STREAM, int(episode_id)])
    if name == "camera":
        shift = _unit_vector(rng) * rng.uniform(*CAMERA_SHIFT_RANGE)
        turn = _unit_vector(rng) * rng.uniform(*CAMERA_TURN_RANGE)
        return Look(name, camera_shift=_triple(shift), camera_turn=_triple(turn))
    if name == "appearance":
        brightness = 1.0 + rng.choice([-1.0, 1.0]) * rng.uniform(*BRIGHTNESS_CHANGE_RANGE)
        tint = _triple(rng.uniform(*TINT_RANGE, size=3))
        parts = tuple((part, _triple(rng.uniform(*PART_TINT_RANGE, size=3))) for part in PARTS)
        return Look(name, brightness=float(brightness), tint=tint, part_tints=parts)
    style = BackgroundStyle(
        pattern=str(rng.choice(PATTERNS)),
        colours=(_colour(rng), _colour(rng)),
        period=float(rng.uniform(*PATTERN_PERIOD_RANGE)),
        angle=float(rng.uniform(0.0, np.pi)),
        phase=(float(rng.uniform(0.0, 1.0)), float(rng.uniform(0.0, 1.0))),
        backdrop=(_colour(rng), _colour(rng)),
    )
    return Look(name, background=style)
