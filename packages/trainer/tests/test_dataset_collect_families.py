"""vlarl-collect on every family with a scripted expert: ManiSkill's PutOnPlate and PickCube, GSEnv."""

from __future__ import annotations

import pytest

from vlarl_envs.testing import require_simulator

require_simulator("mani_skill")

from vlarl_trainer.data import collect_demonstrations, load_dataset

pytestmark = [pytest.mark.sim, pytest.mark.slow]


@pytest.mark.parametrize("env_id, task", [
    ("vlarl/ManiSkill-PutOnPlate-v0", "PutOnPlate"),
    ("vlarl/ManiSkill-PickCube-v1", "PickCube"),
    ("vlarl/GSEnv-PutCubeOnPlate-v0", "PutCubeOnPlate"),
])
def test_a_family_expert_fills_a_dataset(tmp_path, env_id, task):
    summary = collect_demonstrations(env_id, 1, tmp_path / "demos", image_size=32, max_attempts_per_task=3)
    assert summary.tasks[task].kept == 1 and summary.tasks[task].succeeded >= 1
    dataset = load_dataset(tmp_path / "demos")
    assert dataset.info["vlarl"]["env_id"] == env_id and dataset.info["robot_type"] == "panda"
    assert dataset.action_dim == 7 and dataset.state_dim == 8 and dataset.image_shape[:2] == (32, 32)
    assert dataset.info["features"]["action"]["names"][-1] == "gripper"
    assert dataset.episodes[0].metadata["success"]


def test_a_task_without_an_expert_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"no scripted expert for ManiSkill task\(s\) \['PushT'\]"):
        collect_demonstrations("vlarl/ManiSkill-PushT-v1", 1, tmp_path / "demos", image_size=32)
    assert not (tmp_path / "demos").exists()
