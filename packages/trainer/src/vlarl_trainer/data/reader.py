"""Reading a LeRobot v3.0 dataset into memory, as arrays named after the env contract.

Reads what ``LeRobotDatasetWriter`` writes and LeRobot v3.0 datasets with ``image`` camera
features; ``video`` features are refused with a clear error (decoding them needs torchcodec or
PyAV, which this package does not depend on). Everything is decoded up front: a few thousand
64-px frames take a few tens of MB, and SFT then samples batches without any I/O.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from vlarl_trainer.data import layout
from vlarl_trainer.data.stats import Stats, stats_from_json
from vlarl_trainer.data.writer import EPISODE_METADATA_PREFIX


@dataclass
class EpisodeRecord:
    """One row of ``meta/episodes``: its frames are ``[start, stop)`` of the dataset's arrays."""

    index: int
    tasks: list[str]
    start: int
    stop: int
    metadata: dict[str, Any]

    @property
    def length(self) -> int:
        return self.stop - self.start


@dataclass
class DemonstrationDataset:
    """A whole dataset in memory; frame arrays share their first axis N (frames in index order).

    images:             camera ("main") -> uint8 [N, H, W, 3]
    states:             float32 [N, S]
    actions:            float32 [N, A]
    environment_states: float32 [N, P] or None
    episode_index, frame_index, task_index: int64 [N]
    successes, dones:   bool [N] or None where the dataset lacks next.success / next.done
    tasks:              task strings by task_index
    episodes:           the episode records, by episode_index
    stats:              meta/stats.json, feature -> {min, max, mean, std, count, q01, ...}
    info:               meta/info.json
    """

    root: Path
    info: dict[str, Any]
    tasks: list[str]
    episodes: list[EpisodeRecord]
    images: dict[str, np.ndarray]
    states: np.ndarray
    actions: np.ndarray
    environment_states: np.ndarray | None
    episode_index: np.ndarray
    frame_index: np.ndarray
    task_index: np.ndarray
    successes: np.ndarray | None
    dones: np.ndarray | None
    stats: dict[str, Stats]

    @property
    def num_frames(self) -> int:
        return int(self.actions.shape[0])

    @property
    def num_episodes(self) -> int:
        return len(self.episodes)

    @property
    def fps(self) -> int:
        return int(self.info["fps"])

    @property
    def state_dim(self) -> int:
        return int(self.states.shape[1])

    @property
    def action_dim(self) -> int:
        return int(self.actions.shape[1])

    @property
    def image_shape(self) -> tuple[int, int]:
        """(H, W) of the first camera."""
        first = next(iter(self.images.values()))
        return int(first.shape[1]), int(first.shape[2])

    def task_descriptions(self, frames: np.ndarray) -> list[str]:
        return [self.tasks[i] for i in self.task_index[frames]]


def read_json(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: not a LeRobot {layout.CODEBASE_VERSION} dataset")
    return json.loads(path.read_text())


def decode_images(column: pa.ChunkedArray, name: str, root: Path) -> np.ndarray:
    """``datasets.Image`` structs (embedded bytes, else a path relative to the dataset) -> uint8 [N, H, W, 3]."""
    frames = []
    for item in column.to_pylist():
        if item is None or (item.get("bytes") is None and item.get("path") is None):
            raise ValueError(f"{name}: a frame has neither image bytes nor a path")
        source = io.BytesIO(item["bytes"]) if item.get("bytes") is not None else root / item["path"]
        with Image.open(source) as image:
            frames.append(np.asarray(image.convert("RGB")))
    return np.stack(frames)


def vector_column(table: pa.Table, name: str, spec: dict[str, Any]) -> np.ndarray:
    """A vector feature as [N, n] (or a scalar one as [N]) of the dtype info.json declares."""
    column = table.column(name).combine_chunks()
    shape = list(spec["shape"])
    if shape == [1]:
        return column.to_numpy(zero_copy_only=False).astype(spec["dtype"])
    values = column.flatten().to_numpy(zero_copy_only=False).astype(spec["dtype"])
    if values.size != len(column) * shape[0]:
        raise ValueError(f"{name}: info.json declares shape {shape}, but the rows hold {values.size} values "
                         f"for {len(column)} frames")
    return values.reshape(len(column), shape[0])


def read_episodes(root: Path) -> list[EpisodeRecord]:
    paths = sorted((root / layout.EPISODES_DIR).glob("*/*.parquet"))
    if not paths:
        raise FileNotFoundError(f"{root / layout.EPISODES_DIR} holds no parquet file: not a LeRobot "
                                f"{layout.CODEBASE_VERSION} dataset")
    rows = pa.concat_tables([pq.read_table(path) for path in paths]).to_pylist()
    records = [
        EpisodeRecord(
            index=int(row["episode_index"]),
            tasks=list(row["tasks"]),
            start=int(row["dataset_from_index"]),
            stop=int(row["dataset_to_index"]),
            metadata={key[len(EPISODE_METADATA_PREFIX):]: value for key, value in row.items()
                      if key.startswith(EPISODE_METADATA_PREFIX)},
        )
        for row in rows
    ]
    return sorted(records, key=lambda record: record.index)


def load_dataset(root: str | Path) -> DemonstrationDataset:
    """Read a LeRobot v3.0 dataset directory; anything malformed raises naming what was expected."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"dataset directory {root} does not exist")
    info = read_json(root / layout.INFO_PATH)
    version = info.get("codebase_version")
    if version != layout.CODEBASE_VERSION:
        raise ValueError(f"{root}: codebase_version {version!r} is not supported; expected {layout.CODEBASE_VERSION!r}")
    features: dict[str, dict[str, Any]] = info["features"]
    videos = [name for name, spec in features.items() if spec["dtype"] == "video"]
    if videos:
        raise ValueError(f"{root}: video features {videos} are not supported; expected camera features with "
                         "dtype 'image' (PNG in the parquet files)")
    for required in (layout.STATE, layout.ACTION, "episode_index", "frame_index", "index", "task_index"):
        if required not in features:
            raise ValueError(f"{root}: info.json features lack {required!r}; they are {sorted(features)}")
    cameras = [name for name in features if name.startswith(layout.IMAGE_PREFIX)]
    if not cameras:
        raise ValueError(f"{root}: no camera feature ({layout.IMAGE_PREFIX}<name>) in {sorted(features)}")
    data_paths = sorted((root / layout.DATA_DIR).glob("*/*.parquet"))
    if not data_paths:
        raise FileNotFoundError(f"{root / layout.DATA_DIR} holds no parquet file")
    table = pa.concat_tables([pq.read_table(path) for path in data_paths])
    missing = sorted(set(features) - set(table.column_names))
    if missing:
        raise ValueError(f"{root}: data files lack the columns {missing} that info.json declares")
    table = table.sort_by("index")

    def optional(name: str) -> np.ndarray | None:
        return vector_column(table, name, features[name]) if name in features else None

    dataset = DemonstrationDataset(
        root=root,
        info=info,
        tasks=layout.read_task_strings(pq.read_table(root / layout.TASKS_PATH)),
        episodes=read_episodes(root),
        images={layout.camera_of(name): decode_images(table.column(name), name, root) for name in cameras},
        states=vector_column(table, layout.STATE, features[layout.STATE]).astype(np.float32),
        actions=vector_column(table, layout.ACTION, features[layout.ACTION]).astype(np.float32),
        environment_states=optional(layout.ENVIRONMENT_STATE),
        episode_index=vector_column(table, "episode_index", features["episode_index"]),
        frame_index=vector_column(table, "frame_index", features["frame_index"]),
        task_index=vector_column(table, "task_index", features["task_index"]),
        successes=optional(layout.SUCCESS),
        dones=optional(layout.DONE),
        stats=stats_from_json(read_json(root / layout.STATS_PATH)) if (root / layout.STATS_PATH).is_file() else {},
    )
    check_consistency(dataset)
    return dataset


def check_consistency(dataset: DemonstrationDataset) -> None:
    """Frame counts, episode ranges and task indices must agree between meta/ and data/."""
    root, info = dataset.root, dataset.info
    if dataset.num_frames != info["total_frames"] or dataset.num_episodes != info["total_episodes"]:
        raise ValueError(f"{root}: info.json declares {info['total_episodes']} episodes and {info['total_frames']} "
                         f"frames, found {dataset.num_episodes} episodes and {dataset.num_frames} frames")
    for record in dataset.episodes:
        frames = dataset.episode_index[record.start:record.stop]
        if record.length <= 0 or frames.size != record.length or not (frames == record.index).all():
            raise ValueError(f"{root}: episode {record.index} claims frames [{record.start}, {record.stop}) "
                             "but the data files disagree")
    if dataset.task_index.size and (dataset.task_index.min() < 0 or dataset.task_index.max() >= len(dataset.tasks)):
        raise ValueError(f"{root}: task_index outside 0..{len(dataset.tasks) - 1}")
