"""The LeRobot v3.0 writer and reader on synthetic episodes, checked against the published layout.

lerobot itself cannot be a test dependency (lerobot 0.4.4, the last release for Python < 3.12,
pins torch < 2.11 and would move the workspace's torch), so these tests check the files against
LeRobot's v3.0 format description, and read a dataset that lerobot 0.4.4 wrote itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vlarl_trainer.data import ActionChunkSampler, Episode, LeRobotDatasetWriter, load_dataset

FIXTURES = Path(__file__).parent / "fixtures"
TASKS = ("reach the goal position", "push the puck to the goal")


def synthetic_episode(length: int, task: str, seed: int, image_size: int = 16, state_dim: int = 4) -> Episode:
    rng = np.random.default_rng(seed)
    successes = np.zeros(length, dtype=bool)
    successes[-1] = True
    return Episode(
        task=task,
        images={"main": rng.integers(0, 256, (length, image_size, image_size, 3), dtype=np.uint8)},
        states=rng.normal(size=(length, state_dim)).astype(np.float32),
        actions=rng.uniform(-1, 1, (length, 3)).astype(np.float32),
        rewards=successes.astype(np.float32),
        successes=successes,
        environment_states=rng.normal(size=(length, 7)).astype(np.float32),
        metadata={"env_task": f"task-{seed}", "episode_id": seed, "split": "train", "success": True},
    )


@pytest.fixture
def episodes() -> list[Episode]:
    return [synthetic_episode(5, TASKS[0], 0), synthetic_episode(3, TASKS[1], 1), synthetic_episode(4, TASKS[0], 2)]


@pytest.fixture
def written(tmp_path, episodes) -> Path:
    with LeRobotDatasetWriter(tmp_path / "demos", fps=80, robot_type="sawyer",
                              extra_info={"env_id": "vlarl/MetaWorld-MT10-v3"}) as writer:
        for episode in episodes:
            writer.add_episode(episode)
    return tmp_path / "demos"


def test_round_trip_keeps_every_array_task_and_episode(written, episodes):
    dataset = load_dataset(written)
    assert dataset.num_episodes == 3 and dataset.num_frames == 12
    assert dataset.tasks == list(TASKS)
    assert [(r.start, r.stop) for r in dataset.episodes] == [(0, 5), (5, 8), (8, 12)]
    assert dataset.episodes[1].metadata == {"env_task": "task-1", "episode_id": 1, "split": "train", "success": True}
    assert dataset.images["main"].dtype == np.uint8 and dataset.images["main"].shape == (12, 16, 16, 3)
    assert dataset.states.dtype == np.float32 and dataset.actions.dtype == np.float32
    for record, episode in zip(dataset.episodes, episodes, strict=True):
        frames = slice(record.start, record.stop)
        np.testing.assert_array_equal(dataset.images["main"][frames], episode.images["main"])
        np.testing.assert_array_equal(dataset.states[frames], episode.states)
        np.testing.assert_array_equal(dataset.actions[frames], episode.actions)
        np.testing.assert_array_equal(dataset.environment_states[frames], episode.environment_states)
        np.testing.assert_array_equal(dataset.frame_index[frames], np.arange(episode.length))
        assert dataset.task_descriptions(np.arange(record.start, record.stop)) == [episode.task] * episode.length
    np.testing.assert_array_equal(dataset.dones, np.isin(np.arange(12), [4, 7, 11]))


def test_stats_match_the_data(written, episodes):
    stats = load_dataset(written).stats
    states = np.concatenate([episode.states for episode in episodes])
    np.testing.assert_allclose(stats["observation.state"]["mean"], states.mean(0), rtol=1e-5)
    np.testing.assert_allclose(stats["observation.state"]["std"], states.std(0), rtol=1e-5)
    np.testing.assert_allclose(stats["observation.state"]["min"], states.min(0))
    assert stats["observation.state"]["count"].tolist() == [12]
    images = np.concatenate([episode.images["main"] for episode in episodes]) / 255.0
    assert stats["observation.images.main"]["mean"].shape == (3, 1, 1)
    np.testing.assert_allclose(stats["observation.images.main"]["mean"].ravel(), images.mean((0, 1, 2)), rtol=1e-6)
    assert set(stats["action"]) == {"min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"}


def test_files_follow_the_published_v3_layout(written):
    info = json.loads((written / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    assert info["fps"] == 80 and info["robot_type"] == "sawyer"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (3, 12, 2)
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["splits"] == {"train": "0:3"}
    assert info["vlarl"] == {"env_id": "vlarl/MetaWorld-MT10-v3"}
    features = info["features"]
    assert features["observation.images.main"] == {"dtype": "image", "shape": [16, 16, 3],
                                                   "names": ["height", "width", "channels"]}
    assert features["observation.state"]["dtype"] == "float32" and features["observation.state"]["shape"] == [4]
    assert features["action"]["shape"] == [3]
    for name in ("timestamp", "frame_index", "episode_index", "index", "task_index", "next.done"):
        assert features[name]["shape"] == [1]

    data = pq.read_table(written / "data/chunk-000/file-000.parquet")
    assert data.column_names == list(features)
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    assert data.schema.field("observation.images.main").type == image_type
    assert data.schema.field("observation.state").type == pa.list_(pa.float32(), 4)
    assert data.schema.field("index").type == pa.int64()
    assert data.column("timestamp").to_pylist()[:3] == pytest.approx([0.0, 1 / 80, 2 / 80])
    assert data.column("observation.images.main")[0]["bytes"].as_py().startswith(b"\x89PNG")

    tasks = pq.read_table(written / "meta/tasks.parquet")
    pandas_metadata = json.loads(tasks.schema.metadata[b"pandas"])
    assert pandas_metadata["index_columns"] == ["__index_level_0__"]
    assert tasks.column("__index_level_0__").to_pylist() == list(TASKS)
    assert tasks.column("task_index").to_pylist() == [0, 1]

    episodes = pq.read_table(written / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [row["tasks"] for row in episodes] == [[TASKS[0]], [TASKS[1]], [TASKS[0]]]
    assert [(row["dataset_from_index"], row["dataset_to_index"]) for row in episodes] == [(0, 5), (5, 8), (8, 12)]
    assert {row["data/chunk_index"] for row in episodes} == {0} and {row["data/file_index"] for row in episodes} == {0}
    assert len(episodes[0]["stats/observation.images.main/mean"]) == 3
    assert json.loads((written / "meta/stats.json").read_text())["action"]["count"] == [12]


def test_reads_a_dataset_written_by_lerobot_itself():
    dataset = load_dataset(FIXTURES / "written_by_lerobot_0_4_4")
    assert dataset.tasks == list(TASKS)
    assert [(r.start, r.stop, r.tasks) for r in dataset.episodes] == [(0, 5, [TASKS[0]]), (5, 8, [TASKS[1]])]
    np.testing.assert_array_equal(dataset.images["main"][:, 3, 7, 1], [0, 1, 2, 3, 4, 10, 11, 12])
    np.testing.assert_array_equal(dataset.states[:, :2],
                                  [[0, 0], [0, 1], [0, 2], [0, 3], [0, 4], [1, 0], [1, 1], [1, 2]])
    np.testing.assert_allclose(dataset.actions[6], [0.1, -0.1, 1, 1])
    assert dataset.environment_states is None and dataset.successes is None
    assert dataset.fps == 10 and dataset.stats["observation.state"]["mean"].shape == (4,)


def test_existing_path_is_never_overwritten(written):
    before = sorted(path.stat().st_mtime_ns for path in written.rglob("*"))
    with pytest.raises(FileExistsError, match="never overwritten"):
        LeRobotDatasetWriter(written, fps=80)
    assert sorted(path.stat().st_mtime_ns for path in written.rglob("*")) == before


def test_a_failure_while_writing_leaves_nothing_behind(tmp_path, episodes):
    target = tmp_path / "demos"
    with pytest.raises(RuntimeError, match="expert crashed"):
        with LeRobotDatasetWriter(target, fps=80) as writer:
            writer.add_episode(episodes[0])
            raise RuntimeError("expert crashed")
    assert list(tmp_path.iterdir()) == []


def test_nothing_is_visible_until_close(tmp_path, episodes):
    writer = LeRobotDatasetWriter(tmp_path / "demos", fps=80)
    writer.add_episode(episodes[0])
    assert not (tmp_path / "demos").exists()
    writer.close()
    assert load_dataset(tmp_path / "demos").num_frames == 5
    assert [path.name for path in tmp_path.iterdir()] == ["demos"]


def test_empty_and_mismatched_episodes_are_refused(tmp_path, episodes):
    with pytest.raises(ValueError, match="empty dataset"):
        LeRobotDatasetWriter(tmp_path / "empty", fps=80).close()
    with pytest.raises(ValueError, match=r"observation.state expected \[4\], got \[6\]"):
        with LeRobotDatasetWriter(tmp_path / "mixed", fps=80) as writer:
            writer.add_episode(episodes[0])
            writer.add_episode(synthetic_episode(3, TASKS[0], 5, state_dim=6))
    assert list(tmp_path.iterdir()) == []
    broken = synthetic_episode(3, TASKS[0], 6)
    broken.actions = broken.actions[:2]
    with pytest.raises(ValueError, match="has 3 frames, expected 2"):
        LeRobotDatasetWriter(tmp_path / "broken", fps=80).add_episode(broken)


def test_malformed_datasets_raise_naming_what_was_expected(tmp_path, written):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_dataset(tmp_path / "nowhere")
    (tmp_path / "no-info").mkdir()
    with pytest.raises(FileNotFoundError, match="info.json is missing"):
        load_dataset(tmp_path / "no-info")
    info_path = written / "meta/info.json"
    info = json.loads(info_path.read_text())
    info_path.write_text(json.dumps({**info, "codebase_version": "v2.1"}))
    with pytest.raises(ValueError, match="'v2.1' is not supported; expected 'v3.0'"):
        load_dataset(written)
    video = {**info["features"]["observation.images.main"], "dtype": "video"}
    info_path.write_text(json.dumps({**info, "features": {**info["features"], "observation.images.main": video}}))
    with pytest.raises(ValueError, match="video features"):
        load_dataset(written)
    info_path.write_text(json.dumps({**info, "total_frames": 13}))
    with pytest.raises(ValueError, match="declares 3 episodes and 13 frames, found 3 episodes and 12"):
        load_dataset(written)


def test_action_chunks_repeat_the_last_action_and_mark_the_padding(written):
    dataset = load_dataset(written)
    sampler = ActionChunkSampler(dataset, horizon=4)
    batch = sampler.batch(np.array([0, 3, 5]))
    assert batch["main_images"].shape == (3, 16, 16, 3) and batch["states"].shape == (3, 4)
    assert batch["task_description"] == [TASKS[0], TASKS[0], TASKS[1]]
    assert batch["actions"].shape == (3, 4, 3)
    np.testing.assert_array_equal(batch["actions"][0], dataset.actions[0:4])
    np.testing.assert_array_equal(batch["actions"][1], dataset.actions[[3, 4, 4, 4]])
    np.testing.assert_array_equal(batch["actions"][2], dataset.actions[[5, 6, 7, 7]])
    np.testing.assert_array_equal(batch["action_is_pad"], [[0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 0, 1]])
    drawn = sampler.sample(64, np.random.default_rng(0))
    assert drawn["actions"].shape == (64, 4, 3) and len(drawn["task_description"]) == 64
