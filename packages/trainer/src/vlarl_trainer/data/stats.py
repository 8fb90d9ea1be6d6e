"""Feature statistics in LeRobot's shape: per episode exactly, over the dataset by aggregation.

Each feature gets ``min, max, mean, std, count`` and the quantiles ``q01, q10, q50, q90, q99``.
Vectors reduce over frames (shape [n]); images reduce over frames and pixels per channel, scaled
to [0, 1], with shape [3, 1, 1]. Dataset statistics combine the episodes' the way LeRobot does:
exact min, max, mean and std (the parallel variance formula), and count-weighted means of the
episode quantiles, which only approximate the dataset's quantiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from vlarl_trainer.data.layout import QUANTILES

Stats = dict[str, np.ndarray]


def feature_stats(values: np.ndarray, is_image: bool) -> Stats:
    """Statistics of one feature over one episode: vectors [T, n] or images uint8 [T, H, W, 3]."""
    if is_image:
        data = values.reshape(-1, values.shape[-1]).astype(np.float64) / 255.0
    else:
        data = values.reshape(values.shape[0], -1).astype(np.float64)
    stats = {
        "min": data.min(axis=0),
        "max": data.max(axis=0),
        "mean": data.mean(axis=0),
        "std": data.std(axis=0),
        **{name: np.quantile(data, q, axis=0) for name, q in QUANTILES.items()},
    }
    if is_image:
        stats = {name: value.reshape(3, 1, 1) for name, value in stats.items()}
    stats["count"] = np.array([values.shape[0]])
    return stats


def aggregate_stats(per_episode: Sequence[Mapping[str, Stats]]) -> dict[str, Stats]:
    """Dataset statistics from the episodes' (every episode must have the same features)."""
    if not per_episode:
        raise ValueError("cannot aggregate statistics of zero episodes")
    aggregated = {}
    for feature in per_episode[0]:
        parts = [episode[feature] for episode in per_episode]
        counts = np.array([part["count"][0] for part in parts], dtype=np.float64)
        weights = counts / counts.sum()
        means = np.stack([part["mean"] for part in parts])
        weight_shape = (-1,) + (1,) * (means.ndim - 1)
        mean = (means * weights.reshape(weight_shape)).sum(axis=0)
        variances = np.stack([part["std"] ** 2 for part in parts]) + (means - mean) ** 2
        aggregated[feature] = {
            "min": np.stack([part["min"] for part in parts]).min(axis=0),
            "max": np.stack([part["max"] for part in parts]).max(axis=0),
            "mean": mean,
            "std": np.sqrt((variances * weights.reshape(weight_shape)).sum(axis=0)),
            **{name: (np.stack([part[name] for part in parts]) * weights.reshape(weight_shape)).sum(axis=0)
               for name in QUANTILES},
            "count": np.array([int(counts.sum())]),
        }
    return aggregated


def stats_to_json(stats: Mapping[str, Stats]) -> dict[str, dict[str, list]]:
    return {feature: {name: value.tolist() for name, value in values.items()} for feature, values in stats.items()}


def stats_from_json(document: Mapping[str, Mapping[str, list]]) -> dict[str, Stats]:
    return {
        feature: {name: np.asarray(value) for name, value in values.items()} for feature, values in document.items()
    }
