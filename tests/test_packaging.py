"""Each package builds and installs alone, with only the dependencies its layer allows, and is a real
project to pip: the MIT licence shipped, authors, classifiers and links."""

import email
import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("envs", "policies", "algos", "trainer")
FORBIDDEN = {
    "algos": {"gymnasium", "ray", "transformers", "vlarl-envs", "vlarl-policies"},
    "envs": {"torch", "ray", "transformers", "vlarl-policies", "vlarl-algos"},
    "policies": {"gymnasium", "ray", "vlarl-envs", "vlarl-algos"},
}


def uv() -> str:
    path = shutil.which("uv")
    assert path, "uv is not on PATH; `make setup` installs it"
    return path


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    """Each package's wheel as a registry builds it: the sdist first, then the wheel from the sdist alone."""
    out = tmp_path_factory.mktemp("wheels")
    built = subprocess.run([uv(), "build", "--all-packages", "--out-dir", str(out)], cwd=ROOT, capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stderr
    found = {}
    for package in PACKAGES:
        (wheel,) = out.glob(f"vlarl_{package}-*.whl")
        assert len(list(out.glob(f"vlarl_{package}-*.tar.gz"))) == 1
        found[package] = wheel
    return found


def requirements(wheel: Path) -> set[str]:
    """Names of the wheel's unconditional requirements (extras excluded)."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        message = email.message_from_bytes(archive.read(metadata))
    names = set()
    for requirement in message.get_all("Requires-Dist") or []:
        if "extra ==" in requirement:
            continue
        name = requirement.split(";")[0].split("[")[0]
        for separator in "<>=!~ ":
            name = name.split(separator)[0]
        names.add(name.strip().lower())
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_reports_the_version_its_pyproject_declares(package):
    declared = tomllib.loads((ROOT / "packages" / package / "pyproject.toml").read_text())["project"]["version"]
    assert importlib.import_module(f"vlarl_{package}").__version__ == declared


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_declares_the_metadata_pip_shows(package):
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    root = ROOT / "packages" / package
    meta = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "MIT"
    for licence in meta["license-files"]:
        # A real file: an sdist cannot carry a link that points outside it.
        assert not (root / licence).is_symlink()
        assert (root / licence).read_text() == (ROOT / "LICENSE").read_text()
    assert (root / meta["readme"]).is_file() and meta["authors"] and meta["keywords"]
    assert {"Homepage", "Documentation", "Repository", "Issues", "Changelog"} <= set(meta["urls"])
    assert meta["urls"]["Changelog"].endswith(f"packages/{package}/CHANGELOG.md")
    versions = {
        c.rsplit(" ", 1)[-1] for c in meta["classifiers"] if c.startswith("Programming Language :: Python :: 3.")
    }
    assert versions == {"3.10", "3.11", "3.12"} and meta["requires-python"] == ">=3.10,<3.13"


@pytest.mark.slow
@pytest.mark.parametrize("package", PACKAGES)
def test_each_wheel_carries_the_licence_and_the_links(wheels, package):
    with zipfile.ZipFile(wheels[package]) as archive:
        names = archive.namelist()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        message = email.message_from_bytes(archive.read(metadata))
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert message["License-Expression"] == "MIT" and message["Author"] == "The vlarl developers"
    assert {url.split(",")[0] for url in message.get_all("Project-URL")} >= {"Homepage", "Repository", "Changelog"}
    assert "Programming Language :: Python :: 3.11" in message.get_all("Classifier")


@pytest.mark.slow
@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_leaf_wheels_keep_their_layer(wheels, package):
    assert not requirements(wheels[package]) & FORBIDDEN[package]


@pytest.mark.slow
def test_trainer_wheel_depends_on_the_three_leaves(wheels):
    assert {"vlarl-envs", "vlarl-policies", "vlarl-algos", "ray"} <= requirements(wheels["trainer"])


@pytest.mark.slow
@pytest.mark.sim
def test_envs_installs_alone_and_gym_make_works(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([uv(), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([uv(), "pip", "install", "--quiet", "--python", str(python),
                    f"{ROOT / 'packages' / 'envs'}[metaworld]"],
                   check=True, capture_output=True)
    code = (
        "import gymnasium as gym, importlib.util\n"
        "assert importlib.util.find_spec('torch') is None, 'vlarl-envs pulled in torch'\n"
        "env = gym.make('vlarl_envs:vlarl/MetaWorld-reach-v3', obs_mode='state')\n"
        "obs, _ = env.reset(seed=0)\n"
        "print(obs['states'].shape)\n"
    )
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "(4,)" in result.stdout


@pytest.mark.parametrize("module", ["torch", "transformers.modeling_utils", "ray", "mujoco"])
def test_the_environment_holds_the_bytecode_of_its_heavy_imports(module):
    """`make setup` compiles the environment's bytecode: without it, a process started where
    PYTHONDONTWRITEBYTECODE is set compiles these sources again (each Ray worker, each test subprocess)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.cached, f"{module} is not importable from a source file"
    assert Path(spec.cached).is_file(), f"{module} has no bytecode at {spec.cached}: run `make sync`"
