"""Splat assets without downloads: sample the simulator's own geometry, cache the result.

``ensure_assets`` returns a capture directory in the published GSEnv layout (see
``vlarl_envs.gsenv.capture``), building it on first use into the user's cache directory
(``$VLARL_CACHE_DIR``, else ``$XDG_CACHE_HOME/vlarl``, else ``~/.cache/vlarl``). A build is
written to a temporary directory next to its destination and renamed into place, so a
directory under that name is always complete. The console script
``vlarl-gsenv-build-assets`` runs the same build.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from vlarl_envs.gsenv.capture import MANIFEST, CaptureSettings, write_capture
from vlarl_envs.splats.surface import ColouredMesh, surface_gaussians

ASSET_FORMAT = 1
"""Bump when the builder's output changes; old cache entries are then left alone."""
MIN_GAUSSIANS_PER_LINK = 64
BACKDROP_SIZE = (480, 640)
BACKDROP_TOP = np.array([0.80, 0.82, 0.85])
BACKDROP_BOTTOM = np.array([0.55, 0.57, 0.60])


@dataclass(frozen=True)
class BuildSettings:
    """How many Gaussians each part of the scene gets, and the sampling seed."""

    robot_gaussians: int = 16000
    cube_gaussians: int = 1500
    plate_gaussians: int = 2500
    table_gaussians: int = 40000
    seed: int = 0

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if name != "seed" and value < 1:
                raise ValueError(f"BuildSettings.{name}: expected a positive count, got {value}")

    def key(self) -> str:
        """A short stable hash naming the cache entry of these settings."""
        text = json.dumps({"format": ASSET_FORMAT, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def cache_root() -> Path:
    """The user's vlarl cache directory."""
    if os.environ.get("VLARL_CACHE_DIR"):
        return Path(os.environ["VLARL_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "vlarl"


def default_asset_dir(settings: BuildSettings) -> Path:
    return cache_root() / "gsenv" / f"put-cube-on-plate-{settings.key()}"


def _split_budget(meshes: dict[str, ColouredMesh], total: int) -> dict[str, int]:
    """Gaussians per mesh in proportion to surface area (each gets a small minimum)."""
    areas = {name: mesh.area() for name, mesh in meshes.items()}
    area_sum = sum(areas.values())
    return {name: max(MIN_GAUSSIANS_PER_LINK, round(total * area / area_sum)) for name, area in areas.items()}


def _upward_faces(mesh: ColouredMesh, rotation: np.ndarray) -> ColouredMesh:
    """The triangles whose normals, turned by ``rotation``, point up: the part of the table
    the camera sees."""
    corners = mesh.vertices[mesh.triangles]
    normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]) @ rotation.T
    up = normals[:, 2] > 0.5 * np.linalg.norm(normals, axis=1)
    return ColouredMesh(mesh.vertices, mesh.triangles[up], mesh.colours[up])


def _backdrop() -> np.ndarray:
    """uint8 (H, W, 3): a plain wall, lighter at the top."""
    rows = np.linspace(0.0, 1.0, BACKDROP_SIZE[0])[:, None]
    colours = (1 - rows) * BACKDROP_TOP + rows * BACKDROP_BOTTOM
    return np.broadcast_to((colours * 255).round().astype(np.uint8)[:, None, :], (*BACKDROP_SIZE, 3)).copy()


def _photographed_scene(task, settings: BuildSettings):
    """Sampled and photographed Gaussians: links (robot base frame at the rest keyframe),
    cube and plate (their own frames), table (world); and that keyframe."""
    from vlarl_envs.gsenv.bodies import reference_link_poses, visual_links, visual_mesh
    from vlarl_envs.gsenv.photograph import Photographer

    rng = np.random.default_rng(settings.seed)
    qpos = tuple(float(v) for v in task.agent.keyframes["rest"].qpos)
    reference = reference_link_poses(task, qpos)
    entities = {link.name: link._objs[0].entity for link in visual_links(task)}
    meshes = {name: visual_mesh(entity) for name, entity in entities.items()}
    budget = _split_budget(meshes, settings.robot_gaussians)
    table = task.table._objs[0]
    table_pose = torch.tensor(table.pose.to_transformation_matrix(), dtype=torch.float32)
    photographer = Photographer(task)
    try:
        links = {
            name: photographer.photograph(entity, surface_gaussians(meshes[name], budget[name], rng)).transformed(
                torch.tensor(reference[name], dtype=torch.float32)
            )
            for name, entity in entities.items()
        }
        objects = {
            name: photographer.photograph(entity, surface_gaussians(visual_mesh(entity), count, rng))
            for name, entity, count in (
                ("cube", task.cube._objs[0], settings.cube_gaussians),
                ("plate", task.plate._objs[0], settings.plate_gaussians),
            )
        }
        top = _upward_faces(visual_mesh(table), table_pose[:3, :3].numpy())
        table_gaussians = photographer.photograph(table, surface_gaussians(top, settings.table_gaussians, rng))
    finally:
        photographer.close()
    return links, objects, table_gaussians.transformed(table_pose), qpos


def build_assets(task, destination: Path, settings: BuildSettings) -> Path:
    """Sample and photograph ``task``'s robot, cube, plate and table into a capture at
    ``destination`` (see ``vlarl_envs.gsenv.photograph``).

    Written into a temporary sibling directory and renamed; if another process finished the
    same build first, its result is kept and ours discarded.
    """
    links, objects, table, qpos = _photographed_scene(task, settings)
    capture_settings = CaptureSettings(reference_qpos=qpos, object_origins={name: (0.0, 0.0, 0.0) for name in objects})
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}.building-"))
    try:
        write_capture(
            staging, task.robot_uids, links, objects, table, _backdrop(), capture_settings,
            extra_manifest={
                "builder": "vlarl-gsenv-build-assets", "format": ASSET_FORMAT, "settings": asdict(settings)
            },
        )  # fmt: skip
        try:
            os.rename(staging, destination)
        except OSError:
            if not (destination / MANIFEST).is_file():
                raise
            shutil.rmtree(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return destination


def ensure_assets(task, settings: BuildSettings = BuildSettings()) -> Path:
    """The cached capture for ``settings``, built from ``task`` on first use."""
    destination = default_asset_dir(settings)
    if (destination / MANIFEST).is_file():
        return destination
    return build_assets(task, destination, settings)


def main(argv: list[str] | None = None) -> None:
    """Console script: build the PutCubeOnPlate splat assets and print where they are."""
    parser = argparse.ArgumentParser(prog="vlarl-gsenv-build-assets", description=__doc__.split("\n\n")[0])
    defaults = BuildSettings()
    parser.add_argument("--output", type=Path, help="destination directory (default: the user cache)")
    for name in ("robot_gaussians", "cube_gaussians", "plate_gaussians", "table_gaussians", "seed"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    parser.add_argument("--force", action="store_true", help="rebuild even if the destination exists")
    args = parser.parse_args(argv)
    settings = BuildSettings(
        robot_gaussians=args.robot_gaussians,
        cube_gaussians=args.cube_gaussians,
        plate_gaussians=args.plate_gaussians,
        table_gaussians=args.table_gaussians,
        seed=args.seed,
    )
    destination = (args.output or default_asset_dir(settings)).expanduser()
    if destination.exists():
        if not (destination / MANIFEST).is_file():
            parser.error(f"{destination} exists and is not a capture built here ({MANIFEST} missing); not touching it")
        if not args.force:
            print(f"already built: {destination}")
            return
        shutil.rmtree(destination)
    from vlarl_envs.gsenv.simulator import build_task

    task = build_task(obs_mode="state", camera_size=BACKDROP_SIZE)
    try:
        with torch.no_grad():
            build_assets(task, destination, settings)
    finally:
        task.close()
    print(f"built: {destination}")
