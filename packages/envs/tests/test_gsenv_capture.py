"""The published GSEnv capture layout, read and written without a simulator."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("plyfile")

from vlarl_envs.gsenv.assets import BuildSettings, cache_root, default_asset_dir
from vlarl_envs.gsenv.capture import (
    MANIFEST,
    PUBLISHED_CAPTURE,
    CaptureSettings,
    link_key,
    load_capture,
    write_capture,
)
from vlarl_envs.splats.gaussians import Gaussians


def blob(count: int, centre=(0.0, 0.0, 0.0), seed: int = 0) -> Gaussians:
    generator = torch.Generator().manual_seed(seed)
    return Gaussians(
        means=torch.randn(count, 3, generator=generator) * 0.01 + torch.tensor(centre),
        quats=torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(count, 1),
        scales=torch.full((count, 3), 0.005),
        opacities=torch.full((count,), 0.9),
        sh=torch.zeros(count, 1, 3),
    )


ZERO_POSE_SETTINGS = CaptureSettings(reference_qpos=(0.0,) * 9, object_origins={"cube": (0, 0, 0)})
"""The robot at its zero pose and the cube's origin at the world's origin."""


def write_small_capture(root, settings=ZERO_POSE_SETTINGS):
    write_capture(
        root,
        "fr3",
        {"fr3_link0": blob(5), "fr3_hand": blob(6, seed=1)},
        {"cube": blob(7, centre=(0.5, 0.1, 0.02)), "plate": blob(8, centre=(0.4, -0.1, 0.0))},
        blob(20, seed=2),
        np.full((6, 8, 3), 200, np.uint8),
        settings,
    )


def test_capture_round_trip(tmp_path):
    settings = CaptureSettings(
        reference_qpos=tuple(range(9)), robot_offset=(0.0, 0.0, 0.02), object_origins={"cube": (0.5, 0.1, 0.02)}
    )
    write_small_capture(tmp_path, settings)
    assert (tmp_path / "robot/fr3/parts/fr3_link0_3dgs_abs.ply").is_file()
    assert (tmp_path / "object/table/table_abs.ply").is_file()
    capture = load_capture(tmp_path)
    assert capture.robot == "fr3" and sorted(capture.links) == ["fr3_hand", "fr3_link0"]
    assert len(capture.objects["plate"]) == 8 and len(capture.table) == 20
    assert capture.backdrop.shape == (6, 8, 3) and float(capture.backdrop.max()) == pytest.approx(200 / 255)
    assert capture.settings == settings
    torch.testing.assert_close(capture.object_origin("cube"), torch.tensor([0.5, 0.1, 0.02]))
    plate = capture.objects["plate"]
    torch.testing.assert_close(capture.object_origin("plate"), plate.means.mean(dim=0))


def test_a_capture_without_manifest_gets_the_published_settings(tmp_path):
    write_small_capture(tmp_path)
    (tmp_path / MANIFEST).unlink()
    assert load_capture(tmp_path).settings == PUBLISHED_CAPTURE


def test_incomplete_captures_name_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="expected a GSEnv capture directory"):
        load_capture(tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"expected exactly one robot/<name>/parts/ folder, found none"):
        load_capture(tmp_path)
    write_small_capture(tmp_path)
    (tmp_path / "object/table/table_abs.ply").unlink()
    (tmp_path / "background/background_image/background.png").unlink()
    with pytest.raises(FileNotFoundError,
                       match=r"missing \['object/table/table_abs.ply', 'background/background_image"):
        load_capture(tmp_path)
    (tmp_path / "robot/panda/parts").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"found \['fr3', 'panda'\]"):
        load_capture(tmp_path)


def test_broken_manifest_and_image_are_reported(tmp_path):
    write_small_capture(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"reference_qpos": [0.0]}))
    with pytest.raises(ValueError, match="expected JSON with reference_qpos, robot_offset and object_origins"):
        load_capture(tmp_path)
    (tmp_path / MANIFEST).unlink()
    (tmp_path / "background/background_image/background.png").write_bytes(b"not an image")
    with pytest.raises(ValueError, match="expected a JPEG or PNG background image"):
        load_capture(tmp_path)


def test_link_names_match_across_robots():
    assert link_key("fr3_link3") == link_key("panda_link3") == "link3"
    assert link_key("fr3_leftfinger") == link_key("panda_leftfinger") == "leftfinger"


def test_build_settings_name_their_cache_entry(monkeypatch, tmp_path):
    assert BuildSettings().key() == BuildSettings().key() != BuildSettings(seed=1).key()
    with pytest.raises(ValueError, match="BuildSettings.cube_gaussians: expected a positive count, got 0"):
        BuildSettings(cube_gaussians=0)
    monkeypatch.setenv("VLARL_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
    monkeypatch.delenv("VLARL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_asset_dir(BuildSettings()).parent == tmp_path / "xdg" / "vlarl" / "gsenv"


# --- the published release's file names ----------------------------------------------------


def test_a_capture_in_the_published_release_layout_loads(tmp_path):
    """RLinf/gsenv-assets-v0 as ManiSkill-GS reads it: robot my_franka with fr3_* parts, object
    meshes and a URDF beside the PLYs (ignored), a JPEG backdrop, no manifest."""
    from PIL import Image

    from vlarl_envs.splats.ply import write_ply

    parts = tmp_path / "robot" / "my_franka" / "parts"
    names = [f"fr3_link{i}" for i in range(8)] + ["fr3_hand", "fr3_leftfinger", "fr3_rightfinger"]
    for seed, name in enumerate(names):
        write_ply(blob(4, seed=seed), parts / f"{name}_3dgs_abs.ply")
    (tmp_path / "robot" / "my_franka" / "fr3_wristcam.urdf").write_text("<robot name='fr3'/>")
    for name, centre in (("cube", (0.4, 0.2, 0.02)), ("plate", (0.45, 0.0, 0.01))):
        write_ply(blob(6, centre=centre), tmp_path / "object" / name / "object_3dgs_abs.ply")
        (tmp_path / "object" / name / "mesh_w_vertex_color_abs.obj").write_text("v 0 0 0\n")
    write_ply(blob(30, seed=9), tmp_path / "object" / "table" / "table_abs.ply")
    (tmp_path / "background" / "background_image").mkdir(parents=True)
    Image.fromarray(np.full((48, 64, 3), (20, 160, 40), np.uint8)).save(
        tmp_path / "background" / "background_image" / "green_background.jpg"
    )
    capture = load_capture(tmp_path)
    assert capture.robot == "my_franka" and sorted(capture.links) == sorted(names)
    assert capture.settings == PUBLISHED_CAPTURE and capture.settings.robot_offset == (0.0, 0.0, 0.02)
    assert sorted(capture.objects) == ["cube", "plate"] and len(capture.table) == 30
    assert capture.backdrop.shape == (48, 64, 3) and float(capture.backdrop[..., 1].mean()) > 0.5
    torch.testing.assert_close(capture.object_origin("cube"), capture.objects["cube"].means.mean(dim=0))


# --- vlarl-gsenv-capture -----------------------------------------------------------------------

INRIA_FIELDS = (
    ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
    + [f"f_rest_{i}" for i in range(45)]
    + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
)


def write_inria_ply(path, count=40, drop=(), seed=0):
    """A degree-3 3DGS PLY as INRIA's trainer writes it (normals, 45 f_rest, logits, log scales)."""
    import plyfile

    rng = np.random.default_rng(seed)
    records = np.zeros(count, dtype=[(name, "f4") for name in INRIA_FIELDS if name not in drop])
    for name in records.dtype.names:
        records[name] = rng.normal(size=count) * (0.2 if name.startswith("f_rest") else 1.0)
    if "x" in records.dtype.names:
        records["x"], records["y"], records["z"] = rng.uniform(-1, 1, count), rng.uniform(-1, 1, count), 0.0
    if "scale_0" in records.dtype.names:
        for axis in range(3):
            records[f"scale_{axis}"] = np.log(0.02)
    plyfile.PlyData([plyfile.PlyElement.describe(records, "vertex")]).write(str(path))
    return path


def capture_main(*args):
    from vlarl_envs.gsenv.capture_cli import main

    main([str(arg) for arg in args])


@pytest.fixture
def base(tmp_path):
    root = tmp_path / "base"
    write_small_capture(root)
    return root


QUARTER_TURN = (0.7071067811865476, 0.0, 0.0, 0.7071067811865476)
"""(w, x, y, z): 90 degrees about z."""


def test_the_capture_command_moves_a_ply_into_the_world(tmp_path, base, capsys):
    from vlarl_envs.splats.ply import read_ply
    from vlarl_envs.splats.sh import sh_to_rgb

    ply = write_inria_ply(tmp_path / "scene.ply")
    output = tmp_path / "captures" / "kitchen"
    capture_main(ply, "--table-pose", 0.3, 0.0, -0.02, *QUARTER_TURN, "--scale", 0.5, "--base", base,
                 "--output", output)  # fmt: skip
    assert f"wrote capture: {output}" in capsys.readouterr().out
    capture, source = load_capture(output), read_ply(ply)
    turn = torch.tensor([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    expected = 0.5 * source.means @ turn.T + torch.tensor([0.3, 0.0, -0.02])
    torch.testing.assert_close(capture.table.means, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(capture.table.scales, source.scales * 0.5)
    assert capture.table.sh_degree == 3
    directions = torch.randn(len(source), 3)
    torch.testing.assert_close(sh_to_rgb(capture.table.sh, directions @ turn.T), sh_to_rgb(source.sh, directions),
                               atol=1e-4, rtol=0)  # fmt: skip
    # the robot, the objects and the backdrop are the base's, byte for byte
    for path in ("robot/fr3/parts/fr3_hand_3dgs_abs.ply", "object/cube/object_3dgs_abs.ply",
                 "background/background_image/background.png"):  # fmt: skip
        assert (output / path).read_bytes() == (base / path).read_bytes(), path
    manifest = json.loads((output / MANIFEST).read_text())
    assert manifest["builder"] == "vlarl-gsenv-capture" and manifest["table"]["source"] == str(ply.resolve())
    assert capture.settings == load_capture(base).settings
    assert [p.name for p in output.parent.iterdir()] == ["kitchen"], "no staging directory left behind"


def test_pose_files_and_inverse_poses_give_the_same_capture(tmp_path, base):
    from vlarl_envs.gsenv.capture_cli import parse_pose

    matrix = [[0.0, -1.0, 0.0, 0.3], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, -0.02], [0.0, 0.0, 0.0, 1.0]]
    (tmp_path / "pose.json").write_text(json.dumps({"matrix": matrix}))
    (tmp_path / "pose.yaml").write_text("position: [0.3, 0.0, -0.02]\n"
                                        "quaternion: [0.7071067811865476, 0, 0, 0.7071067811865476]\n")  # fmt: skip
    numbers = parse_pose([str(v) for row in matrix for v in row])
    np.testing.assert_allclose(parse_pose([str(tmp_path / "pose.json")]), numbers, atol=1e-9)
    np.testing.assert_allclose(parse_pose([str(tmp_path / "pose.yaml")]), numbers, atol=1e-9)
    np.testing.assert_allclose(parse_pose([str(v) for v in (0.3, 0, -0.02, *QUARTER_TURN)]), numbers, atol=1e-9)
    np.testing.assert_allclose(parse_pose([str(v) for row in np.linalg.inv(matrix) for v in row], inverse=True),
                               numbers, atol=1e-9)  # fmt: skip
    similarity = np.array(matrix) @ np.diag([2.0, 2.0, 2.0, 1.0])
    np.testing.assert_allclose(parse_pose([str(v) for row in matrix for v in row], scale=2.0), similarity, atol=1e-9)
    base_in_ply = [str(v) for row in np.linalg.inv(matrix) for v in row]  # in PLY units: scale after inverting
    np.testing.assert_allclose(parse_pose(base_in_ply, scale=2.0, inverse=True), np.diag([2.0, 2.0, 2.0, 1.0]) @ matrix,
                               atol=1e-9)  # fmt: skip

    ply = write_inria_ply(tmp_path / "scene.ply")
    capture_main(ply, "--table-pose", tmp_path / "pose.yaml", "--base", base, "--output", tmp_path / "a")
    from PIL import Image

    Image.fromarray(np.full((12, 16, 3), (30, 60, 200), np.uint8)).save(tmp_path / "room.png")
    capture_main(ply, "--table-pose", *[v for row in matrix for v in row], "--base", base, "--output", tmp_path / "b",
                 "--backdrop", tmp_path / "room.png")  # fmt: skip
    torch.testing.assert_close(load_capture(tmp_path / "a").table.means, load_capture(tmp_path / "b").table.means)
    assert load_capture(tmp_path / "b").backdrop.shape == (12, 16, 3)
    assert ((tmp_path / "b/background/background_image/background.png").read_bytes()
            == (tmp_path / "room.png").read_bytes())  # fmt: skip


def run_failing(capsys, *args) -> str:
    with pytest.raises(SystemExit) as failed:
        capture_main(*args)
    assert failed.value.code == 2
    return capsys.readouterr().err


def test_the_capture_command_names_what_is_wrong_and_writes_nothing(tmp_path, base, capsys):
    ply = write_inria_ply(tmp_path / "scene.ply")
    output = tmp_path / "out"
    pose = ["--table-pose", *[str(v) for v in (0, 0, 0, 1, 0, 0, 0)]]

    error = run_failing(capsys, write_inria_ply(tmp_path / "bad.ply", drop=("opacity", "rot_3")), *pose,
                        "--base", base, "--output", output)  # fmt: skip
    assert ("expected 3DGS vertex properties" in error and "missing ['opacity', 'rot_3']" in error
            and "found ['x', 'y'" in error)  # fmt: skip
    error = run_failing(capsys, ply, "--table-pose", "1", "2", "3", "4", "5", "--base", base, "--output", output)
    assert "expected 16 numbers (a 4x4 matrix, row by row) or 7 (x y z qw qx qy qz), got 5" in error
    sheared = [1, 0.5, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    error = run_failing(capsys, ply, "--table-pose", *sheared, "--base", base, "--output", output)
    assert "expected a rotation times one uniform scale" in error
    error = run_failing(capsys, ply, "--table-pose", *[1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1],
                        "--base", base, "--output", output)  # fmt: skip
    assert "last row to be [0, 0, 0, 1], got [0.0, 0.0, 1.0, 1.0]" in error
    (tmp_path / "pose.json").write_text(json.dumps({"matrix": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]}))
    error = run_failing(capsys, ply, "--table-pose", tmp_path / "pose.json", "--base", base, "--output", output)
    assert "expected a 4x4 pose matrix, got shape (3, 3)" in error
    error = run_failing(capsys, ply, "--table-pose", "pose.txt", "--base", base, "--output", output)
    assert "expected a pose file or 16 or 7 numbers, got 'pose.txt' (no such file)" in error
    (tmp_path / "notes.txt").write_text("a photo")
    error = run_failing(capsys, ply, *pose, "--base", base, "--output", output, "--backdrop", tmp_path / "notes.txt")
    assert "notes.txt: expected a background image ending in .jpg/.jpeg/.png" in error
    (base / "object/plate/object_3dgs_abs.ply").unlink()
    error = run_failing(capsys, ply, *pose, "--base", base, "--output", output)
    assert "missing ['object/plate/object_3dgs_abs.ply']" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.ply", "base", "notes.txt", "pose.json", "scene.ply"], (
        "nothing written"
    )


def test_a_capture_that_fails_half_way_leaves_nothing(tmp_path, base, monkeypatch):
    import vlarl_envs.splats.ply as ply_module

    def broken_disk(gaussians, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ply_module, "write_ply", broken_disk)
    ply = write_inria_ply(tmp_path / "scene.ply")
    with pytest.raises(OSError, match="No space left"):
        capture_main(ply, "--table-pose", *[0, 0, 0, 1, 0, 0, 0], "--base", base,
                     "--output", tmp_path / "out" / "capture")  # fmt: skip
    assert list((tmp_path / "out").iterdir()) == [], "neither the capture nor its staging directory is left"


def test_the_capture_command_never_overwrites(tmp_path, base, capsys):
    ply = write_inria_ply(tmp_path / "scene.ply")
    output = tmp_path / "mine"
    output.mkdir()
    (output / "keep.txt").write_text("mine")
    error = run_failing(capsys, ply, "--table-pose", *[0, 0, 0, 1, 0, 0, 0], "--base", base, "--output", output)
    assert f"--output {output} exists" in error
    assert [p.name for p in output.iterdir()] == ["keep.txt"]


def test_the_capture_command_runs_as_a_module(tmp_path, base):
    import subprocess
    import sys

    ply = write_inria_ply(tmp_path / "scene.ply", count=5)
    output = tmp_path / "capture"
    command = [sys.executable, "-m", "vlarl_envs.gsenv.capture_cli", str(ply),
               "--table-pose", "0", "0", "0", "1", "0", "0", "0",
               "--base", str(base), "--output", str(output)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(load_capture(output).table) == 5
