"""Splat assets in the published GSEnv layout: read a real capture, or write our own.

The layout is that of the RLinf/ManiSkill-GS asset release (the Hugging Face dataset
``RLinf/gsenv-assets-v0``, read by ManiSkill-GS's ``env_simulation/ms_configs.py`` and
``gs_renderer/gs_env.py``). Units are metres; the world frame is the robot base frame (x forward,
z up, table top at z = 0)::

    <root>/robot/<robot>/parts/<link>_3dgs_abs.ply    one per visible link (the release: robot
                                                      ``my_franka``, links ``fr3_link0..7``,
                                                      ``fr3_hand``, fingers), robot base frame with
                                                      the robot at its reference joints, less a
                                                      base offset (the release: 2 cm in z)
    <root>/object/<name>/object_3dgs_abs.ply          cube, plate: any frame, recentred on load
                                                      (on the Gaussians' mean, as ManiSkill-GS does)
    <root>/object/table/table_abs.ply                 the static scene, world frame
    <root>/background/background_image/<image>.jpg    the photo behind everything (the release:
                                                      ``green_background.jpg``, 640x480 like the
                                                      camera; resized to the camera here)

Files other than these (the release's URDF and object meshes) are ignored. ManiSkill-GS also
nudges its plate splats by 5 mm and scales them 0.96 in x and z; vlarl does not. A capture made
by ``vlarl-gsenv-build-assets`` or ``vlarl-gsenv-capture`` adds ``vlarl_gsenv_assets.json`` with
the reference joints, the robot offset and each object's origin; a capture without it gets the
published release's values (``PUBLISHED_CAPTURE``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from vlarl_envs.splats.gaussians import Gaussians
from vlarl_envs.splats.ply import read_ply, write_ply

LINK_SUFFIX = "_3dgs_abs.ply"
OBJECT_FILE = "object_3dgs_abs.ply"
TABLE_PATH = Path("object", "table", "table_abs.ply")
BACKDROP_DIR = Path("background", "background_image")
BACKDROP_SUFFIXES = (".jpg", ".jpeg", ".png")
MANIFEST = "vlarl_gsenv_assets.json"
OBJECT_NAMES = ("cube", "plate")


@dataclass(frozen=True)
class CaptureSettings:
    """How a capture's robot and objects sit relative to the simulator.

    Attributes:
        reference_qpos: the robot's joints (7 arm + 2 fingers) when its links were captured.
        robot_offset: added to every link point to get robot-base coordinates (m).
        object_origins: per object, the point of its PLY frame that is the simulated body's
            origin; objects not listed are recentred on the mean of their Gaussians.
    """

    reference_qpos: tuple[float, ...]
    robot_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    object_origins: dict[str, tuple[float, float, float]] = field(default_factory=dict)


PUBLISHED_CAPTURE = CaptureSettings(
    reference_qpos=(0.0, 0.259358403, 0.0, -2.28914773, 0.0, 2.51473323, 0.785539902, 0.04, 0.04),
    robot_offset=(0.0, 0.0, 0.02),
)
"""The FR3 default joints and the 2 cm base offset of the published GSEnv capture."""


@dataclass(frozen=True)
class Capture:
    """A loaded capture.

    Attributes:
        root: where it was read from.
        robot: the robot folder's name.
        links: part name (file name without the suffix) -> Gaussians, robot base frame at
            ``settings.reference_qpos`` minus ``settings.robot_offset``.
        objects: object name -> Gaussians in the object's PLY frame.
        table: Gaussians in the world frame.
        backdrop: float32 (H, W, 3) in [0, 1].
        settings: the capture's ``CaptureSettings``.
    """

    root: Path
    robot: str
    links: dict[str, Gaussians]
    objects: dict[str, Gaussians]
    table: Gaussians
    backdrop: torch.Tensor
    settings: CaptureSettings

    def object_origin(self, name: str) -> torch.Tensor:
        """(3,) the body origin of object ``name`` in its PLY frame."""
        if name in self.settings.object_origins:
            return torch.tensor(self.settings.object_origins[name], dtype=torch.float32)
        return self.objects[name].means.mean(dim=0)


def link_key(name: str) -> str:
    """The robot-independent part of a link name: ``panda_link3`` and ``fr3_link3`` -> ``link3``."""
    return name.split("_", 1)[1] if "_" in name else name


def load_capture(root: str | os.PathLike, objects: tuple[str, ...] = OBJECT_NAMES) -> Capture:
    """Read a capture in the published layout; a clear error names any missing piece."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"expected a GSEnv capture directory at {root}, found nothing there")
    robot_dir = root / "robot"
    robots = sorted(p.name for p in robot_dir.iterdir() if (p / "parts").is_dir()) if robot_dir.is_dir() else []
    if len(robots) != 1:
        raise ValueError(f"{root}: expected exactly one robot/<name>/parts/ folder, found {robots or 'none'}")
    parts_dir = robot_dir / robots[0] / "parts"
    links = {p.name[: -len(LINK_SUFFIX)]: read_ply(p) for p in sorted(parts_dir.glob(f"*{LINK_SUFFIX}"))}
    if not links:
        raise ValueError(f"{parts_dir}: expected one <link>{LINK_SUFFIX} file per robot link, found none")
    missing = [str(Path("object", name, OBJECT_FILE)) for name in objects
               if not (root / "object" / name / OBJECT_FILE).is_file()]
    if not (root / TABLE_PATH).is_file():
        missing.append(str(TABLE_PATH))
    backdrops = backdrop_images(root)
    if not backdrops:
        missing.append(f"{BACKDROP_DIR}/<image>{'|'.join(BACKDROP_SUFFIXES)}")
    if missing:
        raise FileNotFoundError(f"{root}: incomplete GSEnv capture, missing {missing}")
    return Capture(
        root=root,
        robot=robots[0],
        links=links,
        objects={name: read_ply(root / "object" / name / OBJECT_FILE) for name in objects},
        table=read_ply(root / TABLE_PATH),
        backdrop=read_image(backdrops[0]),
        settings=_read_settings(root),
    )


def backdrop_images(root: Path) -> list[Path]:
    """The capture's background images in name order; the first is the backdrop."""
    return sorted(p for p in (root / BACKDROP_DIR).glob("*") if p.suffix.lower() in BACKDROP_SUFFIXES)


def _read_settings(root: Path) -> CaptureSettings:
    manifest = root / MANIFEST
    if not manifest.is_file():
        return PUBLISHED_CAPTURE
    try:
        data = json.loads(manifest.read_text())
        return CaptureSettings(
            reference_qpos=tuple(float(v) for v in data["reference_qpos"]),
            robot_offset=tuple(float(v) for v in data["robot_offset"]),
            object_origins={name: tuple(float(v) for v in xyz) for name, xyz in data["object_origins"].items()},
        )
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"{manifest}: expected JSON with reference_qpos, robot_offset and object_origins, "
            f"could not read it: {error!r}"
        ) from error


def read_image(path: Path) -> torch.Tensor:
    """An RGB image file as float32 (H, W, 3) in [0, 1]."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            array = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
    except (UnidentifiedImageError, OSError) as error:
        raise ValueError(f"{path}: expected a JPEG or PNG background image, could not read it: {error}") from error
    return torch.from_numpy(array)


def write_capture(
    root: Path,
    robot: str,
    links: dict[str, Gaussians],
    objects: dict[str, Gaussians],
    table: Gaussians,
    backdrop: np.ndarray,
    settings: CaptureSettings,
    extra_manifest: dict | None = None,
) -> None:
    """Write a capture in the published layout plus its manifest (``backdrop``: uint8 (H, W, 3))."""
    from PIL import Image

    for name, gaussians in links.items():
        write_ply(gaussians, root / "robot" / robot / "parts" / f"{name}{LINK_SUFFIX}")
    for name, gaussians in objects.items():
        write_ply(gaussians, root / "object" / name / OBJECT_FILE)
    write_ply(table, root / TABLE_PATH)
    (root / BACKDROP_DIR).mkdir(parents=True, exist_ok=True)
    Image.fromarray(backdrop).save(root / BACKDROP_DIR / "background.png")
    manifest = {
        "reference_qpos": list(settings.reference_qpos),
        "robot_offset": list(settings.robot_offset),
        "object_origins": {name: list(xyz) for name, xyz in settings.object_origins.items()},
        **(extra_manifest or {}),
    }
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2))
