"""``sim_backend`` (auto / cpu / gpu) for ManiSkill and GSEnv, and PhysX's GPU library put in place offline."""

from __future__ import annotations

import io
import urllib.error
import zipfile

import pytest

from vlarl_envs.maniskill import backend
from vlarl_envs.maniskill.backend import (
    PHYSX_GPU_LIBRARY_VARIABLE,
    physx_gpu_library,
    place_physx_gpu_library,
    resolve_sim_backend,
)

VERSION = "105.1-physx-5.3.1.patch0"
ENV_ID = "vlarl/ManiSkill-PickCube-v1"


@pytest.fixture
def cuda(monkeypatch):
    """Set whether the backend module sees CUDA."""

    def set_cuda(available: bool) -> None:
        monkeypatch.setattr(backend, "cuda_available", lambda: available)

    return set_cuda


@pytest.mark.parametrize(
    ("choice", "batched", "has_cuda", "expected"),
    [
        ("auto", True, True, "gpu"),
        ("auto", True, False, "cpu"),
        ("auto", False, True, "cpu"),
        ("cpu", True, True, "cpu"),
        ("gpu", False, True, "gpu"),
    ],
)
def test_auto_picks_the_gpu_only_for_batched_envs_with_cuda(cuda, choice, batched, has_cuda, expected):
    cuda(has_cuda)
    assert resolve_sim_backend(ENV_ID, choice, batched) == expected


def test_gpu_without_cuda_and_unknown_names_are_refused(cuda):
    cuda(False)
    with pytest.raises(ValueError, match="sim_backend='gpu' needs CUDA.*sim_backend='cpu'"):
        resolve_sim_backend(ENV_ID, "gpu", batched=True)
    with pytest.raises(ValueError, match=r"unknown sim_backend 'physx_cuda'; expected one of \['auto', 'cpu', 'gpu'\]"):
        resolve_sim_backend(ENV_ID, "physx_cuda", batched=True)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(PHYSX_GPU_LIBRARY_VARIABLE, raising=False)
    return tmp_path


def test_the_library_named_by_the_variable_is_copied_where_sapien_looks(home, monkeypatch):
    source = home / "copies" / "libPhysXGpu_64.so"
    source.parent.mkdir()
    source.write_bytes(b"\x7fELF physx")
    monkeypatch.setenv(PHYSX_GPU_LIBRARY_VARIABLE, str(source))
    placed = place_physx_gpu_library(VERSION)
    assert placed == home / ".sapien" / "physx" / VERSION / "libPhysXGpu_64.so"
    assert placed.read_bytes() == b"\x7fELF physx" and placed.stat().st_mode & 0o111
    assert sorted(p.name for p in placed.parent.iterdir()) == ["libPhysXGpu_64.so"]


def test_a_library_in_place_is_kept(home, monkeypatch):
    target = physx_gpu_library(VERSION)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"already here")
    monkeypatch.setenv(PHYSX_GPU_LIBRARY_VARIABLE, str(home / "nowhere.so"))
    assert place_physx_gpu_library(VERSION).read_bytes() == b"already here"


def test_a_variable_naming_no_file_is_an_error_naming_it(home, monkeypatch):
    monkeypatch.setenv(PHYSX_GPU_LIBRARY_VARIABLE, str(home / "missing.so"))
    with pytest.raises(FileNotFoundError, match=f"{PHYSX_GPU_LIBRARY_VARIABLE}=.*missing.so.*names no file"):
        place_physx_gpu_library(VERSION)


def test_without_internet_the_error_says_where_the_file_goes(home, monkeypatch):
    def unreachable(url, timeout):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(backend.urllib.request, "urlopen", unreachable)
    with pytest.raises(RuntimeError) as error:
        place_physx_gpu_library(VERSION)
    message = str(error.value)
    assert str(physx_gpu_library(VERSION)) in message and PHYSX_GPU_LIBRARY_VARIABLE in message
    assert f"releases/download/{VERSION}/linux-so.zip" in message and "name resolution" in message
    assert not physx_gpu_library(VERSION).parent.exists()


def test_the_release_is_downloaded_with_a_timeout_and_unzipped(home, monkeypatch):
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("linux-so/libPhysXGpu_64.so", b"\x7fELF downloaded")
    asked = []

    def serve(url, timeout):
        asked.append((url, timeout))
        return io.BytesIO(archive.getvalue())

    monkeypatch.setattr(backend.urllib.request, "urlopen", serve)
    assert place_physx_gpu_library(VERSION).read_bytes() == b"\x7fELF downloaded"
    assert asked == [(backend.PHYSX_RELEASE_URL.format(version=VERSION), backend.DOWNLOAD_TIMEOUT_SECONDS)]


def test_the_vulkan_hint_names_the_nvidia_icd_where_cuda_is(cuda):
    cuda(True)
    assert "nvidia_icd.json" in backend.vulkan_hint() and "VK_DRIVER_FILES" in backend.vulkan_hint()
    cuda(False)
    assert "lavapipe" in backend.vulkan_hint()


def test_maniskill_and_gsenv_refuse_the_gpu_backend_without_cuda_before_building_a_scene():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    from vlarl_envs.maniskill.episode_envs import make_maniskill_episode_envs
    from vlarl_envs.maniskill.vector import make_maniskill_vec

    with pytest.raises(ValueError, match="sim_backend='gpu' needs CUDA"):
        make_maniskill_episode_envs(ENV_ID, 4, sim_backend="gpu")
    with pytest.raises(ValueError, match="sim_backend='gpu' needs CUDA"):
        make_maniskill_vec("PickCube", ENV_ID, 4, sim_backend="gpu")
    from vlarl_envs.gsenv.env import GSEnv

    with pytest.raises(ValueError, match="GSEnv-PutCubeOnPlate-v0: sim_backend='gpu' needs CUDA"):
        GSEnv(obs_mode="state", sim_backend="gpu")
