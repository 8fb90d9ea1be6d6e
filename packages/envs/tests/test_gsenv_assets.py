"""Splat assets from the simulator's own meshes, and captures bound to the simulated robot.
Needs ManiSkill (an error in CI when missing)."""

import json
import shutil

import numpy as np
import pytest

from vlarl_envs.testing import require_simulator

require_simulator("mani_skill")

import torch

from vlarl_envs.gsenv.assets import main as build_assets_main
from vlarl_envs.gsenv.bodies import BodyTracker, splat_scene, visual_links
from vlarl_envs.gsenv.capture import LINK_SUFFIX, MANIFEST, load_capture
from vlarl_envs.gsenv.simulator import build_task
from vlarl_envs.gsenv.task import CAMERA_NAME
from vlarl_envs.splats.backends import TorchRasterizer
from vlarl_envs.splats.camera import PinholeCamera
from vlarl_envs.splats.scene import SceneRenderer

pytestmark = [pytest.mark.sim, pytest.mark.slow]
SMALL_BUILD = [
    "--robot-gaussians", "3000", "--cube-gaussians", "300", "--plate-gaussians", "400", "--table-gaussians", "3000"
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A capture built by the console script with small budgets."""
    root = tmp_path_factory.mktemp("assets") / "capture"
    build_assets_main(["--output", str(root), *SMALL_BUILD])
    return root


@pytest.fixture(scope="module")
def task():
    task = build_task("state", (60, 80))
    task.reset(seed=0)
    yield task
    task.close()


def render(task, root) -> np.ndarray:
    scene = splat_scene(task, load_capture(root))
    params = task._sensors[CAMERA_NAME].get_params()
    camera = PinholeCamera.from_extrinsic(80, 60, params["intrinsic_cv"][0], params["extrinsic_cv"][0])
    return SceneRenderer(scene, camera, TorchRasterizer()).render(BodyTracker(task, scene).poses())[0].numpy()


def test_the_builder_writes_the_published_layout(built, task, capsys):
    link_files = sorted(p.name for p in (built / "robot" / "panda" / "parts").iterdir())
    assert link_files == sorted(f"{link.name}{LINK_SUFFIX}" for link in visual_links(task))
    for path in ("object/cube/object_3dgs_abs.ply", "object/plate/object_3dgs_abs.ply", "object/table/table_abs.ply"):
        assert (built / path).is_file(), path
    assert list((built / "background" / "background_image").glob("*.png"))
    manifest = json.loads((built / MANIFEST).read_text())
    assert manifest["settings"]["robot_gaussians"] == 3000 and len(manifest["reference_qpos"]) == 9
    capture = load_capture(built)
    robot = sum(len(g) for g in capture.links.values())
    assert 2000 < robot <= 3000 + 64 * len(capture.links), "photographing drops only buried samples"
    assert not list(built.parent.glob(".*building*")), "the staging directory was left behind"

    build_assets_main(["--output", str(built), *SMALL_BUILD])
    assert "already built" in capsys.readouterr().out


def test_the_builder_never_overwrites_a_foreign_directory(tmp_path):
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    with pytest.raises(SystemExit):
        build_assets_main(["--output", str(foreign), "--force"])
    assert (foreign / "keep.txt").read_text() == "mine"


def test_built_splats_look_like_the_simulator(built, task):
    """Photographed colours: the cube is red, the plate light, as in ManiSkill's render."""
    capture = load_capture(built)
    from vlarl_envs.splats.sh import sh_to_rgb

    cube, plate = (sh_to_rgb(capture.objects[name].sh).mean(dim=0) for name in ("cube", "plate"))
    assert cube[0] > 0.5 and cube[1] < 0.35 and cube[2] < 0.35, cube
    assert plate.min() > 0.6, plate
    image = render(task, built)
    assert image.shape == (60, 80, 3) and image.std() > 10


def test_a_capture_with_another_robots_link_names_binds_to_the_panda(built, task, tmp_path):
    """Published captures name links fr3_link0...; they bind by the part after the prefix."""
    renamed = tmp_path / "fr3_capture"
    shutil.copytree(built, renamed)
    parts = renamed / "robot" / "panda" / "parts"
    for path in parts.iterdir():
        path.rename(parts / path.name.replace("panda_", "fr3_"))
    (renamed / "robot" / "panda").rename(renamed / "robot" / "my_franka")
    np.testing.assert_array_equal(render(task, renamed), render(task, built))

    (renamed / "robot" / "my_franka" / "parts" / f"fr3_hand{LINK_SUFFIX}").unlink()
    with pytest.raises(ValueError, match=r"no splats for links \['panda_hand'\]"):
        splat_scene(task, load_capture(renamed))


def test_splats_follow_the_robot_when_it_moves(built, task):
    before = render(task, built)
    qpos = task.agent.robot.get_qpos().clone()
    moved = qpos.clone()
    moved[0, 0] += 0.6  # swing the arm about its base
    task.agent.robot.set_qpos(moved)
    after = render(task, built)
    task.agent.robot.set_qpos(qpos)
    assert np.abs(after.astype(int) - before.astype(int)).mean() > 2
    np.testing.assert_array_equal(render(task, built), before)
    assert torch.equal(task.agent.robot.get_qpos(), qpos)
