"""vlarl-eval's CALVIN chains: a tiny random pi0 plays the first chains on CALVIN-D on the env workers.

A random policy almost never completes a task, so one test plays against CALVIN's own oracle and checks
the report's shape and consistency, and others give the oracle a script in every worker process (success
exactly for the tasks it names) to check that a chain goes on while its tasks succeed and that the
summary counts it right.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import vlarl_policies
from vlarl_trainer.cli.commands import eval_main
from vlarl_trainer.config import load_config, to_yaml
from vlarl_trainer.rl import evaluation
from vlarl_trainer.rl.eval_env import check_calvin_chains
from vlarl_trainer.rl.evaluation import (
    evaluate_checkpoint,
    play_calvin_chains,
    report_json,
    spread_over_shards,
)
from vlarl_trainer.rl.rollout import Shards

pytestmark = pytest.mark.xdist_group("ray")

IMAGE_SIZE = 32
"""Both cameras at 32 px: a task's 360 steps take about 20 s on one loaded core."""
CHAIN_METRICS = [f"eval/chains/success_{k}" for k in range(1, 6)] + ["eval/chains/average_length"]


def chain_settings(chains: int) -> list[str]:
    """CALVIN-D with the tiny policy's chunk of 4, chains only (no single-task episodes)."""
    return ["env.id=vlarl/CALVIN-D-v0", f"env.kwargs={{obs_mode: rgb, image_size: {IMAGE_SIZE}}}",
            "env.action_chunk=4", "env.num_envs=1", "env.max_steps=8", "eval.episodes_per_task=0",
            f"eval.calvin_chains={chains}", "runner.progress=false"]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, ray_for_the_session):
    """A Ray whose worker processes judge CALVIN's tasks by the script file this yields while it exists (a
    JSON list of the tasks that succeed at once, or null for every task; the others never succeed), and by
    CALVIN's own oracle while it does not. Written by ``scripted``."""
    import cloudpickle
    import ray

    script = tmp_path_factory.mktemp("oracle") / "succeeding.json"

    def script_the_oracle():
        import vlarl_envs.calvin.env as calvin_env_module

        calvins_own = calvin_env_module.task_done

        def task_done(task, start_info, info):
            if not script.exists():
                return calvins_own(task, start_info, info)
            succeeding = json.loads(script.read_text())
            return succeeding is None or task in succeeding

        calvin_env_module.task_done = task_done

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the hook travels whole, not by module name
    ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False,
             runtime_env={"worker_process_setup_hook": script_the_oracle})
    yield script
    ray.shutdown()


@contextlib.contextmanager
def scripted(script: Path, succeeding: set[str] | None):
    """The oracle's script while the block runs: success at once for the tasks in ``succeeding`` (every
    task for None), never for the others."""
    script.write_text(json.dumps(None if succeeding is None else sorted(succeeding)))
    try:
        yield
    finally:
        script.unlink()


@pytest.fixture(scope="module")
def calvin_run(tmp_path_factory):
    """A run directory as a CALVIN-D training leaves it (config.yaml, one checkpoint), holding a random tiny
    pi0 for CALVIN's 7-D actions and 15-D robot state that reads both cameras."""
    run = tmp_path_factory.mktemp("calvin_run")
    (run / "config.yaml").write_text(to_yaml(load_config(chain_settings(0), need_recipe=False)))
    checkpoint = run / "checkpoints" / "step_1"
    policy = vlarl_policies.make("pi0", preset="tiny", action_dim=7, state_dim=15, image_size=IMAGE_SIZE,
                                 camera_keys=("main_images", "wrist_images"), max_token_len=32)
    policy.save_pretrained(checkpoint / "policy")
    (checkpoint / "trainer_state.json").write_text('{"step": 1}')
    return run


@pytest.mark.sim
@pytest.mark.slow
def test_vlarl_eval_scores_a_chain_with_calvins_oracle(calvin_run, oracle, capsys):
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
def test_a_chain_goes_on_while_its_tasks_succeed(calvin_run, oracle):
    """Two chains on three envs (one sits the round out): the first succeeds throughout, the second up to
    its first task outside the script."""
    from vlarl_envs.testing import require_simulator

    require_simulator("calvin_env")
    from vlarl_envs.calvin.chains import evaluation_chains

    first, second = evaluation_chains(2)
    succeeding = set(first.tasks) | set(second.tasks[:2])
    expected_second = next(index for index, task in enumerate(second.tasks) if task not in succeeding)

    config = load_config([*chain_settings(2), "env.num_envs=3"], need_recipe=False)
    with scripted(oracle, succeeding):
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
    scored = report_json(report, config.eval.sampling)
    assert scored["chains"]["lengths"] == lengths and scored["sampling"] == "deterministic"


@pytest.mark.sim
@pytest.mark.slow
def test_chains_play_every_task_when_the_env_holds_a_subset(calvin_run, oracle):
    """A run trained on a few tasks (env.kwargs.tasks) still plays CALVIN's chains, whose tasks are all 34."""
    from vlarl_envs.testing import require_simulator

    require_simulator("calvin_env")
    settings = [setting for setting in chain_settings(1) if not setting.startswith("env.kwargs=")]
    config = load_config([*settings, f"env.kwargs={{obs_mode: rgb, image_size: {IMAGE_SIZE}, tasks: [open_drawer]}}"],
                         need_recipe=False)
    with scripted(oracle, None):
        report = evaluate_checkpoint(config, calvin_run / "checkpoints" / "step_1" / "policy")
    assert report["chains"]["lengths"] == [5]


def test_chains_play_in_rounds_of_the_envs_and_score_their_returns(monkeypatch):
    """Five chains on two shards of two envs: two rounds, the second with three envs idle; every chain gets
    the chunk steps of five full tasks and stops once all have ended; a chain's return is its length."""
    calls = []

    def play(shards, options, chunk_steps, sampling, **kwargs):
        calls.append((options, chunk_steps, dict(kwargs, sampling=sampling)))
        return {"return": np.array([0.0 if idle else float(option["chain"] % 6)
                                    for option, idle in zip(options, kwargs["idle"])])}

    monkeypatch.setattr(evaluation, "run_episodes", play)
    config = load_config([*chain_settings(5), "env.action_chunk=5"], need_recipe=False)
    report = play_calvin_chains(config, Shards(env=[None, None], rollout=None, stage_num=1, envs_per_stage=2))
    assert report["lengths"] == [0, 1, 2, 3, 4]
    assert report["metrics"]["eval/chains/average_length"] == 2.0 and report["summary"]["success_4"] == 0.2
    # two shards of two envs: a round's chains alternate between them (global envs 0, 2, 1, 3)
    assert [[option["chain"] for option in options] for options, _, _ in calls] == [[0, 2, 1, 3], [4, 4, 4, 4]]
    assert [kwargs["idle"] for _, _, kwargs in calls] == [[False] * 4, [False, True, True, True]]
    assert all(steps == 5 * 72 and kwargs["stop_when_done"] and kwargs["sampling"] == "deterministic"
               for _, steps, kwargs in calls)


def test_chains_need_a_calvin_evaluation_env(tmp_path, capsys):
    metaworld = load_config(["recipe=metaworld_10_ppo_openpi_tiny", "eval.calvin_chains=5"])
    with pytest.raises(ValueError, match="plays CALVIN's evaluation chains, but the evaluation env is "
                                         "vlarl/MetaWorld-MT10-v3"):
        check_calvin_chains(metaworld)
    trained_on_calvin = load_config(["env.id=vlarl/CALVIN-ABC-v0", "eval.env_id=vlarl/MetaWorld-MT10-v3",
                                     "eval.calvin_chains=5"], need_recipe=False)
    with pytest.raises(ValueError, match="evaluation env is vlarl/MetaWorld-MT10-v3"):
        check_calvin_chains(trained_on_calvin)
    with pytest.raises(ValueError, match=r"reads a chain's length from its return.*has 'dense'"):
        check_calvin_chains(load_config(["env.id=vlarl/CALVIN-D-v0", "eval.calvin_chains=5",
                                         "eval.env_kwargs={reward_mode: raw}"], need_recipe=False))
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
def test_the_trainers_evaluations_play_the_chains(tmp_path, oracle):
    """Before RL and after its one step the trainer scores the chains too, on its evaluation workers; the
    scripted oracle answers success for every task there, so each chain runs to its end."""
    from vlarl_envs.testing import require_simulator

    require_simulator("calvin_env")
    from vlarl_trainer.metrics import read_metrics
    from vlarl_trainer.rl.runner import Trainer

    config = load_config([*chain_settings(2), "env.num_envs=2", "eval.episodes_per_task=1", "eval.at_start=true",
                          "rollout.rollout_epoch=1", "rollout.pipeline_stage_num=1", "actor.global_batch_size=4",
                          "actor.micro_batch_size=2", "runner.max_steps=1", f"runner.output_dir={tmp_path}",
                          "runner.name=run", "policy.kwargs={image_size: 32, camera_keys: [main_images, wrist_images], "
                          "max_token_len: 32}"], need_recipe=False)
    with scripted(oracle, None):
        trainer = Trainer(config)
        try:
            trainer.run()
        finally:
            trainer.close()
    metrics = read_metrics(trainer.run_dir / "metrics.jsonl")
    for step in (0, 1):
        assert metrics[step]["eval/chains/average_length"] == 5.0 and metrics[step]["eval/chains/success_5"] == 1.0
        assert "eval/success_once" in metrics[step]


def test_a_rounds_episodes_load_the_shards_evenly():
    envs = spread_over_shards(50, 2, 34)
    assert envs[:4] == [0, 34, 1, 35] and envs[-1] == 34 + 24
    assert len(set(envs)) == 50 and sum(env < 34 for env in envs) == 25
    assert spread_over_shards(3, 3, 2) == [0, 2, 4] and spread_over_shards(4, 1, 4) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="7 episodes do not fit 2 shards of 3 envs"):
        spread_over_shards(7, 2, 3)
