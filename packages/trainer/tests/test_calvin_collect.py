"""vlarl-collect on CALVIN: its scripted experts record a dataset of calvin's robot_obs and both cameras."""

from __future__ import annotations

import pytest

from vlarl_envs.testing import require_simulator

require_simulator("calvin_env")

from vlarl_trainer.data import collect_demonstrations, load_dataset

pytestmark = pytest.mark.sim


def test_calvin_experts_fill_a_dataset(tmp_path):
    tasks = ["open_drawer", "stack_block"]
    summary = collect_demonstrations("vlarl/CALVIN-D-v0", 1, tmp_path / "demos", image_size=32, tasks=tasks,
                                     max_attempts_per_task=3)
    assert all(summary.tasks[task].kept == 1 for task in tasks)
    dataset = load_dataset(tmp_path / "demos")
    assert dataset.info["vlarl"]["env_id"] == "vlarl/CALVIN-D-v0" and dataset.info["robot_type"] == "panda"
    assert dataset.action_dim == 7 and dataset.state_dim == 15 and dataset.image_shape[:2] == (32, 32)
    assert dataset.info["features"]["action"]["names"][-1] == "gripper_open"
    assert [episode.metadata["env_task"] for episode in dataset.episodes] == tasks
    assert all(episode.metadata["success"] for episode in dataset.episodes)
