"""What vlarl-eval's eval.checkpoint names: a run directory, a checkpoint or a saved policy."""

import pytest

from vlarl_trainer.cli.commands import eval_main
from vlarl_trainer.rl.evaluation import resolve_policy


def checkpoint(run, step):
    folder = run / "checkpoints" / f"step_{step}"
    (folder / "policy").mkdir(parents=True)
    (folder / "policy" / "config.json").write_text("{}")
    (folder / "trainer_state.json").write_text(f'{{"step": {step}}}')
    return folder


def test_a_run_directory_means_its_latest_checkpoint(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("recipe: x\n")
    checkpoint(run, 5)
    latest = checkpoint(run, 10)
    (run / "checkpoints" / ".step_15.partial").mkdir()
    assert resolve_policy(run) == (latest / "policy", run)
    assert resolve_policy(latest) == (latest / "policy", run)
    assert resolve_policy(latest / "policy") == (latest / "policy", None)


def test_an_sft_checkpoint_belongs_to_its_run(tmp_path):
    policy = tmp_path / "sft" / "checkpoints" / "step_1200"
    policy.mkdir(parents=True)
    (policy / "config.json").write_text("{}")
    assert resolve_policy(policy) == (policy, None)
    (tmp_path / "sft" / "config.yaml").write_text("recipe: x\n")
    assert resolve_policy(policy) == (policy, tmp_path / "sft")


def test_anything_else_is_named(tmp_path, capsys):
    with pytest.raises(ValueError, match="expected a run directory, a checkpoint"):
        resolve_policy(tmp_path)
    assert eval_main([]) == 2
    assert "name the policy to score: eval.checkpoint=" in capsys.readouterr().err
    lone = tmp_path / "policy"
    lone.mkdir()
    (lone / "config.json").write_text("{}")
    assert eval_main([f"eval.checkpoint={lone}"]) == 2
    assert "belongs to no run directory with a config.yaml: name the recipe" in capsys.readouterr().err
