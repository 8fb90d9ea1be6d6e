"""vlarl-main-job: the job sizes, the stage configs it derives, its results, table and learning curve, a
whole tiny run; and scripts/plot_learning_curve.py on synthetic metrics."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlarl_trainer.cli.commands import main_job_main as main
from vlarl_trainer.config import available_jobs, config_from_dict, load_config, to_dict
from vlarl_trainer.data.reader import read_episodes
from vlarl_trainer.jobs.main_job import (
    JOB_STATE,
    check_stages,
    describe_collection,
    job_dir_of,
    job_results,
    resume_main_job,
    rl_stage_config,
    rl_stage_start,
    run_main_job,
    set_aside,
    sft_checkpoint,
    sft_stage_config,
    summary_text,
    write_json,
)
from vlarl_trainer.plots import job_learning_curve, read_curve
from vlarl_trainer.rl.evaluation import format_table
from vlarl_trainer.rl.validation import validate
from vlarl_trainer.testing import load_script

ROOT = Path(__file__).resolve().parents[3]
RECIPE = "recipe=metaworld_10_ppo_openpi_tiny"
JOBS = ["calvin_abc_d", "demo", "full", "gsenv", "libero_spatial", "ml45", "mt10", "mt10_demo", "mt50", "put_on_plate"]
pytestmark = pytest.mark.xdist_group("ray")
"""Under make test's two workers, the job tests run in the worker of the other tests that start Ray."""


def job(size: str, *overrides: str):
    return load_config([RECIPE, f"job={size}", *overrides])


def report(table: dict[tuple[str, str], float], seconds: float = 1.0) -> dict:
    """An evaluation report shaped like vlarl_trainer.rl.evaluation.evaluate's."""
    mean = sum(table.values()) / len(table)
    return {"table": table, "metrics": {"eval/success_once": mean, "time/eval": seconds}}


def test_job_sizes_grow_from_demo_to_full():
    assert available_jobs() == JOBS
    demo, full = job("demo"), job("full")
    assert (demo.job.size, full.job.size) == ("demo", "full")
    assert demo.collect.episodes_per_task <= full.collect.episodes_per_task <= 5
    assert demo.sft.steps <= full.sft.steps == 1200
    assert demo.runner.max_steps < full.runner.max_steps == 100
    assert demo.eval.episodes_per_task == full.eval.episodes_per_task == 10
    assert describe_collection(full) == "1 per task, 5 of reach-v3, 5 of push-v3, 5 of pick-place-v3"
    # Sizes only: the recipe's RL settings stay unless the size says otherwise.
    for size in (demo, full):
        assert size.actor == load_config([RECIPE]).actor and size.recipe == "metaworld_10_ppo_openpi_tiny"
    # The demo plays four MT10 tasks, 40 held-out episodes, each task in 15 of its 60 envs.
    assert "tasks" not in full.env.kwargs
    assert demo.env.kwargs["tasks"] == ["door-open-v3", "drawer-open-v3", "window-close-v3", "button-press-topdown-v3"]
    assert demo.env.num_envs % len(demo.env.kwargs["tasks"]) == 0
    assert describe_collection(demo) == "1 per task"
    assert rl_stage_start(demo, Path("job")).env.kwargs == {**load_config([RECIPE]).env.kwargs,
                                                            "tasks": demo.env.kwargs["tasks"]}


@pytest.mark.sim
@pytest.mark.parametrize("recipe", ["metaworld_10_ppo_openpi_tiny", "metaworld_10_ppo_openpi_tiny_flownoise",
                                    "metaworld_10_grpo_openpi_tiny"])
def test_full_job_steps_its_envs_in_two_processes(tmp_path, recipe):
    config = load_config([f"recipe={recipe}", "job=full"])
    layout = validate(rl_stage_start(config, tmp_path))
    assert layout.env_workers == 2 and layout.rollout_workers == 1 and layout.actor_workers == 1
    assert config.env.num_envs == 2 * config.rollout.pipeline_stage_num * layout.envs_per_stage


def test_libero_spatial_job_sizes_its_stages_for_the_recipe():
    config = load_config(["recipe=libero_spatial_ppo_openpi_tiny", "job=libero_spatial"])
    assert config.job.size == "libero_spatial" and describe_collection(config) == "5 per task"
    assert (config.sft.steps, config.runner.max_steps, config.eval.interval) == (2000, 30, 0)
    assert config.eval.splits == ["test", "language", "position", "object", "task"]
    assert config.actor == load_config(["recipe=libero_spatial_ppo_openpi_tiny"]).actor


@pytest.mark.sim
@pytest.mark.parametrize("recipe", ["libero_spatial_ppo_openpi_tiny", "libero_spatial_grpo_openpi_tiny"])
def test_libero_spatial_job_collects_every_task_and_scores_ten_states_of_each_in_five_splits(tmp_path, recipe):
    from vlarl_envs import family_of
    from vlarl_envs.testing import require_simulator
    from vlarl_trainer.data.collector import collected_tasks
    from vlarl_trainer.rl.evaluation import evaluation_options

    require_simulator("libero")
    config = load_config([f"recipe={recipe}", "job=libero_spatial"])
    validate(rl_stage_start(config, tmp_path))
    family = family_of(config.env.id)
    tasks = collected_tasks(config)
    assert len(tasks) == 10 and all(family.expert(task) is not None for task in tasks)
    options = evaluation_options(config)
    assert len(options) == 5 * 10 * 10
    assert {option["episode_id"] for option in options} == set(range(10))


def sized_job(tmp_path, recipe: str, job_name: str, demonstrations: str):
    """``job=<job_name>`` on its recipe, checked as every job is: its size and demonstrations, the recipe's
    actor settings, an evaluation on the last RL step, and a tree that validates."""
    config = load_config([f"recipe={recipe}", f"job={job_name}"])
    assert config.job.size == job_name and describe_collection(config) == demonstrations
    assert config.actor == load_config([f"recipe={recipe}"]).actor
    assert config.runner.max_steps % config.eval.interval == 0
    check_stages(config, tmp_path)
    return config


@pytest.mark.sim
def test_put_on_plate_job_scores_every_split_with_its_variations_in_turn(tmp_path):
    from vlarl_envs import family_of
    from vlarl_envs.testing import require_simulator
    from vlarl_trainer.rl.evaluation import evaluation_options

    require_simulator("mani_skill")
    config = sized_job(tmp_path, "maniskill_ppo_openpi_tiny", "put_on_plate", "100 per task")
    family = family_of(config.env.id)
    options = evaluation_options(config)
    assert len(options) == 4 * 30
    assert {option["split"] for option in options} == {"train", "vision", "semantic", "execution"}
    for split in ("vision", "semantic", "execution"):
        variations = Counter(family.group("PutOnPlate", split, option["episode_id"])
                             for option in options if option["split"] == split)
        assert max(variations.values()) - min(variations.values()) <= 1, (split, variations)
        assert len(variations) == {"vision": 7, "semantic": 5, "execution": 3}[split]


@pytest.mark.sim
def test_gsenv_job_scores_test_and_the_robustness_variations_on_the_same_layouts(tmp_path):
    from vlarl_envs import family_of
    from vlarl_envs.testing import require_simulator
    from vlarl_trainer.rl.evaluation import evaluation_options

    require_simulator("mani_skill")
    config = sized_job(tmp_path, "gsenv_ppo_openpi_pi05_tiny", "gsenv", "100 per task")
    family = family_of(config.env.id)
    options = evaluation_options(config)
    assert len(options) == 2 * 30 and {option["split"] for option in options} == {"test", "robustness"}
    variations = Counter(family.group(option["task"], "robustness", option["episode_id"])
                         for option in options if option["split"] == "robustness")
    assert variations == {"camera": 10, "appearance": 10, "background": 10}


@pytest.mark.sim
@pytest.mark.parametrize("recipe, job, tasks, scored", [("metaworld_50_ppo_openpi_tiny", "mt50", 50, 50 * 5),
                                                        ("metaworld_45_ppo_openpi_tiny", "ml45", 45, 5 * 10)])
def test_metaworld_suite_jobs_collect_every_task_and_score_the_recipes_env(tmp_path, recipe, job, tasks, scored):
    from vlarl_envs import family_of
    from vlarl_trainer.data.collector import collected_tasks
    from vlarl_trainer.rl.evaluation import evaluation_options

    config = sized_job(tmp_path, recipe, job, "2 per task")
    family = family_of(config.env.id)
    assert len(collected_tasks(config)) == tasks and all(family.expert(task) for task in collected_tasks(config))
    assert len(evaluation_options(config)) == scored


@pytest.mark.sim
def test_calvin_job_scores_scene_d_its_chains_and_abcs_test_states():
    from vlarl_envs.testing import require_simulator
    from vlarl_trainer.rl.validation import validate_run

    require_simulator("calvin_env")
    config = load_config(["recipe=calvin_abc_d_ppo_openpi_tiny", "job=calvin_abc_d"])
    assert config.job.size == "calvin_abc_d" and describe_collection(config) == "3 per task"
    assert config.eval.env_id == "vlarl/CALVIN-D-v0"
    assert (config.env.id, config.eval.training_env_splits) == ("vlarl/CALVIN-ABC-v0", {"abc_test": "test"})
    validate_run(config)
    assert (config.eval.calvin_chains, config.eval.episodes_per_task) == (50, 5)
    assert config.runner.max_steps % config.eval.interval == 0
    assert config.actor == load_config(["recipe=calvin_abc_d_ppo_openpi_tiny"]).actor


def test_stage_configs_share_the_tree_and_wire_the_stages(tmp_path):
    config = job("demo", "actor.lr=5e-5", "runner.seed=3", "eval.at_start=false", "runner.output_dir=out",
                 "runner.name=mine")
    assert job_dir_of(config) == Path("out") / "mine"
    assert job_dir_of(job("full", "runner.seed=2")).name.startswith("main-full-metaworld_10_ppo_openpi_tiny-seed2-")
    sft = sft_stage_config(config, tmp_path, tmp_path / "demos")
    rl = rl_stage_start(config, tmp_path)
    # SFT trains the very policy RL loads: one policy and env section, one seed.
    assert sft.policy == config.policy and sft.env == config.env and sft.runner.seed == rl.runner.seed == 3
    assert (sft.runner.output_dir, sft.runner.name, sft.dataset) == (str(tmp_path), "sft", str(tmp_path / "demos"))
    assert sft.sft.evaluate is False
    # RL starts from the SFT checkpoint and evaluates before it trains, whatever the user says.
    assert rl.policy.pretrained == str(sft_checkpoint(config, tmp_path)) == str(tmp_path / "sft/checkpoints/step_600")
    assert rl.eval.at_start is True and rl.actor.lr == 5e-5 and rl.runner.max_steps == 12
    assert (rl.runner.output_dir, rl.runner.name) == (str(tmp_path), "rl")
    assert config_from_dict(json.loads(json.dumps(to_dict(config)))) == config


def test_results_json_and_the_final_table(tmp_path):
    config = job("demo", "runner.seed=2", "actor.lr=5e-5")
    before = report({("test", "push-v3"): 0.2, ("test", "reach-v3"): 0.0}, seconds=4.0)
    after = report({("test", "push-v3"): 0.6, ("test", "reach-v3"): 0.2}, seconds=5.0)
    before["groups"], after["groups"] = {("test", "easy"): 0.0, ("test", "hard"): 0.2}, {("test", "easy"): 0.2,
                                                                                        ("test", "hard"): 0.6}
    paths = {"tensorboard": {"sft": "j/sft/tensorboard", "rl": "j/rl/tensorboard"}, "videos": "j/rl/videos",
             "video_files": ["j/rl/videos/eval_step_0/round_000.mp4"], "learning_curve": "j/learning_curve.png",
             "results": str(tmp_path / "results.json")}
    results = job_results(config, ["actor.lr=5e-5"], before, after, {"first": 1.2, "final": 0.3}, {"sft": 10.0},
                          paths)
    write_json(tmp_path / "results.json", results)

    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["success"] == [{"split": "test", "task": "push-v3", "before": 0.2, "after": 0.6},
                                {"split": "test", "task": "reach-v3", "before": 0.0, "after": 0.2}]
    assert saved["groups"] == [{"split": "test", "group": "easy", "before": 0.0, "after": 0.2},
                               {"split": "test", "group": "hard", "before": 0.2, "after": 0.6}]
    # The groups' unweighted mean, RLinf's "Avg.", whatever the number of episodes behind each group.
    assert saved["group_means"] == [{"split": "test", "before": pytest.approx(0.1), "after": pytest.approx(0.4)}]
    assert saved["mean"] == pytest.approx({"before": 0.1, "after": 0.4})
    assert saved["sft_loss"] == {"first": 1.2, "final": 0.3} and saved["seconds"] == {"sft": 10.0}
    assert saved["seed"] == 2 and saved["recipe"] == "metaworld_10_ppo_openpi_tiny" and saved["job"] == "demo"
    assert saved["resumed_from_step"] is None and saved["overrides"] == ["actor.lr=5e-5"]
    assert config_from_dict(saved["config"]) == config
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]

    text = summary_text(before, after, paths, "deterministic")
    assert "success under eval.sampling=deterministic" in text and "| test | push-v3 | 0.20 | 0.60 |" in text
    assert "| test | group hard | 0.20 | 0.60 |" in text
    assert "| test | mean of groups | 0.10 | 0.40 |" in text
    assert "| all | mean | 0.10 | 0.40 |" in text
    assert "tensorboard (rl): j/rl/tensorboard" in text and "videos: j/rl/videos (1 files)" in text
    assert "learning curve: j/learning_curve.png" in text


def test_results_and_table_give_each_split_its_mean_where_there_are_several(tmp_path):
    config = load_config(["recipe=libero_spatial_ppo_openpi_tiny", "job=libero_spatial"])
    before = report({("test", "a"): 0.5, ("test", "b"): 0.3, ("language", "a"): 0.1, ("language", "b"): 0.1})
    after = report({("test", "a"): 0.9, ("test", "b"): 0.7, ("language", "a"): 0.3, ("language", "b"): 0.1})
    before["splits"], after["splits"] = {"test": 0.4, "language": 0.1}, {"test": 0.8, "language": 0.2}
    results = job_results(config, [], before, after, {}, {}, {})
    assert results["splits"] == [{"split": "test", "before": 0.4, "after": 0.8},
                                 {"split": "language", "before": 0.1, "after": 0.2}]
    text = format_table(before, after)
    assert "| test | mean | 0.40 | 0.80 |" in text and "| language | mean | 0.10 | 0.20 |" in text
    assert "| all | mean | 0.25 | 0.50 |" in text
    one_split = report({("test", "a"): 0.5})
    one_split["splits"] = {"test": 0.5}
    alone = format_table(None, one_split)
    assert "| test | mean |" not in alone and "| all | mean | 0.50 |" in alone


def test_results_and_table_carry_calvins_chains_before_and_after():
    config = load_config(["recipe=calvin_abc_d_ppo_openpi_tiny", "job=calvin_abc_d"])
    before, after = report({("test", "open_drawer"): 0.2}), report({("test", "open_drawer"): 0.6})
    before["metrics"].update({"eval/chains/success_1": 0.4, "eval/chains/average_length": 0.5})
    after["metrics"].update({"eval/chains/success_1": 0.7, "eval/chains/average_length": 1.25})
    results = job_results(config, [], before, after, {}, {}, {})
    assert results["chains"] == {"success_1": {"before": 0.4, "after": 0.7},
                                 "average_length": {"before": 0.5, "after": 1.25}}
    text = format_table(before, after)
    assert "| chains | success_1 | 0.40 | 0.70 |" in text and "| chains | average_length | 0.50 | 1.25 |" in text
    assert "chains" not in job_results(config, [], report({("test", "a"): 0.1}), report({("test", "a"): 0.2}),
                                       {}, {}, {})


def test_logged_evaluation_reads_back_what_evaluate_logs(tmp_path):
    from vlarl_trainer.rl.evaluation import logged_evaluation

    metrics = {"eval/success_once": 0.25, "eval/success_at_end": 0.2, "eval/test/success_once": 0.25,
               "eval/test/success_once/push-v3": 0.5, "eval/test/success_once/reach-v3": 0.0, "time/eval": 3.5}
    path = tmp_path / "metrics.jsonl"
    lines = [{"step": 0, **metrics}, {"step": 1, "env/success_once": 0.4, "time/step": 9.0},
             {"step": 2, **metrics, "eval/success_once": 0.75}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = logged_evaluation(path, 0)
    assert report["table"] == {("test", "push-v3"): 0.5, ("test", "reach-v3"): 0.0}
    assert report["splits"] == {"test": 0.25} and report["metrics"] == metrics
    assert logged_evaluation(path, 2)["metrics"]["eval/success_once"] == 0.75
    assert logged_evaluation(path, 1) is None and logged_evaluation(tmp_path / "none.jsonl", 0) is None


def test_logged_seconds_count_a_replayed_step_once_with_its_later_time(tmp_path):
    from vlarl_trainer.metrics import logged_seconds

    # A run stopped after step 3 (checkpoint at 2), resumed from step 2: steps 3-4 logged again.
    lines = [{"step": 0, "eval/success_once": 0.1, "time/eval": 5.0},
             *({"step": step, "time/step": 10.0} for step in (1, 2, 3)),
             *({"step": step, "time/step": 20.0} for step in (3, 4)),
             {"step": 4, "eval/success_once": 0.3, "time/eval": 5.0}]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert logged_seconds(path) == {0: 5.0, 1: 10.0, 2: 10.0, 3: 20.0, 4: 25.0}


def test_cli_refuses_an_existing_run_directory_before_any_work(tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "results.json").write_text("{}")
    assert main([RECIPE, "job=demo", f"runner.output_dir={tmp_path}", "runner.name=taken"]) == 2
    assert "never overwrites" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["results.json"]
    assert main([RECIPE, "job=huge"]) == 2
    assert f"unknown job 'huge'; available: {JOBS}" in capsys.readouterr().err
    assert main(["job=demo"]) == 2
    assert "name a recipe" in capsys.readouterr().err


def test_cli_refuses_bad_stage_sizes_before_any_work(tmp_path, capsys):
    assert main([RECIPE, "job=demo", f"runner.output_dir={tmp_path}", "runner.name=job", "sft.steps=0"]) == 2
    assert "sft.steps must be positive, got 0" in capsys.readouterr().err
    assert main([RECIPE, "job=demo", f"runner.output_dir={tmp_path}", "runner.name=job",
                 "collect.episodes_per_task=0"]) == 2
    assert "collect.episodes_per_task must be positive, got 0" in capsys.readouterr().err
    assert not (tmp_path / "job").exists()


def write_job_state(job_dir: Path, seconds: dict[str, float]) -> None:
    job_dir.mkdir()
    write_json(job_dir / JOB_STATE, {"config": to_dict(job("demo")), "overrides": [], "seconds": seconds})


def test_resume_refuses_what_it_cannot_continue(tmp_path, capsys):
    with pytest.raises(ValueError, match="expected a vlarl-main-job run directory with job.json"):
        resume_main_job(tmp_path)
    (tmp_path / "old").mkdir()
    write_json(tmp_path / "old" / JOB_STATE, {"preset": {}, "variant": "flow-sde", "seconds": {"collect": 1.0}})
    with pytest.raises(ValueError, match="holds no config tree"):
        resume_main_job(tmp_path / "old")
    write_job_state(tmp_path / "done", {"collect": 20.0, "sft": 100.0})
    (tmp_path / "done" / "results.json").write_text("{}")
    assert main([f"resume={tmp_path / 'done'}"]) == 2
    assert "finished already" in capsys.readouterr().err
    assert main([f"resume={tmp_path / 'done'}", "runner.seed=1", "actor.lr=1e-5"]) == 2
    assert "drop ['runner.seed=1', 'actor.lr=1e-5']" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "done").iterdir()) == [JOB_STATE, "results.json"]


def test_resume_auto_finishes_only_the_job_it_was_started_as(tmp_path, capsys):
    command = [RECIPE, "job=demo", f"runner.output_dir={tmp_path}", "runner.name=done"]
    assert main([RECIPE, "job=demo", f"runner.output_dir={tmp_path}", "resume=auto"]) == 2
    assert "set runner.name=<name>" in capsys.readouterr().err
    (tmp_path / "done").mkdir()
    write_json(tmp_path / "done" / JOB_STATE, {"config": to_dict(job("demo")), "overrides": command,
                                               "seconds": {"collect": 20.0, "sft": 100.0}})
    (tmp_path / "done" / "results.json").write_text("{}")
    assert main([*command, "resume=auto"]) == 0  # a resubmitted script whose job has finished: nothing to do
    assert "has finished already" in capsys.readouterr().out
    assert main([*command, "runner.seed=1", "resume=auto"]) == 2
    assert "was started with" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "done").iterdir()) == [JOB_STATE, "results.json"]


def test_a_stop_signal_during_rl_names_the_job_to_resume(tmp_path, monkeypatch, capsys):
    import signal

    from vlarl_trainer.jobs import main_job
    from vlarl_trainer.rl.stopping import RunStopped

    job_dir = tmp_path / "job"
    job_dir.mkdir()
    write_json(job_dir / JOB_STATE, {"config": to_dict(job("demo")), "overrides": [],
                                     "seconds": {"collect": 20.0, "sft": 100.0},
                                     "sft": {"run_dir": str(job_dir / "sft"), "checkpoint": "x", "loss": {}}})

    def stopped_by_sigterm(config):
        raise RunStopped(signal.SIGTERM, 3, job_dir / "rl" / "checkpoints" / "step_3", job_dir / "rl")

    monkeypatch.setattr(main_job, "reinforce", stopped_by_sigterm)
    assert main([f"resume={job_dir}"]) == 143
    err = capsys.readouterr().err
    assert "stopped by SIGTERM after step 3" in err and f"continue with: vlarl-main-job resume={job_dir}" in err


def test_a_stopped_stage_is_set_aside_and_never_reused(tmp_path):
    for _ in range(2):
        (tmp_path / "sft" / "checkpoints").mkdir(parents=True)
        set_aside(tmp_path / "sft")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sft-interrupted-1", "sft-interrupted-2"]
    set_aside(tmp_path / "absent")
    assert len(list(tmp_path.iterdir())) == 2


def test_rl_stage_continues_from_its_checkpoint_or_starts_again(tmp_path):
    from vlarl_trainer.config import to_yaml
    from vlarl_trainer.rl import checkpoint as checkpoints

    config = rl_stage_start(job("demo"), tmp_path)
    assert rl_stage_config(tmp_path, config) == (config, None)

    rl = tmp_path / "rl"
    (rl / "checkpoints" / "step_5").mkdir(parents=True)  # partial: no trainer_state.json
    (rl / "config.yaml").write_text(to_yaml(config))
    assert rl_stage_config(tmp_path, config) == (config, None)
    assert not rl.exists() and (tmp_path / "rl-interrupted-1" / "checkpoints" / "step_5").exists()

    def save(directory):
        (directory / "policy").mkdir()
        (directory / "policy" / "config.json").write_text("{}")
        (directory / "actor_state.pt").write_bytes(b"state")

    rl.mkdir()
    checkpoints.write_checkpoint(rl, 5, save, {})
    (rl / "config.yaml").write_text(to_yaml(config))
    resumed, step = rl_stage_config(tmp_path, config)
    assert step == 5 and resumed.resume == str(rl) and resumed.runner.max_steps == config.runner.max_steps


TINY = (
    "env.id=vlarl/MetaWorld-reach-v3",
    # The per-task count wins over the default for its task, as the full job's extra demonstrations do.
    "collect.episodes_per_task=1",
    "collect.task_episodes={reach-v3: 2}",
    "sft.steps=5",
    "sft.batch_size=8",
    "sft.warmup_steps=1",
    "runner.max_steps=1",
    "eval.episodes_per_task=1",
    "eval.video=true",
    "env.num_envs=2",
    "env.max_steps=10",
    # The collector shares the env's horizon: the reach expert needs up to about 55 steps.
    "env.kwargs={obs_mode: rgb, image_size: 64, horizon: 60, reward_mode: sparse}",
    "rollout.pipeline_stage_num=1",
    "actor.global_batch_size=4",
    "actor.micro_batch_size=2",
    "actor.update_epoch=1",
    "runner.progress=false",
)


def tiny_job(tmp_path, *overrides: str):
    return load_config([RECIPE, *TINY, f"runner.output_dir={tmp_path}", "runner.name=job", "runner.seed=1",
                        *overrides])


def write_metrics(path: Path, successes: list[float]) -> Path:
    path.parent.mkdir(parents=True)
    lines = [{"step": 0, "eval/success_once": successes[0]}]
    lines += [{"step": step, "env/success_once": value, "train/actor/lr": 1e-4}
              for step, value in enumerate(successes, start=1)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def dark_pixels(path: Path) -> int:
    with Image.open(path) as image:
        return int((np.asarray(image.convert("L")) < 40).sum())


def test_plot_script_draws_every_seed_and_the_mean(tmp_path):
    plot_learning_curve = load_script(ROOT / "scripts" / "plot_learning_curve.py")
    first = write_metrics(tmp_path / "seed0" / "metrics.jsonl", [0.1, 0.2, 0.4, 0.5])
    second = write_metrics(tmp_path / "seed1" / "rl" / "metrics.jsonl", [0.0, 0.3, 0.3, 0.6])
    (tmp_path / "seed0" / "config.yaml").write_text("runner:\n  seed: 0\n")
    assert plot_learning_curve.read_curve(first, "env/success_once") == {1: 0.1, 2: 0.2, 3: 0.4, 4: 0.5}
    assert plot_learning_curve.run_label(first) == "seed 0"
    assert plot_learning_curve.run_label(second) == "seed1"  # a main job's folder, without a config

    alone, both = tmp_path / "plots" / "alone.png", tmp_path / "plots" / "both.png"
    plot_learning_curve.main([str(first), "--out", str(alone)])
    plot_learning_curve.main([str(first), str(tmp_path / "seed1"), "--out", str(both)])
    for path in (alone, both):
        with Image.open(path) as image:
            assert image.format == "PNG" and image.size == (840, 540)
    # The mean is the bold black line: two runs add it, a single run has only the black axes and labels.
    assert dark_pixels(both) > dark_pixels(alone) + 1500
    with pytest.raises(ValueError, match="logs no 'env/return'"):
        plot_learning_curve.main([str(first), "--metric", "env/return", "--out", str(alone)])


def test_job_learning_curve_draws_training_and_held_out_success(tmp_path):
    metrics = write_metrics(tmp_path / "rl" / "metrics.jsonl", [0.1, 0.3, 0.5])
    with metrics.open("a") as file:
        file.write(json.dumps({"step": 3, "eval/success_once": 0.6}) + "\n")
    out = job_learning_curve(metrics, tmp_path / "learning_curve.png", "demo, seed 0")
    with Image.open(out) as image:
        assert image.format == "PNG" and image.size == (840, 540)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["learning_curve.png", "rl"]  # no partial file left
    assert read_curve(metrics, "eval/success_once") == {0: 0.1, 3: 0.6}
    (tmp_path / "bare.jsonl").write_text(json.dumps({"step": 1, "env/success_once": 0.2}) + "\n")
    with pytest.raises(ValueError, match="logs no 'eval/success_once'"):
        job_learning_curve(tmp_path / "bare.jsonl", tmp_path / "bare.png")
    assert not (tmp_path / "bare.png").exists()


class StopAtSecondStep(RuntimeError):
    """What the test raises inside RL, as a killed process would stop it."""


@pytest.mark.sim
@pytest.mark.slow
def test_a_job_stopped_in_rl_resumes_to_its_end_and_is_never_overwritten(tmp_path, monkeypatch, capfd,
                                                                        embedded_ray):
    """A whole tiny job stopped at its second RL step, then resumed: every stage, its records and its
    progress bars, a resumed RL stage that continues from its checkpoint, and no stage run twice. The
    session's Ray, started before the job, outlives it."""
    import ray

    from vlarl_envs.testing import require_simulator
    from vlarl_trainer.rl.evaluation import logged_evaluation
    from vlarl_trainer.rl.runner import Trainer

    require_simulator("metaworld")
    import vlarl_policies

    config = tiny_job(tmp_path, "runner.max_steps=2", "runner.save_interval=1", "runner.progress=true")
    train_step = Trainer.train_step

    def stop_at_second_step(self, step, stop=None):
        if step == 1:
            raise StopAtSecondStep("stopped")
        return train_step(self, step, stop)

    monkeypatch.setattr(Trainer, "train_step", stop_at_second_step)
    with pytest.raises(StopAtSecondStep):
        run_main_job(config, ["runner.seed=1"])
    job_dir = tmp_path / "job"
    assert not (job_dir / "results.json").exists()
    assert set(json.loads((job_dir / JOB_STATE).read_text())["seconds"]) == {"collect", "sft"}
    before = logged_evaluation(job_dir / "rl" / "metrics.jsonl", 0)

    monkeypatch.setattr(Trainer, "train_step", train_step)
    results, summary = resume_main_job(job_dir)
    assert ray.is_initialized()
    # Every stage draws its bar with elapsed<remaining time: collection, SFT, RL and both evaluations.
    bars = capfd.readouterr().err
    for stage in ("collect: 100%", "sft: 100%", "rl: 100%", "eval: "):
        assert stage in bars
    assert "episode/s]" in bars and "<00:00" in bars

    assert results["resumed_from_step"] == 1
    assert {(r["split"], r["task"]): r["before"] for r in results["success"]} == before["table"]
    assert results["mean"]["before"] == before["metrics"]["eval/success_once"]
    seconds = results["seconds"]
    assert set(seconds) == {"collect", "sft", "rl", "eval_before", "eval_after", "total"}
    assert all(value > 0 for value in seconds.values())
    assert seconds["total"] == pytest.approx(seconds["collect"] + seconds["sft"] + seconds["rl"])
    assert seconds["eval_before"] == before["metrics"]["time/eval"]
    logged = [json.loads(line) for line in (job_dir / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged if "env/success_once" in r] == [1, 2]
    assert [r["step"] for r in logged if "eval/success_once" in r] == [0, 2]

    saved = json.loads((job_dir / "results.json").read_text())
    assert saved == json.loads(json.dumps(results)) and saved["overrides"] == ["runner.seed=1"]
    (row,) = saved["success"]
    assert (row["split"], row["task"]) == ("test", "reach-v3")
    assert 0 <= row["before"] <= 1 and 0 <= row["after"] <= 1
    assert "| test | reach-v3 |" in summary and "| all | mean |" in summary
    paths = saved["paths"]
    assert len(read_episodes(Path(paths["dataset"]))) == 2
    assert vlarl_policies.from_pretrained(paths["sft_checkpoint"]).config.action_chunk == 5
    assert (Path(paths["rl_run"]) / "checkpoints" / "step_2" / "policy" / "model.safetensors").exists()
    for stage in ("sft", "rl"):
        assert list(Path(paths["tensorboard"][stage]).glob("events.*"))
    assert paths["video_files"] and all(Path(video).stat().st_size > 0 for video in paths["video_files"])
    assert paths["learning_curve"] == str(job_dir / "learning_curve.png") and f"learning curve: {job_dir}" in summary
    with Image.open(paths["learning_curve"]) as image:
        assert image.format == "PNG"

    # Stopped after the last checkpoint and its evaluation, before results.json: nothing is trained again.
    (job_dir / "results.json").unlink()
    again, _ = resume_main_job(job_dir)
    assert again["resumed_from_step"] == 2 and again["success"] == results["success"]
    assert [json.loads(line) for line in (job_dir / "rl" / "metrics.jsonl").read_text().splitlines()] == logged

    written = (job_dir / "results.json").read_bytes()
    with pytest.raises(FileExistsError, match="never overwrites"):
        run_main_job(tiny_job(tmp_path))
    assert (job_dir / "results.json").read_bytes() == written


@pytest.mark.sim
@pytest.mark.parametrize("override, refusal", [
    ("eval.num_envs=3", r"the evaluation env \(vlarl/MetaWorld-reach-v3, eval.num_envs=3\): env.num_envs \(3\) must "
                        r"divide into env workers"),
    ("eval.training_env_splits={reach_test: test}", "eval.training_env_splits .* but the evaluation plays the "
                                                    "training env vlarl/MetaWorld-reach-v3"),
])
def test_a_bad_evaluation_setting_stops_the_job_before_it_writes_anything(tmp_path, override, refusal):
    """The RL stage's evaluation env is checked with every other stage's settings, before the demonstrations."""
    with pytest.raises(ValueError, match=refusal):
        run_main_job(tiny_job(tmp_path, override))
    assert list(tmp_path.iterdir()) == []


def test_in_child_process_returns_the_childs_result_and_raises_its_errors():
    """The collect stage runs there, so the simulators a multi-task collection builds never weigh on the
    process that goes on to drive SFT and RL."""
    from vlarl_trainer.jobs.main_job import in_child_process

    assert in_child_process(os.getpid) != os.getpid()
    assert in_child_process(divmod, 7, 2) == (3, 1)
    with pytest.raises(ValueError, match="invalid literal"):
        in_child_process(int, "seven")
