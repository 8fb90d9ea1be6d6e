"""The collector on MetaWorld: expert episodes in, the same episodes out of the dataset."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from vlarl_envs.testing import require_simulator

require_simulator("metaworld")

from vlarl_envs.metaworld import METAWORLD_INSTRUCTIONS, scripted_expert
from vlarl_trainer.cli.commands import collect_main
from vlarl_trainer.data import collect_demonstrations, load_dataset

pytestmark = pytest.mark.sim
TASK = "reach-v3"
ENV_ID = f"vlarl/MetaWorld-{TASK}"


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    root = tmp_path_factory.mktemp("demos") / "reach"
    summary = collect_demonstrations(ENV_ID, 2, root, image_size=32, first_episode_id=3)
    return summary, load_dataset(root)


def test_collected_episodes_read_back_with_shapes_tasks_and_stats(collected):
    summary, dataset = collected
    assert summary.tasks[TASK].kept == 2 and summary.tasks[TASK].succeeded >= 2
    assert dataset.num_episodes == 2
    lengths = [record.length for record in dataset.episodes]
    assert sum(lengths) == dataset.num_frames == summary.tasks[TASK].frames
    assert dataset.images["main"].shape == (dataset.num_frames, 32, 32, 3) and dataset.images["main"].dtype == np.uint8
    assert dataset.states.shape == (dataset.num_frames, 4) and dataset.states.dtype == np.float32
    assert dataset.actions.shape == (dataset.num_frames, 4) and dataset.actions.dtype == np.float32
    assert dataset.environment_states.shape == (dataset.num_frames, 39)
    assert dataset.tasks == [METAWORLD_INSTRUCTIONS.canonical(TASK)]
    assert [record.metadata["episode_id"] for record in dataset.episodes] == [3, 4]
    assert all(record.metadata["env_task"] == TASK and record.metadata["success"] for record in dataset.episodes)
    for record in dataset.episodes:
        assert dataset.successes[record.stop - 1] and dataset.dones[record.stop - 1]
    assert dataset.info["fps"] == 80 and dataset.info["vlarl"]["env_id"] == ENV_ID
    np.testing.assert_allclose(dataset.stats["action"]["mean"], dataset.actions.mean(0), atol=1e-6)
    np.testing.assert_allclose(dataset.stats["observation.state"]["max"], dataset.states.max(0))


def test_actions_and_observations_are_what_the_expert_saw_and_did(collected):
    _, dataset = collected
    env = gym.make(ENV_ID, image_size=32)
    for record in dataset.episodes:
        observation, _ = env.reset(options={"episode_id": record.metadata["episode_id"], "split": "train"})
        expert = scripted_expert(TASK)
        for frame in range(record.start, record.stop):
            np.testing.assert_array_equal(observation["main_images"], dataset.images["main"][frame])
            np.testing.assert_array_equal(observation["states"], dataset.states[frame])
            action = expert(observation)
            np.testing.assert_array_equal(action, dataset.actions[frame])
            observation, *_ = env.step(action)
    env.close()


def test_refuses_an_existing_dataset_and_unknown_tasks_or_envs(collected, tmp_path):
    _, dataset = collected
    with pytest.raises(FileExistsError, match="never overwritten"):
        collect_demonstrations(ENV_ID, 1, dataset.root, image_size=32)
    with pytest.raises(ValueError, match=r"has no task\(s\) \['push-v3'\]"):
        collect_demonstrations(ENV_ID, 1, tmp_path / "x", image_size=32, tasks=["push-v3"])
    with pytest.raises(ValueError, match="env id 'CartPole-v1' belongs to no vlarl env family"):
        collect_demonstrations("CartPole-v1", 1, tmp_path / "y")
    assert list(tmp_path.iterdir()) == []


def test_task_episodes_give_named_tasks_their_own_count(tmp_path):
    root = tmp_path / "mt"
    summary = collect_demonstrations("vlarl/MetaWorld-MT10-v3", 1, root, image_size=32,
                                     tasks=["reach-v3", "drawer-close-v3"], task_episodes={"drawer-close-v3": 2})
    assert {task: row.kept for task, row in summary.tasks.items()} == {"reach-v3": 1, "drawer-close-v3": 2}
    dataset = load_dataset(root)
    assert [record.metadata["env_task"] for record in dataset.episodes] == ["reach-v3", "drawer-close-v3",
                                                                           "drawer-close-v3"]
    assert dataset.info["vlarl"]["episodes_per_task"] == {"reach-v3": 1, "drawer-close-v3": 2}


def test_refuses_task_episodes_for_other_tasks_or_without_a_positive_count(tmp_path):
    with pytest.raises(ValueError, match=r"task_episodes names task\(s\) \['push-v3'\] that are not collected"):
        collect_demonstrations(ENV_ID, 1, tmp_path / "x", image_size=32, task_episodes={"push-v3": 2})
    with pytest.raises(ValueError, match="positive integers, got 0 for reach-v3"):
        collect_demonstrations(ENV_ID, 1, tmp_path / "y", image_size=32, task_episodes={TASK: 0})
    assert collect_main([f"env.id={ENV_ID}", f"dataset={tmp_path / 'z'}", "collect.task_episodes={reach-v3: 0}"]) == 2
    assert collect_main([f"env.id={ENV_ID}"]) == 2
    assert list(tmp_path.iterdir()) == []


def test_console_script_prints_the_table(tmp_path, capsys):
    assert collect_main([f"env.id={ENV_ID}", "collect.episodes_per_task=1", f"dataset={tmp_path / 'd'}",
                         "env.kwargs={image_size: 32, horizon: 150, obs_mode: state}",
                         f"collect.task_episodes={{{TASK}: 2}}"]) == 0
    printed = capsys.readouterr().out
    assert f"| {TASK} | 2/2 | 2 |" in printed and str(tmp_path / "d") in printed
    dataset = load_dataset(tmp_path / "d")
    assert dataset.num_episodes == 2
    assert dataset.info["vlarl"]["horizon"] == 150  # SFT evaluation plays episodes as long as these
