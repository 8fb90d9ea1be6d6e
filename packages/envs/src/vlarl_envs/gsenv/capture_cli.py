"""``vlarl-gsenv-capture``: a real tabletop splat scene as a GSEnv capture directory.

Takes a standard 3DGS PLY of the static scene (INRIA's layout: ``x y z``, ``f_dc_0..2``,
``f_rest_*``, ``opacity``, ``scale_0..2``, ``rot_0..3``, any frame, any unit) and the pose that
places it in the simulator's world (the robot base frame: x forward, z up, table top at z = 0,
metres), and writes a capture in the published layout (``vlarl_envs.gsenv.capture``): the scene
moved into the world frame as ``object/table/table_abs.ply`` (positions, scales, orientations
and view-dependent colours all turned), the robot's and objects' splats and the backdrop copied
from a base capture (by default the assets built from the simulator's meshes), and a manifest
saying where the table came from.

The pose maps PLY coordinates to world coordinates, ``world = s R p + t``: a 4x4 matrix (row by
row, a rotation with an optional uniform scale), or a position and a quaternion (w, x, y, z),
given as 16 or 7 numbers on the command line or in a JSON or YAML file (``{"matrix": [[...],
...]}`` or ``{"position": [...], "quaternion": [...]}``, optionally ``"scale": s``).
``--scale`` (metres per PLY unit) applies to the PLY before the pose, whose translation is in
metres. ``--inverse`` takes the pose the other way round: the robot base's pose in the PLY's
frame, in PLY units.

The capture is written to a temporary directory beside the destination, checked by loading it,
then renamed into place; an existing destination is never touched.

    vlarl-gsenv-capture scene.ply --table-pose 1 0 0 -0.3  0 1 0 0  0 0 1 0.75  0 0 0 1 --output my_capture
    vlarl-gsenv-capture scene.ply --table-pose pose.yaml --backdrop room.jpg --output my_capture
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

POSE_TOLERANCE = 1e-3
"""How far a pose matrix's rotation part may be from orthonormal (after removing its scale)."""
BUILDER = "vlarl-gsenv-capture"


class PoseError(ValueError):
    """A table pose that is not a similarity transform; the message says what came."""


def pose_from_numbers(numbers: list[float], scale: float = 1.0) -> np.ndarray:
    """(4, 4) from 16 numbers (a matrix, row by row) or 7 (x y z qw qx qy qz), times ``scale``."""
    values = np.asarray(numbers, dtype=float)
    if values.size == 16:
        matrix = values.reshape(4, 4)
    elif values.size == 7:
        matrix = pose_from_position_quaternion(values[:3], values[3:])
    else:
        raise PoseError(
            f"expected 16 numbers (a 4x4 matrix, row by row) or 7 (x y z qw qx qy qz), got {values.size}: {numbers}"
        )
    return check_pose(matrix) @ np.diag([scale, scale, scale, 1.0])


def pose_from_position_quaternion(position, quaternion) -> np.ndarray:
    """(4, 4) from a position (3,) and a quaternion (4,), w first."""
    position, quaternion = np.asarray(position, dtype=float), np.asarray(quaternion, dtype=float)
    if position.shape != (3,) or quaternion.shape != (4,):
        raise PoseError(
            f"expected a position of 3 numbers and a quaternion of 4 (w, x, y, z), "
            f"got {position.size} and {quaternion.size}"
        )
    norm = np.linalg.norm(quaternion)
    if not np.isfinite(norm) or norm < 1e-9:
        raise PoseError(f"expected a non-zero quaternion (w, x, y, z), got {quaternion.tolist()}")
    import torch

    from vlarl_envs.splats.gaussians import quat_to_matrix

    matrix = np.eye(4)
    matrix[:3, :3] = quat_to_matrix(torch.tensor(quaternion, dtype=torch.float64)).numpy()
    matrix[:3, 3] = position
    return matrix


def check_pose(matrix) -> np.ndarray:
    """``matrix`` as a float (4, 4) similarity transform, or a PoseError saying what is wrong."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.shape != (4, 4):
        raise PoseError(f"expected a 4x4 pose matrix, got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)):
        raise PoseError(f"expected finite numbers in the pose matrix, got {matrix.tolist()}")
    if not np.allclose(matrix[3], [0, 0, 0, 1], atol=POSE_TOLERANCE):
        raise PoseError(f"expected the pose matrix's last row to be [0, 0, 0, 1], got {matrix[3].tolist()}")
    linear = matrix[:3, :3]
    determinant = np.linalg.det(linear)
    if determinant <= 0:
        raise PoseError(f"expected a rotation (determinant > 0) in the pose matrix, got determinant {determinant:.4g}")
    rotation = linear / np.cbrt(determinant)
    error = np.abs(rotation @ rotation.T - np.eye(3)).max()
    if error > POSE_TOLERANCE:
        raise PoseError(
            f"expected a rotation times one uniform scale in the pose matrix's 3x3 part, got one "
            f"{error:.3g} from orthonormal (shear or per-axis scale): {linear.tolist()}"
        )
    return matrix


def read_pose_file(path: Path) -> np.ndarray:
    """The (4, 4) pose in a JSON or YAML file (see the module docstring)."""
    text = path.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as json_error:
        try:
            import yaml
        except ImportError:
            raise PoseError(f"{path}: not JSON ({json_error}); reading YAML needs PyYAML: pip install pyyaml") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise PoseError(f"{path}: expected a JSON or YAML pose, could not parse it: {error}") from error
    if isinstance(data, list):
        data = {"matrix": data}
    if not isinstance(data, dict):
        raise PoseError(
            f"{path}: expected a mapping with 'matrix' or 'position' and 'quaternion', got {type(data).__name__}"
        )
    scale = float(data.get("scale", 1.0))
    try:
        if "matrix" in data:
            matrix = check_pose(np.asarray(data["matrix"], dtype=float))
        elif "position" in data and "quaternion" in data:
            matrix = pose_from_position_quaternion(data["position"], data["quaternion"])
        else:
            raise PoseError(f"expected key 'matrix', or keys 'position' and 'quaternion'; got keys {sorted(data)}")
    except (TypeError, ValueError) as error:
        raise PoseError(f"{path}: {error}") from error
    return matrix @ np.diag([scale, scale, scale, 1.0])


def parse_pose(values: list[str], scale: float = 1.0, inverse: bool = False) -> np.ndarray:
    """``--table-pose``'s words (a file, or 16 or 7 numbers) as the PLY-to-world (4, 4) transform:
    ``pose @ S``, or with ``inverse`` ``S @ pose^-1``, S scaling by ``scale`` (metres per PLY unit)."""
    if len(values) == 1 and not _is_number(values[0]):
        path = Path(values[0]).expanduser()
        if not path.is_file():
            raise PoseError(f"expected a pose file or 16 or 7 numbers, got {values[0]!r} (no such file)")
        matrix = read_pose_file(path)
    else:
        bad = [value for value in values if not _is_number(value)]
        if bad:
            raise PoseError(f"expected numbers (16 for a matrix, 7 for x y z qw qx qy qz), got {bad}")
        matrix = pose_from_numbers([float(value) for value in values])
    scaling = np.diag([scale, scale, scale, 1.0])
    return scaling @ np.linalg.inv(matrix) if inverse else matrix @ scaling


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def to_world(gaussians, transform: np.ndarray):
    """Gaussians moved by a similarity ``transform`` (4, 4): positions, scales, orientations and
    spherical harmonics."""
    import torch

    from vlarl_envs.splats.gaussians import Gaussians
    from vlarl_envs.splats.sh import rotate_sh

    scale = float(np.cbrt(np.linalg.det(transform[:3, :3])))
    rigid = torch.eye(4)
    rigid[:3, :3] = torch.tensor(transform[:3, :3] / scale, dtype=torch.float32)
    rigid[:3, 3] = torch.tensor(transform[:3, 3], dtype=torch.float32)
    scaled = Gaussians(gaussians.means * scale, gaussians.quats, gaussians.scales * scale, gaussians.opacities,
                       gaussians.sh)
    moved = scaled.transformed(rigid)
    return Gaussians(moved.means, moved.quats, moved.scales, moved.opacities, rotate_sh(moved.sh, rigid[:3, :3]))


def default_base() -> Path:
    """The assets built from the simulator's meshes (built now if not cached; needs ManiSkill)."""
    from vlarl_envs.gsenv.assets import BuildSettings, default_asset_dir, ensure_assets
    from vlarl_envs.gsenv.capture import MANIFEST

    settings = BuildSettings()
    if (default_asset_dir(settings) / MANIFEST).is_file():
        return default_asset_dir(settings)
    import torch

    from vlarl_envs.gsenv.simulator import build_task

    task = build_task("state")
    try:
        with torch.no_grad():
            return ensure_assets(task, settings)
    finally:
        task.close()


def write_table_capture(
    table_ply: Path, transform: np.ndarray, destination: Path, base: Path, backdrop: Path | None = None
) -> Path:
    """Write the capture (see the module docstring); returns ``destination``."""
    from vlarl_envs.gsenv.capture import (
        BACKDROP_DIR,
        BACKDROP_SUFFIXES,
        LINK_SUFFIX,
        MANIFEST,
        OBJECT_FILE,
        TABLE_PATH,
        backdrop_images,
        load_capture,
        read_image,
    )
    from vlarl_envs.splats.ply import read_ply, write_ply

    if destination.exists():
        raise FileExistsError(f"{destination} exists; vlarl-gsenv-capture never overwrites, choose a new --output")
    source = load_capture(base)
    table = to_world(read_ply(table_ply), transform)
    if backdrop is not None:
        if backdrop.suffix.lower() not in BACKDROP_SUFFIXES:
            raise ValueError(f"{backdrop}: expected a background image ending in {'/'.join(BACKDROP_SUFFIXES)}")
        read_image(backdrop)  # a clear error now rather than when the env loads
    backdrop = backdrop or backdrop_images(base)[0]
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}.capturing-"))
    try:
        parts = Path("robot", source.robot, "parts")
        (staging / parts).mkdir(parents=True)
        for name in source.links:
            shutil.copyfile(base / parts / f"{name}{LINK_SUFFIX}", staging / parts / f"{name}{LINK_SUFFIX}")
        for name in source.objects:
            (staging / "object" / name).mkdir(parents=True)
            shutil.copyfile(base / "object" / name / OBJECT_FILE, staging / "object" / name / OBJECT_FILE)
        write_ply(table, staging / TABLE_PATH)
        (staging / BACKDROP_DIR).mkdir(parents=True)
        shutil.copyfile(backdrop, staging / BACKDROP_DIR / f"background{backdrop.suffix.lower()}")
        settings = source.settings
        manifest = {
            "reference_qpos": list(settings.reference_qpos),
            "robot_offset": list(settings.robot_offset),
            "object_origins": {name: list(xyz) for name, xyz in settings.object_origins.items()},
            "builder": BUILDER,
            "table": {"source": str(table_ply.resolve()), "ply_to_world": transform.tolist(), "gaussians": len(table)},
            "base": str(base.resolve()),
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2))
        load_capture(staging)
        if destination.exists():
            raise FileExistsError(f"{destination} appeared while the capture was written; not overwriting it")
        os.rename(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return destination


def main(argv: list[str] | None = None) -> None:
    """Console script ``vlarl-gsenv-capture`` (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="vlarl-gsenv-capture", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("ply", type=Path, help="3DGS PLY of the tabletop scene (INRIA layout)")
    parser.add_argument(
        "--table-pose", nargs="+", required=True, metavar="POSE",
        help="PLY-to-world pose: 16 numbers (4x4, row by row), 7 (x y z qw qx qy qz), or a JSON/YAML file",
    )  # fmt: skip
    parser.add_argument("--output", type=Path, required=True, help="the capture directory to create (must not exist)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="metres per PLY unit (the pose's translation is in metres)")
    parser.add_argument("--inverse", action="store_true",
                        help="the pose is the robot base's pose in the PLY's frame (in PLY units)")
    parser.add_argument("--base", type=Path,
                        help="capture whose robot, cube, plate and backdrop to use (default: built assets)")
    parser.add_argument("--backdrop", type=Path, help="a JPEG or PNG photo behind the scene (default: the base's)")
    args = parser.parse_args(argv)
    if not args.scale > 0:
        parser.error(f"--scale: expected a positive number of metres per PLY unit, got {args.scale}")
    output = args.output.expanduser()
    if output.exists():
        parser.error(f"--output {output} exists; vlarl-gsenv-capture never overwrites, choose a new directory")
    try:
        transform = parse_pose(args.table_pose, args.scale, args.inverse)
    except PoseError as error:
        parser.error(f"--table-pose: {error}")
    if not args.ply.is_file():
        parser.error(f"expected a 3DGS PLY file at {args.ply}, found nothing there")
    try:
        base = args.base.expanduser() if args.base is not None else default_base()
        write_table_capture(args.ply.expanduser(), transform, output, base, args.backdrop)
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        parser.error(str(error))
    print(f"wrote capture: {output}")


if __name__ == "__main__":
    main(sys.argv[1:])
