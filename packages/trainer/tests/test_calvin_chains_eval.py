"""vlarl-eval's CALVIN chains: a tiny random pi0 plays the first chains on CALVIN-D in the evaluating process.

A random policy almost never completes a task, so one test plays against CALVIN's own oracle and checks
the report's shape and consistency, and another gives the oracle a script (success exactly for the tasks
it names) to check that a chain goes on while its tasks succeed and that the summary counts it right.
"""

from __future__ import annotations

import json

import pytest
import torch

import vlarl_policies
from vlarl_trainer.cli.commands import eval_main
from vlarl_trainer.config import load_config, to_yaml
from vlarl_trainer.rl.evaluation import check_calvin_chains, evaluate_checkpoint, report_json

IMAGE_SIZE = 32
"""Both cameras at 32 px: a task's 360 steps take about 20 s on one loaded core."""
CHAIN_METRICS = [f"eval/chains/success_{k}" for k in range(1, 6)] + ["eval/chains/average_length"]


def chain_settings(chains: int) -> list[str]:
    """CALVIN-D with the tiny policy's chunk of 4, chains only (no single-task episodes, so no workers)."""
    return ["env.id=vlarl/CALVIN-D-v0", f"env.kwargs={{obs_mode: rgb, image_size: {IMAGE_SIZE}}}",
            "env.action_chunk=4", "env.num_envs=1", "env.max_steps=8", "eval.episodes_per_task=0",
            f"eval.calvin_chains={chains}", "runner.progress=false"]


@pytest.fixture(scope="module")
def calvin_run(tmp_path_factory):
    """A run directory as a CALVIN-D training leaves it (config.yaml, one checkpoint), holding a random tiny
    pi0 for CALVIN's 7-D actions and 15-D robot state that reads both cameras."""
    run = tmp_path_factory.mktemp("calvin_run")
    (run / "config.yaml").write_text(to_yaml(load_config(chain_settings(0), need_recipe=False)))
    checkpoint = run / "checkpoints" / "step_1"
    vlarl_policies.make("pi0", preset="tiny", action_dim=7, state_dim=15, image_size=IMAGE_SIZE,
                        camera_keys=("main_images", "wrist_images"), max_token_len=32).save_pretrained(checkpoint / "policy")
    (checkpoint / "trainer_state.json").write_text('{"step": 1}')
    return run


@pytest.mark.sim
@pytest.mark.slow
def test_vlarl_eval_scores_a_chain_with_calvins_oracle(calvin_run, capsys):
    from vlarl_envs.testing import require_simulator

    require_simulator("calvin_env")
    assert eval_main([f"eval.checkpoint={calvin_run}", "eval.calvin_chains=1"]) == 0
    printed = capsys.readouterr().out
    assert "CALVIN chains (1): 1/5: " in printed and "|| average length " in printed
    metrics = json.loads(printed[printed.index("{\n"):])
    assert "eval/success_once" not in metrics and "time/eval" in metrics
    rates = [metrics[name] for name in CHAIN_METRICS[:-1]]
    assert all(0.0 <= rate <= 1.0 for rate in rates) and rates == sorted(rates, reverse=True)
    average_length = metrics["eval/chains/average_length"]
    assert average_length in range(6)
    assert rates == [float(average_length >= k) for k in range(1, 6)]


@pytest.mark.sim
@pytest.mark.slow
def test_a_chain_goes_on_while_its_tasks_succeed(calvin_run, monkeypatch):
    from vlarl_envs.testing import require_simulator

    require_simulator("calvin_env")
    import vlarl_envs.calvin.env as calvin_env_module
    from vlarl_envs.calvin.chains import evaluation_chains

    first, second = evaluation_chains(2)
    succeeding = set(first.tasks) | set(second.tasks[:2])
    expected_second = next(index for index, task in enumerate(second.tasks) if task not in succeeding)
    monkeypatch.setattr(calvin_env_module, "task_done", lambda task, start_info, info: task in succeeding)

    config = load_config(chain_settings(2), need_recipe=False)
    report = evaluate_checkpoint(config, calvin_run / "checkpoints" / "step_1" / "policy")

    lengths = report["chains"]["lengths"]
    assert lengths == [5, expected_second]
    metrics = report["metrics"]
    assert set(CHAIN_METRICS) <= set(metrics)
    for k in range(1, 6):
        assert metrics[f"eval/chains/success_{k}"] == sum(length >= k for length in lengths) / 2
        assert 0.0 <= metrics[f"eval/chains/success_{k}"] <= 1.0
    assert metrics["eval/chains/average_length"] == sum(lengths) / 2
    assert 0.0 <= metrics["eval/chains/average_length"] <= 5.0
    assert report_json(report)["chains"]["lengths"] == lengths


@pytest.mark.sim
@pytest.mark.slow
def test_chains_play_every_task_when_the_env_holds_a_subset(calvin_run, monkeypatch):
    """A run trained on a few tasks (env.kwargs.tasks) still plays CALVIN's chains, whose tasks are all 34."""
    from vlarl_envs.testing import require_simulator

    require_simulator("calvin_env")
    import vlarl_envs.calvin.env as calvin_env_module

    monkeypatch.setattr(calvin_env_module, "task_done", lambda task, start_info, info: True)
    settings = [setting for setting in chain_settings(1) if not setting.startswith("env.kwargs=")]
    config = load_config([*settings, f"env.kwargs={{obs_mode: rgb, image_size: {IMAGE_SIZE}, tasks: [open_drawer]}}"],
                         need_recipe=False)
    report = evaluate_checkpoint(config, calvin_run / "checkpoints" / "step_1" / "policy")
    assert report["chains"]["lengths"] == [5]


def test_chains_need_a_calvin_evaluation_env(tmp_path, capsys):
    metaworld = load_config(["recipe=metaworld_10_ppo_openpi_tiny", "eval.calvin_chains=5"])
    with pytest.raises(ValueError, match="plays CALVIN's evaluation chains, but the evaluation env is "
                                         "vlarl/MetaWorld-MT10-v3"):
        check_calvin_chains(metaworld)
    trained_on_calvin = load_config(["env.id=vlarl/CALVIN-ABC-v0", "eval.env_id=vlarl/MetaWorld-MT10-v3",
                                     "eval.calvin_chains=5"], need_recipe=False)
    with pytest.raises(ValueError, match="evaluation env is vlarl/MetaWorld-MT10-v3"):
        check_calvin_chains(trained_on_calvin)
    with pytest.raises(ValueError, match=r"eval.calvin_chains must lie in 0..1000"):
        check_calvin_chains(load_config(["env.id=vlarl/CALVIN-D-v0", "eval.calvin_chains=1001"], need_recipe=False))
    check_calvin_chains(load_config(["env.id=vlarl/CALVIN-ABC-v0", "eval.env_id=vlarl/CALVIN-D-v0",
                                     "eval.calvin_chains=50"], need_recipe=False))

    policy = tmp_path / "policy"
    policy.mkdir()
    (policy / "config.json").write_text("{}")
    assert eval_main([f"eval.checkpoint={policy}", "recipe=metaworld_10_ppo_openpi_tiny", "eval.calvin_chains=5"]) == 2
    assert "score them on vlarl/CALVIN-D-v0" in capsys.readouterr().err


@pytest.mark.sim
@pytest.mark.slow
def test_the_trainers_evaluations_play_the_chains_with_the_actors_policy(tmp_path, monkeypatch):
    """Before RL and after its one step the trainer scores the chains too, in the driver, with the policy the
    actor holds; CALVIN's oracle answers success for every task there, so each chain runs to its end."""
    from vlarl_envs.testing import require_simulator

    require_simulator("calvin_env")
    import vlarl_envs.calvin.env as calvin_env_module
    from vlarl_trainer.metrics import read_metrics
    from vlarl_trainer.rl.runner import Trainer

    monkeypatch.setattr(calvin_env_module, "task_done", lambda task, start_info, info: True)
    config = load_config([*chain_settings(2), "env.num_envs=2", "eval.episodes_per_task=1", "eval.at_start=true",
                          "rollout.rollout_epoch=1", "rollout.pipeline_stage_num=1", "actor.global_batch_size=4",
                          "actor.micro_batch_size=2", "runner.max_steps=1", f"runner.output_dir={tmp_path}",
                          "runner.name=run", "policy.kwargs={image_size: 32, camera_keys: [main_images, wrist_images], "
                          "max_token_len: 32}"], need_recipe=False)
    trainer = Trainer(config)
    try:
        trainer.run()
        played, weights = trainer._policy_of_step().state_dict(), trainer.actor_weights()
    finally:
        trainer.close()
    metrics = read_metrics(trainer.run_dir / "metrics.jsonl")
    for step in (0, 1):
        assert metrics[step]["eval/chains/average_length"] == 5.0 and metrics[step]["eval/chains/success_5"] == 1.0
        assert "eval/success_once" in metrics[step]
    initial = vlarl_policies.from_pretrained(trainer.run_dir / "initial_policy").state_dict()
    assert all(torch.equal(played[name], tensor) for name, tensor in weights.items())
    assert any(not torch.equal(weights[name], tensor) for name, tensor in initial.items()), "the step moved nothing"
