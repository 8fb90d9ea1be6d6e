"""vlarl-sft without a simulator: a tiny pi0 on a synthetic dataset, run directories, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import vlarl_policies
from vlarl_trainer.cli.commands import sft_main as main
from vlarl_trainer.config import load_config
from vlarl_trainer.data import Episode, LeRobotDatasetWriter, load_dataset
from vlarl_trainer.sft.train import (
    build_policy,
    check_dataset_matches_env,
    check_sft_config,
    learning_rate_factor,
    run_sft,
)

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


SETTINGS = ("env.id=vlarl/MetaWorld-reach-v3", "sft.steps=60", "sft.batch_size=8", "sft.lr=2e-3", "sft.warmup_steps=5",
            "sft.log_every=20", "sft.evaluate=false", "runner.torch_threads=1")
"""A short SFT of the default tiny pi0 on the synthetic dataset, collected (its info.json says) on reach-v3."""


def config_for(dataset_root, run_dir, *overrides: str):
    return load_config([*SETTINGS, f"dataset={dataset_root}", f"runner.output_dir={run_dir.parent}",
                        f"runner.name={run_dir.name}", *overrides], need_recipe=False)


def test_training_cuts_the_loss_learns_the_demonstrations_and_writes_the_run_directory(dataset_root, tmp_path):
    torch.manual_seed(0)
    result = run_sft(config_for(dataset_root, tmp_path / "run"))
    assert result.final_loss < 0.85 * result.first_loss
    run_dir = tmp_path / "run"
    saved = (run_dir / "config.yaml").read_text()
    assert "steps: 60" in saved and f"dataset: {dataset_root}" in saved
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [20, 40, 60]
    assert {"sft/loss", "train/actor/grad_norm", "train/actor/lr", "time/steps_per_second"} <= set(lines[0])
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert result.checkpoint == run_dir / "checkpoints" / "step_60"
    policy = vlarl_policies.from_pretrained(result.checkpoint)
    state_mean = load_dataset(dataset_root).stats["observation.state"]["mean"]
    np.testing.assert_allclose(policy.observation_encoder.state_normalizer.offset.numpy(), state_mean, rtol=1e-5)
    assert result.evaluation is None
    assert policy.config.action_chunk == 5  # the env's chunk: the policy RL on env.* would load

    # It learned what the demonstrations do: push left (-0.5) when told left, right (+0.5) when told right.
    # Its central action (the flow from the start noise's mean): after 60 steps the flow from a random
    # start noise still has outliers.
    rng = np.random.default_rng(5)
    told = (TASKS[0],) * 8 + (TASKS[1],) * 8
    actions = policy.eval().act({"main_images": rng.integers(0, 256, (16, 32, 32, 3), dtype=np.uint8),
                                 "states": (rng.normal(size=(16, 3)) * 0.1 + 5.0).astype(np.float32),
                                 "task_description": told}, deterministic=True, zero_start=True,
                                generator=torch.Generator().manual_seed(0)).actions
    assert actions[:8].amax() < -0.2 and actions[8:].amin() > 0.2


def test_a_run_never_reuses_a_directory(dataset_root, tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="never overwrite"):
        run_sft(config_for(dataset_root, tmp_path / "taken", "sft.steps=1", "sft.warmup_steps=0"))


def test_a_checkpoint_that_does_not_fit_the_dataset_is_refused(dataset_root, tmp_path):
    policy = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=3)
    policy.save_pretrained(tmp_path / "four-dim")
    config = config_for(dataset_root, tmp_path / "run", f"policy.pretrained={tmp_path / 'four-dim'}")
    with pytest.raises(ValueError, match="policy expects action_dim=4, state_dim=3; dataset .* has action_dim=2"):
        build_policy(config, load_dataset(dataset_root))
    wrist_only = config_for(dataset_root, tmp_path / "run", "+policy.kwargs.camera_keys=[wrist_images]")
    with pytest.raises(ValueError, match="policy reads camera 'wrist_images'; dataset .* has \\['main_images'\\]"):
        build_policy(wrist_only, load_dataset(dataset_root))


def test_a_dataset_of_another_env_is_refused(dataset_root, tmp_path):
    config = config_for(dataset_root, tmp_path / "run", "env.id=vlarl/MetaWorld-push-v3")
    with pytest.raises(ValueError, match="collected on vlarl/MetaWorld-reach-v3, the recipe's env.id is "
                                         "vlarl/MetaWorld-push-v3: set env.id=vlarl/MetaWorld-reach-v3"):
        check_dataset_matches_env(load_dataset(dataset_root), config)
    with pytest.raises(ValueError, match="collected on"):
        run_sft(config)
    assert not (tmp_path / "run").exists()


def test_learning_rate_warms_up_then_decays_to_the_final_fraction(dataset_root, tmp_path):
    config = config_for(dataset_root, tmp_path / "run", "sft.steps=100", "sft.warmup_steps=10",
                        "sft.final_lr_fraction=0.1").sft
    factors = [learning_rate_factor(step, config) for step in range(101)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert factors[10] == pytest.approx(1.0) and factors[100] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(factors[10:], factors[11:]))


@pytest.mark.parametrize("override, message", [
    ("sft.steps=0", "sft.steps must be positive, got 0"),
    ("sft.lr=0", "sft.lr must be positive, got 0.0"),
    ("sft.warmup_steps=60", r"sft.warmup_steps must lie in \[0, sft.steps=60\), got 60"),
    ("sft.final_lr_fraction=2", r"sft.final_lr_fraction must be in \[0, 1\], got 2.0"),
    ("dataset=null", "set dataset=<dir>"),
])
def test_bad_settings_are_named(dataset_root, tmp_path, override, message):
    with pytest.raises(ValueError, match=message):
        check_sft_config(config_for(dataset_root, tmp_path / "run", override))


def test_command_line_reports_bad_input_and_sweeps_seeds(dataset_root, tmp_path, capsys):
    assert main(["sft.steps=3"]) == 2
    assert "name a recipe" in capsys.readouterr().err
    assert main(["recipe=metaworld_10_ppo_openpi_tiny", f"dataset={tmp_path / 'missing'}"]) == 2
    assert "does not exist" in capsys.readouterr().err
    # Hydra's multirun: one SFT run per seed, each in its own directory, one after another.
    sweep = ["recipe=metaworld_10_ppo_openpi_tiny", *SETTINGS, "sft.steps=2", "sft.warmup_steps=1",
             f"dataset={dataset_root}", f"runner.output_dir={tmp_path / 'sweep'}", "runner.name=seed${runner.seed}"]
    assert main(["-m", *sweep, "runner.seed=0,1"]) == 0
    seed0, seed1, record = sorted((tmp_path / "sweep").iterdir())
    assert (seed0.name, seed1.name) == ("seed0", "seed1") and record.name.startswith("sweep-")
    assert "runner.seed=0,1" in (record / "multirun.yaml").read_text()
    assert "seed: 1" in (tmp_path / "sweep" / "seed1" / "config.yaml").read_text()
