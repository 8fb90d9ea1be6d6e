"""The LeRobot dataset layout, codebase version v3.0, as this package writes and reads it.

v3.0 is what lerobot 0.4.x reads (``lerobot.datasets.lerobot_dataset.CODEBASE_VERSION``)::

    <root>/meta/info.json                               codebase_version, fps, features, path templates
    <root>/meta/stats.json                              per feature: min, max, mean, std, count, q01..q99
    <root>/meta/tasks.parquet                           task strings (pandas index) -> task_index
    <root>/meta/episodes/chunk-000/file-000.parquet     one row per episode: tasks, length, frame range
    <root>/data/chunk-000/file-000.parquet              one row per frame, many episodes per file

Camera frames are ``image`` features: PNG bytes inside the data parquet (the Hugging Face
``datasets.Image`` struct ``{bytes, path}``), so reading them needs neither a video decoder nor
FFmpeg. Env observations and steps map to LeRobot's feature names:

    main_images / wrist_images   observation.images.main / observation.images.wrist   uint8 [H, W, 3]
    states                       observation.state                                   float32 [S]
    privileged_state             observation.environment_state                       float32 [P]
    task_description             the frame's task (meta/tasks.parquet via task_index)
    the action taken             action                                              float32 [A]
    reward, success after it     next.reward, next.success; next.done on an episode's last frame
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

CODEBASE_VERSION = "v3.0"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
EPISODES_DIR = "meta/episodes"
DATA_DIR = "data"
CHUNK_FILE_PATTERN = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = DATA_DIR + "/" + CHUNK_FILE_PATTERN + ".parquet"
EPISODES_PATH = EPISODES_DIR + "/" + CHUNK_FILE_PATTERN + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE_PATTERN + ".mp4"
CHUNKS_SIZE = 1000
"""Files per chunk directory before the next chunk starts (LeRobot's default)."""
DATA_FILE_SIZE_MB = 100
"""A data file is closed once it holds about this much (LeRobot's default)."""
VIDEO_FILE_SIZE_MB = 200

STATE = "observation.state"
ENVIRONMENT_STATE = "observation.environment_state"
ACTION = "action"
IMAGE_PREFIX = "observation.images."
REWARD = "next.reward"
DONE = "next.done"
SUCCESS = "next.success"
INDEX_FEATURES = ("timestamp", "frame_index", "episode_index", "index", "task_index")
"""Columns every LeRobot dataset has, besides the recorded ones."""

QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
IMAGE_STRUCT = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
"""Arrow type of ``datasets.Image``: encoded bytes and an optional file path."""


def camera_feature(camera: str) -> str:
    """``main`` -> ``observation.images.main`` (env key ``main_images``)."""
    return IMAGE_PREFIX + camera


def camera_of(feature: str) -> str:
    """``observation.images.main`` -> ``main``."""
    return feature[len(IMAGE_PREFIX):]


def image_spec(height: int, width: int) -> dict[str, Any]:
    return {"dtype": "image", "shape": [height, width, 3], "names": ["height", "width", "channels"]}


def vector_spec(dtype: str, size: int, names: list[str] | None = None) -> dict[str, Any]:
    return {"dtype": dtype, "shape": [size], "names": names}


def scalar_spec(dtype: str) -> dict[str, Any]:
    return {"dtype": dtype, "shape": [1], "names": None}


def arrow_type(spec: dict[str, Any]) -> pa.DataType:
    """The parquet column type LeRobot's ``datasets`` features expect for a feature spec.

    Scalars (shape [1]) are plain values, vectors fixed-size lists, images the Image struct.
    """
    if spec["dtype"] == "image":
        return IMAGE_STRUCT
    value_type = pa.bool_() if spec["dtype"] == "bool" else pa.from_numpy_dtype(spec["dtype"])
    shape = list(spec["shape"])
    if shape == [1]:
        return value_type
    if len(shape) == 1:
        return pa.list_(value_type, shape[0])
    raise ValueError(f"feature shape {shape} with dtype {spec['dtype']!r} is not supported; expected [1] or [n]")


def data_schema(features: dict[str, dict[str, Any]]) -> pa.Schema:
    return pa.schema([(name, arrow_type(spec)) for name, spec in features.items()])


def build_info(
    features: dict[str, dict[str, Any]],
    fps: int,
    robot_type: str | None,
    total_episodes: int,
    total_frames: int,
    total_tasks: int,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The ``meta/info.json`` document; ``extra`` lands under the ``vlarl`` key (LeRobot ignores it)."""
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": total_episodes,
        "total_frames": total_frames,
        "total_tasks": total_tasks,
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILE_SIZE_MB,
        "video_files_size_in_mb": VIDEO_FILE_SIZE_MB,
        "fps": fps,
        "splits": {"train": f"0:{total_episodes}"},
        "data_path": DATA_PATH,
        "video_path": None,
        "features": features,
        "vlarl": extra,
    }


def tasks_table(tasks: list[str]) -> pa.Table:
    """``meta/tasks.parquet``: the task strings as a pandas index, ``task_index`` as the column.

    LeRobot reads this file with ``pandas.read_parquet`` and looks tasks up by index, so the
    table carries the pandas metadata that turns ``__index_level_0__`` back into the index.
    """
    index_column = "__index_level_0__"
    pandas_metadata = {
        "index_columns": [index_column],
        "column_indexes": [
            {"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
             "metadata": {"encoding": "UTF-8"}},
        ],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
             "metadata": None},
            {"name": None, "field_name": index_column, "pandas_type": "unicode", "numpy_type": "object",
             "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.0",
    }
    table = pa.table(
        {"task_index": pa.array(range(len(tasks)), pa.int64()), index_column: pa.array(tasks, pa.string())}
    )
    return table.replace_schema_metadata({b"pandas": json.dumps(pandas_metadata).encode()})


def read_task_strings(table: pa.Table) -> list[str]:
    """Task strings ordered by ``task_index`` from a tasks table written by us or by LeRobot."""
    if "task_index" not in table.column_names:
        raise ValueError(f"{TASKS_PATH} has no task_index column; its columns are {table.column_names}")
    string_columns = [field.name for field in table.schema if pa.types.is_string(field.type)
                      or pa.types.is_large_string(field.type)]
    if len(string_columns) != 1:
        raise ValueError(
            f"{TASKS_PATH} must hold exactly one string column (the task), got columns {table.column_names}"
        )
    indices = table.column("task_index").to_pylist()
    strings = table.column(string_columns[0]).to_pylist()
    if sorted(indices) != list(range(len(indices))):
        raise ValueError(f"{TASKS_PATH}: task_index must be 0..{len(indices) - 1}, got {sorted(indices)}")
    by_index = dict(zip(indices, strings, strict=True))
    return [by_index[i] for i in range(len(indices))]
