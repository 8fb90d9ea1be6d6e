"""Which PhysX backend a ManiSkill or GSEnv simulator runs on, and PhysX's GPU library on clusters without internet.

``sim_backend`` is "cpu", "gpu" or "auto". ManiSkill's CPU backend simulates one scene per
simulator; its GPU backend (``physx_cuda``) simulates many sub-scenes in one, which is what pays
for the GPU. So "auto" picks the GPU only where torch sees CUDA and the envs are batched in one
simulator, and "cpu" keeps the physics on the CPU on a machine with CUDA (e.g. to leave the device
to the policy).

The GPU backend loads ``libPhysXGpu_64.so``, which no wheel ships: SAPIEN downloads it from GitHub
on first use, without a timeout, into ``~/.sapien/physx/<physx version>/``. ``prepare_physx_gpu``
puts it there first: from the file ``VLARL_PHYSX_GPU_LIBRARY`` names, else from SAPIEN's release
with a timeout, and where neither works it raises an error that says where the file goes.
"""

from __future__ import annotations

import io
import os
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from vlarl_envs.contract import validate_choice

SIM_BACKENDS = ("auto", "cpu", "gpu")
PHYSX_NAMES = {"cpu": "physx_cpu", "gpu": "physx_cuda"}
"""vlarl's backend names -> ManiSkill's."""

PHYSX_GPU_LIBRARY_VARIABLE = "VLARL_PHYSX_GPU_LIBRARY"
PHYSX_GPU_LIBRARY_NAME = "libPhysXGpu_64.so"
PHYSX_RELEASE_URL = "https://github.com/sapien-sim/physx-precompiled/releases/download/{version}/linux-so.zip"
DOWNLOAD_TIMEOUT_SECONDS = 60


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def resolve_sim_backend(env_id: str, sim_backend: str, batched: bool) -> str:
    """"cpu" or "gpu" for ``sim_backend``; "auto" is "gpu" only for ``batched`` envs where torch sees CUDA.

    "gpu" on a machine where torch sees no CUDA device is a ValueError naming the choices that run.
    """
    validate_choice(env_id, "sim_backend", sim_backend, SIM_BACKENDS)
    if sim_backend == "auto":
        return "gpu" if batched and cuda_available() else "cpu"
    if sim_backend == "gpu" and not cuda_available():
        raise ValueError(
            f"{env_id}: sim_backend='gpu' needs CUDA, and torch sees no CUDA device here; "
            "use sim_backend='cpu' (or 'auto', which picks the CPU without CUDA)"
        )
    return sim_backend


def physx_gpu_library(version: str) -> Path:
    """Where SAPIEN looks for PhysX's GPU library of ``version`` (``sapien.physx.version()``)."""
    return Path.home() / ".sapien" / "physx" / version / PHYSX_GPU_LIBRARY_NAME


def missing_library_message(version: str, reason: str) -> str:
    """What to do on a machine where the library could not be put in place."""
    return (
        f"ManiSkill's GPU simulation needs PhysX's GPU library {PHYSX_GPU_LIBRARY_NAME}, which is not at "
        f"{physx_gpu_library(version)} ({reason}). On a machine with internet access, download "
        f"{PHYSX_RELEASE_URL.format(version=version)} and unzip it there (the folder is under $HOME, per node), "
        f"or set {PHYSX_GPU_LIBRARY_VARIABLE} to the path of a copy of the file; or use sim_backend='cpu'"
    )


def place_physx_gpu_library(version: str) -> Path:
    """Put PhysX's GPU library where SAPIEN looks for it, unless it is there already; return its path.

    The file comes from ``$VLARL_PHYSX_GPU_LIBRARY`` when that is set, else from SAPIEN's release
    (one download, at most ``DOWNLOAD_TIMEOUT_SECONDS``). It is written beside its place and then
    renamed into it, so an interrupted copy never leaves a half-written library behind.
    """
    target = physx_gpu_library(version)
    if target.exists():
        return target
    source = os.environ.get(PHYSX_GPU_LIBRARY_VARIABLE)
    if source and not Path(source).is_file():
        raise FileNotFoundError(
            f"{PHYSX_GPU_LIBRARY_VARIABLE}={source!r} names no file; expected the path of {PHYSX_GPU_LIBRARY_NAME} "
            f"(from {PHYSX_RELEASE_URL.format(version=version)})"
        )
    if source:
        content = Path(source).read_bytes()
    else:
        content = _download_library(version)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".partial-", delete=False) as partial:
        partial.write(content)
    os.chmod(partial.name, 0o755)
    os.replace(partial.name, target)
    return target


def _download_library(version: str) -> bytes:
    url = PHYSX_RELEASE_URL.format(version=version)
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response:
            archive = zipfile.ZipFile(io.BytesIO(response.read()))
        return archive.read(next(n for n in archive.namelist() if n.endswith(PHYSX_GPU_LIBRARY_NAME)))
    except (urllib.error.URLError, OSError, zipfile.BadZipFile, StopIteration) as error:
        raise RuntimeError(missing_library_message(version, f"the download failed: {error}")) from error


def prepare_physx_gpu() -> None:
    """Load PhysX's GPU library into SAPIEN before ManiSkill asks for it (a no-op once loaded)."""
    import sapien

    if sapien.physx.is_gpu_enabled():
        return
    place_physx_gpu_library(sapien.physx.version())
    sapien.physx.enable_gpu()


def vulkan_hint() -> str:
    """How to give SAPIEN a Vulkan device on this machine: the NVIDIA driver's ICD where CUDA is, lavapipe elsewhere."""
    if cuda_available():
        return (
            "with an NVIDIA GPU, SAPIEN needs the driver's Vulkan ICD: libvulkan1 and nvidia_icd.json (under "
            "/usr/share/vulkan/icd.d or /etc/vulkan/icd.d, or named by VK_DRIVER_FILES / VK_ICD_FILENAMES); "
            "in a container, NVIDIA_DRIVER_CAPABILITIES must include graphics (or be all)"
        )
    return "on a machine without a GPU install Mesa >= 24 lavapipe (scripts/install_system_deps.sh)"
