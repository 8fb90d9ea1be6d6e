"""The published GSEnv capture layout, read and written without a simulator."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("plyfile")

from vlarl_envs.gsenv.assets import BuildSettings, cache_root, default_asset_dir  # noqa: E402
from vlarl_envs.gsenv.capture import (  # noqa: E402
    MANIFEST,
    PUBLISHED_CAPTURE,
    CaptureSettings,
    link_key,
    load_capture,
    write_capture,
)
from vlarl_envs.splats.gaussians import Gaussians  # noqa: E402


def blob(count: int, centre=(0.0, 0.0, 0.0), seed: int = 0) -> Gaussians:
    generator = torch.Generator().manual_seed(seed)
    return Gaussians(
        means=torch.randn(count, 3, generator=generator) * 0.01 + torch.tensor(centre),
        quats=torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(count, 1),
        scales=torch.full((count, 3), 0.005),
        opacities=torch.full((count,), 0.9),
        sh=torch.zeros(count, 1, 3),
    )


def write_small_capture(root, settings=CaptureSettings(reference_qpos=(0.0,) * 9, object_origins={"cube": (0, 0, 0)})):
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
    with pytest.raises(FileNotFoundError, match=r"missing \['object/table/table_abs.ply', 'background/background_image"):
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
