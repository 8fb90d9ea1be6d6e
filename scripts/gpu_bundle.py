"""Build ``.gpu_bundle/``: what ``scripts/gpu_check.sh`` needs on a GPU machine that reaches no package registry.

The GPU machine this check is made for (see docs/scaling.md, "A prepared GPU check") runs Python 3.12 with
torch, transformers and most of the scientific stack, but no Ray, Hydra, gymnasium, MuJoCo or MetaWorld, and
takes at most 64 MiB of files with the working tree. This script, run where PyPI can be reached, downloads
those packages for CPython 3.12 on x86-64 Linux at the versions of ``uv.lock``, unpacks them into one
``site-packages`` tree and packs it as ``.gpu_bundle/site.tar.xz``, which the check unpacks into a folder on
``PYTHONPATH``. Two packages are trimmed to fit:

- Ray: without its Java jars, the dashboard's web client and the libraries the trainer never imports (RLlib,
  Data, Serve, Train, Tune, LLM); its three native binaries lose their symbol tables (``strip``).
- MetaWorld: its textures downscaled to at most ``TEXTURE_SIDE`` pixels a side (33 MB of PNGs), so scenes
  load and render as published but with coarser textures; the check times a trainer step, not success.

EGL's loader libraries (Debian packages, ``apt-get download``) go to ``.gpu_bundle/debs`` for MuJoCo's
off-screen rendering on a machine without them. ``.gpu_bundle/MANIFEST.txt`` lists every package and size.

    uv run --locked python scripts/gpu_bundle.py     # a few minutes; prints the bundle's size
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path

import tomllib
from packaging.version import Version
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "ray", "jsonschema", "jsonschema-specifications", "referencing", "rpds-py",
    "hydra-core", "omegaconf", "antlr4-python3-runtime",
    "gymnasium", "farama-notifications",
    "mujoco", "glfw", "pyopengl", "metaworld",
)
"""What the check imports that the GPU machine's image lacks (its list: ../shared/reference/gpu-device.md)."""
DEVICE_IMAGE = frozenset({
    "torch", "transformers", "timm", "tokenizers", "safetensors", "peft", "numpy", "imageio", "pillow", "psutil",
    "tensorboard", "tqdm", "matplotlib", "pyarrow", "packaging", "absl-py", "etils", "pyyaml", "requests", "click",
    "filelock", "msgpack", "protobuf", "pytest", "pytest-timeout", "hypothesis",
})
"""What the GPU machine's image has of vlarl's and these packages' dependencies (its whole list: the device
tool's KINDS.md)."""
NOT_NEEDED_BY_THE_CHECK = {"imageio-ffmpeg": "writes mp4 videos, which the check does not record"}
BUILD_PACKAGES = {"hatchling": "1.33.0", "trove-classifiers": "2026.9.21.13", "pathspec": "1.1.1"}
"""vlarl's build backend and what it needs beyond pip's own, for installing the tree's four packages there
(not in uv.lock: build dependencies)."""
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
RAY_DROPPED = ("ray/jars", "ray/rllib", "ray/data", "ray/serve", "ray/train", "ray/tune", "ray/llm",
               "ray/dashboard/client")
RAY_BINARIES = ("ray/_raylet.so", "ray/core/src/ray/gcs/gcs_server", "ray/core/src/ray/raylet/raylet")
TEXTURE_SIDE = 128
EGL_DEBS = ("libegl1", "libglvnd0", "libopengl0", "libgl1", "libglx0", "libgles2")
LIMIT_MIB = 64
PIP = ("uv", "tool", "run", "--quiet", "pip")
"""pip from PyPI (uv's virtual environments have none)."""


def locked_versions(names: tuple[str, ...]) -> dict[str, str]:
    """``name -> version`` from uv.lock, so the GPU machine runs what the tests ran; where the lock holds
    several versions of a package for different Pythons, the newest, which is the one for 3.12."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    versions: dict[str, list[str]] = {}
    for package in lock["package"]:
        versions.setdefault(package["name"], []).append(package["version"])
    missing = [name for name in names if name not in versions]
    if missing:
        raise SystemExit(f"uv.lock has no version of {missing}")
    return {name: max(versions[name], key=Version) for name in names}


def download(specs: list[str], into: Path) -> None:
    """Binary wheels for CPython 3.12 where one exists; a pure-Python package with only a source
    distribution (antlr4's 4.9.3) is built into a wheel here."""
    platforms = [argument for platform in PLATFORMS for argument in ("--platform", platform)]
    for spec in specs:
        binary = subprocess.run(
            [*PIP, "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
             "3.12", "--implementation", "cp", *platforms, "-d", str(into), spec], capture_output=True, text=True)
        if binary.returncode != 0:
            subprocess.run([*PIP, "wheel", "-q", "--no-deps", "-w", str(into), spec], check=True)


def trim_ray(site: Path) -> None:
    for folder in RAY_DROPPED:
        shutil.rmtree(site / folder)
    for binary in RAY_BINARIES:
        subprocess.run(["strip", "--strip-unneeded", str(site / binary)], check=True)


def downscale_textures(site: Path) -> None:
    for png in (site / "metaworld").rglob("*.png"):
        with Image.open(png) as image:
            if max(image.size) <= TEXTURE_SIDE:
                continue
            image.thumbnail((TEXTURE_SIDE, TEXTURE_SIDE))
            buffer = io.BytesIO()
            image.save(buffer, format="PNG")
        png.write_bytes(buffer.getvalue())


def fetch_debs(into: Path) -> None:
    into.mkdir()
    subprocess.run(["apt-get", "download", *EGL_DEBS], cwd=into, check=True, capture_output=True)


def tree_megabytes() -> float:
    """Tracked and untracked-not-ignored files: what travels beside the bundle."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.split(b"\0")
    paths = [ROOT / name.decode() for name in listed if name]
    return sum(path.stat().st_size for path in paths if path.is_file()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu_bundle")
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"{args.out} exists; remove it to build the bundle anew")
    versions = {**locked_versions(PACKAGES), **BUILD_PACKAGES}
    staged = args.out.with_name(args.out.name + ".partial")
    shutil.rmtree(staged, ignore_errors=True)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        wheels, site = scratch / "wheels", scratch / "site-packages"
        download([f"{name}=={version}" for name, version in versions.items()], wheels)
        for wheel in sorted(wheels.glob("*.whl")):
            zipfile.ZipFile(wheel).extractall(site)
        trim_ray(site)
        downscale_textures(site)
        staged.mkdir()
        with tarfile.open(staged / "site.tar.xz", "w:xz", preset=9) as archive:
            archive.add(site, arcname="site-packages")
        fetch_debs(staged / "debs")
        sizes = {path.relative_to(staged).as_posix(): path.stat().st_size / 2**20
                 for path in sorted(staged.rglob("*")) if path.is_file()}
        lines = [f"{name}=={version}" for name, version in versions.items()]
        lines += [f"{size:8.2f} MiB  {name}" for name, size in sizes.items()]
        bundle, tree = sum(sizes.values()), tree_megabytes()
        lines.append(f"bundle {bundle:.1f} MiB + working tree {tree:.1f} MiB = {bundle + tree:.1f} MiB "
                     f"(limit {LIMIT_MIB} MiB)")
        (staged / "MANIFEST.txt").write_text("\n".join(lines) + "\n")
        staged.rename(args.out)
    print("\n".join(lines))
    if bundle + tree > LIMIT_MIB:
        raise SystemExit(f"the bundle and the working tree come to {bundle + tree:.1f} MiB, over {LIMIT_MIB} MiB")


if __name__ == "__main__":
    main()
