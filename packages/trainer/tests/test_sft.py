"""vlarl-sft without a simulator: a tiny pi0 on a synthetic dataset, run directories, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import vlarl_policies
from vlarl_trainer.data import Episode, LeRobotDatasetWriter, load_dataset
from vlarl_trainer.sft.train import (
    build_policy,
    evaluation_target,
    learning_rate_factor,
    main,
    parse_override,
    run_sft,
)
from vlarl_trainer.sft.config import SFTConfig

TASKS = ("push the block left", "push the block right")


def synthetic_dataset(root, action_dim: int = 2, episodes: int = 4, length: int = 12):
    """Episodes whose actions follow the instruction: -0.5 for "left", +0.5 for "right"."""
    rng = np.random.default_rng(0)
    with LeRobotDatasetWriter(root, fps=10, extra_info={"env_id": "vlarl/MetaWorld-reach-v3",
                                                        "tasks": ["reach-v3"], "image_size": 32}) as writer:
        for index in range(episodes):
            task = TASKS[index % 2]
            direction = -0.5 if "left" in task else 0.5
            writer.add_episode(Episode(
                task=task,
                images={"main": rng.integers(0, 256, (length, 32, 32, 3), dtype=np.uint8)},
                states=(rng.normal(size=(length, 3)) * 0.1 + 5.0).astype(np.float32),
                actions=np.full((length, action_dim), direction, dtype=np.float32),
                rewards=np.zeros(length, dtype=np.float32),
                successes=np.zeros(length, dtype=bool),
            ))
    return root


@pytest.fixture
def dataset_root(tmp_path):
    return synthetic_dataset(tmp_path / "demos")


def config_for(dataset_root, run_dir, **changes) -> SFTConfig:
    settings = {"steps": 60, "batch_size": 8, "lr": 2e-3, "warmup_steps": 5, "log_every": 20, "threads": 1,
                "eval_episodes": 0, **changes}
    return SFTConfig(dataset=str(dataset_root), run_dir=str(run_dir), **settings)


def test_training_cuts_the_loss_and_writes_the_run_directory(dataset_root, tmp_path):
    torch.manual_seed(0)
    result = run_sft(config_for(dataset_root, tmp_path / "run"))
    assert result.final_loss < 0.85 * result.first_loss
    run_dir = tmp_path / "run"
    assert json.loads((run_dir / "config.json").read_text())["steps"] == 60
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [20, 40, 60]
    assert {"sft/loss", "train/actor/grad_norm", "train/actor/lr", "time/steps_per_second"} <= set(lines[0])
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert result.checkpoint == run_dir / "checkpoints" / "step_60"
    policy = vlarl_policies.from_pretrained(result.checkpoint)
    state_mean = load_dataset(dataset_root).stats["observation.state"]["mean"]
    np.testing.assert_allclose(policy.observation_encoder.state_normalizer.offset.numpy(), state_mean, rtol=1e-5)
    assert result.success is None


def test_a_run_never_reuses_a_directory(dataset_root, tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="never overwrite"):
        run_sft(config_for(dataset_root, tmp_path / "taken", steps=1))


def test_a_checkpoint_that_does_not_fit_the_dataset_is_refused(dataset_root, tmp_path):
    policy = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=3)
    policy.save_pretrained(tmp_path / "four-dim")
    config = config_for(dataset_root, tmp_path / "run", checkpoint=str(tmp_path / "four-dim"))
    with pytest.raises(ValueError, match="policy expects action_dim=4, state_dim=3; dataset .* has action_dim=2"):
        build_policy(config, load_dataset(dataset_root))
    wrist_only = config_for(dataset_root, tmp_path / "run", policy_overrides={"camera_keys": ["wrist_images"]})
    with pytest.raises(ValueError, match="policy reads camera 'wrist_images'; dataset .* has \\['main_images'\\]"):
        build_policy(wrist_only, load_dataset(dataset_root))


def test_evaluation_target_comes_from_the_dataset_unless_given():
    info = {"vlarl": {"env_id": "vlarl/MetaWorld-MT10-v3", "tasks": ["reach-v3", "push-v3"], "image_size": 64,
                      "horizon": 100}}
    assert evaluation_target(info, None, None, None) == ("vlarl/MetaWorld-MT10-v3", ["reach-v3", "push-v3"], 64, 100)
    assert evaluation_target(info, None, ["push-v3"], 96, 150) == ("vlarl/MetaWorld-MT10-v3", ["push-v3"], 96, 150)
    del info["vlarl"]["horizon"]  # datasets written before the collector recorded it: the env's default
    assert evaluation_target(info, None, None, None)[3] is None
    with pytest.raises(ValueError, match="evaluation needs an env id"):
        evaluation_target({"features": {}}, None, None, None)


def test_learning_rate_warms_up_then_decays_to_the_final_fraction(dataset_root):
    config = SFTConfig(dataset=str(dataset_root), steps=100, warmup_steps=10, final_lr_fraction=0.1)
    factors = [learning_rate_factor(step, config) for step in range(101)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert factors[10] == pytest.approx(1.0) and factors[100] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(factors[10:], factors[11:]))


def test_config_and_command_line_reject_bad_values(dataset_root, tmp_path):
    with pytest.raises(ValueError, match="steps must be positive, got 0"):
        SFTConfig(dataset="d", steps=0)
    assert parse_override("action_chunk=4") == ("action_chunk", 4)
    assert parse_override("noise_method=flow_noise") == ("noise_method", "flow_noise")
    with pytest.raises(SystemExit):
        main(["--steps", "3"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        main(["--dataset", str(tmp_path / "missing"), "--eval-episodes", "0"])
