"""Writing episodes as a LeRobot v3.0 dataset, atomically.

The dataset is built in a hidden sibling directory (``.<name>.tmp-<id>``) and renamed to its
name only when complete, so a reader never sees half a dataset, a crash leaves no dataset, and
an existing path is never written into or replaced.

>>> with LeRobotDatasetWriter("demos/reach", fps=80, robot_type="sawyer") as writer:  # doctest: +SKIP
...     writer.add_episode(episode)
"""

from __future__ import annotations

import io
import json
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from vlarl_trainer.data import layout
from vlarl_trainer.data.stats import aggregate_stats, feature_stats, stats_to_json

EPISODE_METADATA_PREFIX = "vlarl/"
"""Extra per-episode columns (env task, episode id, split, success) carry this prefix."""


@dataclass
class Episode:
    """One recorded episode of T steps; frame t is the observation before action t.

    images:             camera name ("main", "wrist") -> uint8 [T, H, W, 3]
    states:             float32 [T, S]
    actions:            float32 [T, A], the actions taken (normalized env actions)
    rewards:            float32 [T], the reward after each action
    successes:          bool [T], ``info["success"]`` after each action
    environment_states: float32 [T, P] or None (the env's privileged state)
    metadata:           extra episode columns, stored as ``vlarl/<key>``
    """

    task: str
    images: dict[str, np.ndarray]
    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    successes: np.ndarray
    environment_states: np.ndarray | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def length(self) -> int:
        return int(self.actions.shape[0])

    def columns(self) -> dict[str, np.ndarray]:
        """Recorded arrays under their LeRobot feature names, checked for a common length T."""
        columns = {layout.camera_feature(camera): frames for camera, frames in self.images.items()}
        columns[layout.STATE] = self.states
        if self.environment_states is not None:
            columns[layout.ENVIRONMENT_STATE] = self.environment_states
        columns[layout.ACTION] = self.actions
        columns[layout.REWARD] = self.rewards
        columns[layout.SUCCESS] = self.successes
        if self.length == 0:
            raise ValueError(f"episode of task {self.task!r} has no frames")
        for name, values in columns.items():
            if values.shape[0] != self.length:
                raise ValueError(f"episode of task {self.task!r}: {name} has {values.shape[0]} frames, "
                                 f"expected {self.length} (one per action)")
        return columns


def features_of(episode: Episode, names: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """LeRobot feature specs of an episode's columns plus the index columns every dataset has."""
    features: dict[str, dict[str, Any]] = {}
    for name, values in episode.columns().items():
        if name.startswith(layout.IMAGE_PREFIX):
            if values.dtype != np.uint8 or values.ndim != 4 or values.shape[-1] != 3:
                raise ValueError(f"{name} must be uint8 [T, H, W, 3], got {values.dtype} {list(values.shape)}")
            features[name] = layout.image_spec(values.shape[1], values.shape[2])
        elif name in (layout.REWARD, layout.SUCCESS):
            features[name] = layout.scalar_spec("float32" if name == layout.REWARD else "bool")
        else:
            if values.ndim != 2:
                raise ValueError(f"{name} must be [T, n], got shape {list(values.shape)}")
            features[name] = layout.vector_spec("float32", values.shape[1], names.get(name))
    features[layout.DONE] = layout.scalar_spec("bool")
    features["timestamp"] = layout.scalar_spec("float32")
    for name in ("frame_index", "episode_index", "index", "task_index"):
        features[name] = layout.scalar_spec("int64")
    return features


def encode_png(frame: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="PNG")
    return buffer.getvalue()


class LeRobotDatasetWriter:
    """Appends episodes to a new LeRobot v3.0 dataset; ``close`` publishes it under ``root``."""

    def __init__(
        self,
        root: str | Path,
        fps: int,
        robot_type: str | None = None,
        feature_names: dict[str, list[str]] | None = None,
        extra_info: dict[str, Any] | None = None,
    ) -> None:
        """
        Args:
            root: the dataset directory to create; it must not exist.
            fps: control frequency of the recorded steps (timestamps are frame_index / fps).
            robot_type: LeRobot's ``robot_type`` field, e.g. "sawyer".
            feature_names: optional per-dimension names, e.g. {"observation.state": ["x", ...]}.
            extra_info: JSON-ready facts stored under ``info.json["vlarl"]`` (env id, split, ...).
        """
        self.root = Path(root)
        if self.root.exists():
            raise FileExistsError(f"dataset {self.root} already exists; datasets are never overwritten")
        if fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        self.fps = int(fps)
        self.robot_type = robot_type
        self.feature_names = dict(feature_names or {})
        self.extra_info = dict(extra_info or {})
        self.staging = self.root.parent / f".{self.root.name}.tmp-{uuid.uuid4().hex[:8]}"
        self.staging.mkdir(parents=True)
        self.features: dict[str, dict[str, Any]] | None = None
        self.tasks: dict[str, int] = {}
        self.episode_rows: list[dict[str, Any]] = []
        self.episode_stats: list[dict[str, dict[str, np.ndarray]]] = []
        self.total_frames = 0
        self._file = (0, 0)
        self._file_bytes = 0
        self._data_writer: pq.ParquetWriter | None = None

    def __enter__(self) -> LeRobotDatasetWriter:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def add_episode(self, episode: Episode) -> int:
        """Append one episode; returns its episode_index."""
        if self.features is None:
            self.features = features_of(episode, self.feature_names)
        self._check_features(episode)
        episode_index = len(self.episode_rows)
        task_index = self.tasks.setdefault(episode.task, len(self.tasks))
        length = episode.length
        columns = episode.columns()
        frame_index = np.arange(length)
        columns[layout.DONE] = frame_index == length - 1
        columns["timestamp"] = (frame_index / self.fps).astype(np.float32)
        columns["frame_index"] = frame_index
        columns["episode_index"] = np.full(length, episode_index)
        columns["index"] = self.total_frames + frame_index
        columns["task_index"] = np.full(length, task_index)
        table = pa.table({name: self._arrow_column(name, columns[name]) for name in self.features},
                         schema=layout.data_schema(self.features))
        chunk_index, file_index = self._write_data(table)
        self.episode_stats.append({
            name: feature_stats(values, name.startswith(layout.IMAGE_PREFIX))
            for name, values in columns.items() if self.features[name]["dtype"] != "bool"
        })
        row = {
            "episode_index": episode_index,
            "tasks": [episode.task],
            "length": length,
            "data/chunk_index": chunk_index,
            "data/file_index": file_index,
            "dataset_from_index": self.total_frames,
            "dataset_to_index": self.total_frames + length,
            "meta/episodes/chunk_index": 0,
            "meta/episodes/file_index": 0,
        }
        row.update({EPISODE_METADATA_PREFIX + key: value for key, value in episode.metadata.items()})
        for name, stats in self.episode_stats[-1].items():
            row.update({f"stats/{name}/{stat}": value.tolist() for stat, value in stats.items()})
        self.episode_rows.append(row)
        self.total_frames += length
        return episode_index

    def _check_features(self, episode: Episode) -> None:
        found = features_of(episode, self.feature_names)
        for name in sorted(set(found) | set(self.features)):
            expected, got = self.features.get(name), found.get(name)
            if expected is None or got is None or list(expected["shape"]) != list(got["shape"]):
                raise ValueError(
                    f"episode of task {episode.task!r} does not match the dataset's features: {name} expected "
                    f"{expected and expected['shape']}, got {got and got['shape']}"
                )

    def _arrow_column(self, name: str, values: np.ndarray) -> pa.Array:
        spec = self.features[name]
        if spec["dtype"] == "image":
            return pa.array([{"bytes": encode_png(frame), "path": None} for frame in values], layout.IMAGE_STRUCT)
        array_type = layout.arrow_type(spec)
        if pa.types.is_fixed_size_list(array_type):
            flat = pa.array(np.ascontiguousarray(values, dtype=spec["dtype"]).reshape(-1))
            return pa.FixedSizeListArray.from_arrays(flat, array_type.list_size)
        return pa.array(np.asarray(values).reshape(-1).astype(spec["dtype"]), array_type)

    def _write_data(self, table: pa.Table) -> tuple[int, int]:
        """Append to the current data file, starting the next one past LeRobot's file size."""
        if self._data_writer is not None and self._file_bytes >= layout.DATA_FILE_SIZE_MB * 2**20:
            self._data_writer.close()
            self._data_writer = None
            chunk_index, file_index = self._file
            self._file = (chunk_index + 1, 0) if file_index + 1 == layout.CHUNKS_SIZE else (chunk_index, file_index + 1)
            self._file_bytes = 0
        if self._data_writer is None:
            chunk_index, file_index = self._file
            path = self.staging / layout.DATA_PATH.format(chunk_index=chunk_index, file_index=file_index)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._data_writer = pq.ParquetWriter(path, table.schema, compression="snappy")
        self._data_writer.write_table(table)
        self._file_bytes += table.nbytes
        return self._file

    def close(self) -> Path:
        """Write the metadata and rename the finished dataset to ``root``."""
        if self._data_writer is not None:
            self._data_writer.close()
            self._data_writer = None
        if not self.episode_rows:
            self.abort()
            raise ValueError(f"no episodes were added; refusing to write an empty dataset at {self.root}")
        meta = self.staging / "meta"
        (meta / "episodes").mkdir(parents=True, exist_ok=True)
        tasks = sorted(self.tasks, key=self.tasks.__getitem__)
        info = layout.build_info(self.features, self.fps, self.robot_type, len(self.episode_rows),
                                 self.total_frames, len(tasks), self.extra_info)
        (self.staging / layout.INFO_PATH).write_text(json.dumps(info, indent=4) + "\n")
        stats = stats_to_json(aggregate_stats(self.episode_stats))
        (self.staging / layout.STATS_PATH).write_text(json.dumps(stats, indent=4) + "\n")
        pq.write_table(layout.tasks_table(tasks), self.staging / layout.TASKS_PATH)
        episodes_path = self.staging / layout.EPISODES_PATH.format(chunk_index=0, file_index=0)
        episodes_path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(self.episode_rows), episodes_path)
        if self.root.exists():
            self.abort()
            raise FileExistsError(f"dataset {self.root} appeared while writing; datasets are never overwritten")
        self.staging.rename(self.root)
        return self.root

    def abort(self) -> None:
        """Discard everything written so far."""
        if self._data_writer is not None:
            self._data_writer.close()
            self._data_writer = None
        shutil.rmtree(self.staging, ignore_errors=True)
