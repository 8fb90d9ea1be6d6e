"""Training on ManiSkill PutOnPlate: the CPU recipe end to end on embedded Ray (single envs in the env
workers), and on a GPU with every env of a worker in one batched simulator."""

import math
from pathlib import Path

import pytest

from vlarl_envs.testing import require_simulator

require_simulator("mani_skill")

from vlarl_trainer.config import load_config
from vlarl_trainer.metrics import read_metrics
from vlarl_trainer.rl.runner import Trainer

SMALL_PUT_ON_PLATE = [
    "recipe=maniskill_ppo_openpi_tiny",
    "env.max_steps=10",
    "env.kwargs={obs_mode: rgb, image_size: 32, horizon: 10, reward_mode: dense}",  # dense: every step updates
    "rollout.rollout_epoch=1",
    "actor.micro_batch_size=2",
    "eval.at_start=false",
    "eval.episodes_per_task=1",
    "eval.splits=[train,vision]",
    "runner.max_steps=1",
    "runner.progress=false",
]

pytestmark = [pytest.mark.usefixtures("embedded_ray"), pytest.mark.xdist_group("ray")]


def train(tmp_path, *overrides) -> dict[int, dict]:
    trainer = Trainer(load_config([*SMALL_PUT_ON_PLATE, f"runner.output_dir={tmp_path}", "runner.name=run",
                                   *overrides]))
    try:
        results = trainer.run()
    finally:
        trainer.close()
    return read_metrics(Path(results["run_dir"]) / "metrics.jsonl")


@pytest.mark.sim
@pytest.mark.slow
def test_the_cpu_recipe_trains_on_put_on_plate_and_scores_its_splits(tmp_path):
    metrics = train(tmp_path, "env.num_envs=2", "actor.global_batch_size=4", "cluster.component_placement={env: 0}")
    for name in ("env/success_once", "train/actor/policy_loss", "train/critic/value_loss", "train/actor/grad_norm"):
        assert math.isfinite(metrics[1][name]), name
    assert {"eval/train/success_once", "eval/vision/success_once", "eval/ood_average/success_once",
            "eval/vision/group_success_once/table"} <= set(metrics[1])
    assert not any(name.startswith("eval/train/group_success_once/") for name in metrics[1])
    assert metrics[1]["eval/ood_average/success_once"] == metrics[1]["eval/vision/success_once"]


@pytest.mark.gpu
def test_on_a_gpu_each_env_worker_simulates_its_envs_in_one_batch(tmp_path):
    """Eight envs on one GPU: ManiSkill's GPU simulation in the env worker's process."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    metrics = train(tmp_path, "env.num_envs=8", "actor.global_batch_size=16", "cluster.component_placement={env: 0}")
    assert math.isfinite(metrics[1]["train/actor/policy_loss"]) and 0 <= metrics[1]["env/success_once"] <= 1
    assert "eval/ood_average/success_once" in metrics[1]
