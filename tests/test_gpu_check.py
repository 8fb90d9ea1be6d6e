"""scripts/gpu_check.sh and the bundle it runs from (scripts/gpu_bundle.py): what the GPU machine lacks travels,
bad input is refused before anything is written, and the CPU dry run writes each step's figures."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import tomllib

from vlarl_trainer.testing import load_script

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "scripts" / "gpu_check.sh"
PROJECT_PACKAGES = ("algos", "envs", "policies", "trainer")


def requirement_name(requirement: str) -> str:
    return re.split(r"[\[<>=!~;\s]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_dependency_of_the_check_is_on_the_gpu_machine_or_in_the_bundle():
    bundle = load_script(ROOT / "scripts" / "gpu_bundle.py")
    needed = set()
    for package in PROJECT_PACKAGES:
        project = tomllib.loads((ROOT / "packages" / package / "pyproject.toml").read_text())["project"]
        needed |= {requirement_name(r) for r in project["dependencies"]}
        if package == "envs":
            needed |= {requirement_name(r) for r in project["optional-dependencies"]["metaworld"]}
    provided = set(bundle.PACKAGES) | bundle.DEVICE_IMAGE | set(bundle.NOT_NEEDED_BY_THE_CHECK)
    missing = sorted(name for name in needed - provided if not name.startswith("vlarl-"))
    assert not missing, f"neither on the GPU machine nor in scripts/gpu_bundle.py's PACKAGES: {missing}"


def test_the_bundle_ships_the_locked_versions():
    bundle = load_script(ROOT / "scripts" / "gpu_bundle.py")
    versions = bundle.locked_versions(bundle.PACKAGES)
    assert versions["ray"] and versions["metaworld"] and set(versions) == set(bundle.PACKAGES)
    with pytest.raises(SystemExit, match="uv.lock has no version of \\['no-such-package'\\]"):
        bundle.locked_versions(("no-such-package",))


def run_check(out: Path, *args: str, steps: str | None = None, budget: int | None = None
              ) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"GPU_CHECK_STEPS": steps} if steps is not None else {}),
           **({"GPU_CHECK_BUDGET": str(budget)} if budget is not None else {})}
    return subprocess.run(["bash", str(CHECK), str(out), *args], capture_output=True, text=True, env=env, timeout=300)


def test_unknown_steps_modes_and_used_folders_are_refused_before_anything_is_written(tmp_path):
    refused = run_check(tmp_path / "a", "--cpu", steps="gpu_tests trainer_stpe")
    assert refused.returncode == 2 and "unknown step 'trainer_stpe'" in refused.stdout
    assert "trainer_step" in refused.stdout and not (tmp_path / "a").exists()
    refused = run_check(tmp_path / "b", "--gpu")
    assert refused.returncode == 2 and "got '--gpu'" in refused.stdout and not (tmp_path / "b").exists()
    used = tmp_path / "c"
    used.mkdir()
    (used / "figures.tsv").write_text("step\tstatus\tseconds\tfigures\nsetup\tok\t9\tkept\n")
    refused = run_check(used, "--cpu")
    assert refused.returncode == 2 and "already holds" in refused.stdout
    assert (used / "figures.tsv").read_text().endswith("kept\n")


def test_steps_beyond_the_budget_are_recorded_as_not_run(tmp_path):
    done = run_check(tmp_path / "out", "--cpu", steps="gpu_tests policy_speed", budget=0)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = (tmp_path / "out" / "figures.tsv").read_text().splitlines()[1:]
    assert rows == [f"{name}\tnot run\t0\tthe check's 0 s were spent" for name in ("gpu_tests", "policy_speed")]


@pytest.mark.slow
def test_the_cpu_dry_run_writes_a_line_of_figures_per_step(tmp_path):
    done = run_check(tmp_path / "out", "--cpu", steps="gpu_tests policy_speed")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split("\t") for line in (tmp_path / "out" / "figures.tsv").read_text().splitlines()]
    assert rows[0] == ["step", "status", "seconds", "figures"]
    steps = {row[0]: row for row in rows[1:]}
    assert list(steps) == ["gpu_tests", "policy_speed"]
    assert steps["gpu_tests"][1] == "ok" and "skipped" in steps["gpu_tests"][3]
    assert steps["policy_speed"][1] == "ok"
    assert "| pi0 |" in steps["policy_speed"][3] and "| openvla_oft |" in steps["policy_speed"][3]
    assert "== policy_speed" in (tmp_path / "out" / "check.log").read_text()
