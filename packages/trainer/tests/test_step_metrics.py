"""Per-step training metrics computed from the rollouts, without Ray or a simulator."""

import numpy as np
import pytest

from vlarl_trainer.rl.training_episodes import success_per_task
from vlarl_trainer.rl.workers.actor_worker import train_metric_name


def test_success_per_task_splits_the_mean_by_task():
    epochs = [
        {"tasks": ["reach-v3", "push-v3", "reach-v3"], "success_once": np.array([True, False, False])},
        {"tasks": ["push-v3", "push-v3", "reach-v3"], "success_once": np.array([True, True, False])},
    ]
    assert success_per_task(epochs) == {
        "env/success_once/push-v3": pytest.approx(2 / 3),
        "env/success_once/reach-v3": pytest.approx(1 / 3),
    }
    assert success_per_task([{"tasks": ["reach-v3"] * 2, "success_once": np.array([True, False])}]) == {
        "env/success_once/reach-v3": 0.5}


def test_actor_metrics_take_rlinf_names():
    assert train_metric_name("loss") == "train/loss"
    assert train_metric_name("clipped_ratio") == "train/actor/clipped_ratio"
    assert train_metric_name("clip_fraction") == "train/actor/clip_fraction"
    assert train_metric_name("value_clip_ratio") == "train/critic/value_clip_ratio"
