"""Whole training runs of a CPU recipe on MetaWorld reach-v3 with a tiny pi0, on the session's embedded Ray."""

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from vlarl_envs.testing import require_simulator

require_simulator("metaworld")

from vlarl_trainer.config import load_config
from vlarl_trainer.metrics import read_metrics as read_logged
from vlarl_trainer.rl.evaluation import evaluate, evaluate_config, evaluation_options, format_table
from vlarl_trainer.rl.rollout import inference_placements, place_workers, run_episodes, start_inference_workers
from vlarl_trainer.rl.runner import Trainer
from vlarl_trainer.rl.training_episodes import training_options
from vlarl_trainer.rl.validation import validate
from vlarl_trainer.testing import REFERENCE_RUN, SMALL_RUN

pytestmark = [pytest.mark.sim, pytest.mark.slow, pytest.mark.usefixtures("embedded_ray"),
              pytest.mark.xdist_group("ray_reference")]


PPO_METRICS = {
    "env/success_once", "env/success_at_end", "env/return", "env/episode_len", "env/reward",
    "rollout/advantages_mean", "rollout/returns_mean", "train/loss",
    "train/actor/policy_loss", "train/actor/approx_kl", "train/actor/clip_fraction", "train/actor/clipped_ratio",
    "train/actor/entropy_loss",
    "train/actor/grad_norm", "train/actor/lr", "train/actor/early_stopped", "train/actor/update_fraction",
    "rollout/groups_without_signal",
    "train/critic/value_loss", "train/critic/value_clip_ratio", "train/critic/explained_variance",
    "time/step", "time/generate_rollouts", "time/actor_training", "time/sync_weights",
}


def make_trainer(tmp_path, recipe, *overrides, name="run"):
    config = load_config([f"recipe={recipe}", *SMALL_RUN, f"runner.output_dir={tmp_path}", f"runner.name={name}",
                          *overrides])
    return Trainer(config)


def run_and_close(trainer) -> dict:
    """The run's results; the trainer's workers are shut down whatever happens."""
    try:
        return trainer.run()
    finally:
        trainer.close()


def read_metrics(run_dir) -> dict[int, dict]:
    return read_logged(Path(run_dir) / "metrics.jsonl")


def test_ppo_two_steps_logs_every_metric(tmp_path):
    trainer = make_trainer(tmp_path, "metaworld_10_ppo_openpi_tiny_flownoise", "runner.max_steps=2",
                           "rollout.video_interval=2", "eval.video=true")
    results = run_and_close(trainer)
    videos = sorted(path.relative_to(trainer.run_dir / "videos").as_posix()
                    for path in (trainer.run_dir / "videos").rglob("*.mp4"))
    assert videos == ["eval_step_2/round_000.mp4", "train_step_2.mp4"]
    metrics = read_metrics(results["run_dir"])
    for step in (1, 2):
        missing = PPO_METRICS - set(metrics[step])
        assert not missing, f"step {step} lacks {missing}"
        assert all(math.isfinite(v) for v in metrics[step].values())
    assert {"eval/success_once", "eval/test/success_once/reach-v3"} <= set(metrics[2])
    assert {name for name in metrics[1] if name.startswith("env/success_once/")} == {"env/success_once/reach-v3"}
    assert (trainer.run_dir / "checkpoints" / "step_2" / "policy" / "model.safetensors").exists()
    assert list((trainer.run_dir / "tensorboard").glob("events.*"))
    with pytest.raises(FileExistsError, match="never overwritten"):
        make_trainer(tmp_path, "metaworld_10_ppo_openpi_tiny_flownoise", "runner.max_steps=2")


@pytest.mark.parametrize("recipe, overrides", [
    ("metaworld_10_ppo_openvlaoft_tiny", ()),
    ("metaworld_10_grpo_openvlaoft_tiny", ("env.num_envs=4", "algorithm.group_size=2", "algorithm.score_range=null",
                                           "actor.global_batch_size=8")),
    ("maniskill_ppo_openvla_tiny", ("eval.splits=[test]", "rollout.pipeline_stage_num=1")),  # on SMALL_RUN's MetaWorld
])
def test_openvla_policies_train_and_score_like_pi0(tmp_path, recipe, overrides):
    trainer = make_trainer(tmp_path, recipe, "runner.max_steps=2", "eval.at_start=true", *overrides)
    results = run_and_close(trainer)
    metrics = read_metrics(results["run_dir"])
    for step in (1, 2):
        for name in ("env/success_once", "train/actor/policy_loss", "train/actor/approx_kl", "train/actor/grad_norm"):
            assert math.isfinite(metrics[step][name]), (step, name)
    assert {"eval/success_once", "eval/test/success_once/reach-v3"} <= set(metrics[0]) & set(metrics[2])
    if trainer.config.algorithm.name == "grpo":
        for step in (1, 2):
            assert math.isfinite(metrics[step]["rollout/advantages_mean"])
            assert not any(name.startswith("train/critic/value_loss") for name in metrics[step])
            assert metrics[step]["rollout/groups_kept"] == 1.0  # score_range=null keeps every group
    saved = json.loads((trainer.run_dir / "checkpoints" / "step_2" / "policy" / "config.json").read_text())
    assert saved["type"] == trainer.config.policy.name and saved["action_chunk"] == trainer.config.env.action_chunk


def test_two_pipeline_stages_give_the_same_trajectories(reference_run):
    """The same episodes played by one pipeline stage of four envs and by two stages of two, on env and
    rollout workers holding the reference run's first policy, sampling as training does from a generator
    per env (so a shard's draws do not depend on how many envs it holds)."""
    played = {}
    for stages in (1, 2):
        config = load_config([*REFERENCE_RUN, "env.num_envs=4", "actor.global_batch_size=8",
                              f"rollout.pipeline_stage_num={stages}"])
        layout = validate(config)
        shards = start_inference_workers(config, layout, str(reference_run / "initial_policy"),
                                         place_workers(inference_placements(layout), config.cluster.start_timeout))
        try:
            assert (shards.stage_num, shards.envs_per_stage) == (stages, 4 // stages)
            played[stages] = run_episodes(shards, training_options(config, step=0, epoch=0), layout.chunk_steps,
                                          "sample", seed=1, episode_seeds=[7, 8, 9, 10])
        finally:
            shards.env.kill()
            shards.rollout.kill()
    first, second = played[1], played[2]
    for name in ("dones", "episode_len", "success_once"):
        assert (first[name] == second[name]).all(), name
    # One act over 4 envs and two over 2 run the same math through differently shaped matrix
    # products, so floats agree to rounding, not bit for bit: the log-probs, and the dense rewards of
    # states the actions' rounding moved.
    torch.testing.assert_close(first["logprobs"], second["logprobs"], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(first["rewards"], second["rewards"], rtol=1e-3, atol=1e-3)
    for name, value in first["forward_inputs"].items():
        other = second["forward_inputs"][name]
        assert value.shape == other.shape, name
        if value.is_floating_point():
            torch.testing.assert_close(value, other, rtol=1e-3, atol=1e-3, msg=name)
        elif value.dtype == torch.uint8:  # images: a rounding difference in a pose moves a few pixels
            assert (value.float() - other.float()).abs().mean() < 0.5, name
        else:
            assert torch.equal(value, other), name


def test_evaluation_modes_differ_and_each_replays_bit_identically(reference_run):
    """The reference run's first policy scored on the same four episodes in each ``eval.sampling`` mode: a
    mode played twice gives the same episodes to the bit, the modes give different ones (the dense reward's
    returns tell them apart), and a mode scored through ``eval.also_sampling`` is its split's ``_<mode>``."""
    config = load_config([*REFERENCE_RUN, "env.num_envs=4", "actor.global_batch_size=8", "eval.episodes_per_task=4",
                          "eval.also_sampling=[sample]"])
    layout = validate(config)
    shards = start_inference_workers(config, layout, str(reference_run / "initial_policy"),
                                     place_workers(inference_placements(layout), config.cluster.start_timeout))
    options = evaluation_options(config)
    try:
        returns = {}
        for mode in ("deterministic", "deterministic", "sample", "zero_start"):
            report = evaluate(shards, options, layout.chunk_steps, seed=3, sampling=mode)
            played = [episode["return"] for episode in report["episodes"]]
            assert returns.setdefault(mode, played) == played, mode
        assert len({tuple(played) for played in returns.values()}) == 3
        both = evaluate_config(config, shards, layout.chunk_steps)
    finally:
        shards.env.kill()
        shards.rollout.kill()
    assert set(both["splits"]) == {"test", "test_sample"}
    assert both["metrics"]["eval/test_sample/success_once"] == both["splits"]["test_sample"]
    assert "success under eval.sampling=deterministic" in format_table(None, both, config.eval.sampling)


@pytest.fixture(scope="module")
def sft_then_rl(tmp_path_factory, ray_for_the_session):
    """A 3-step SFT run on one demonstration (evaluated by vlarl-sft's evaluator), one RL step from its
    checkpoint at a learning rate that moves the policy (evaluated before and after), and the RL step's
    saved policy scored by vlarl-eval's evaluator. The dense reward makes every episode's return differ,
    where success alone (0 for these policies) would not."""
    from vlarl_trainer.data import collect_demonstrations
    from vlarl_trainer.rl.cluster import start_ray
    from vlarl_trainer.rl.evaluation import evaluate_checkpoint
    from vlarl_trainer.sft.train import run_sft

    start_ray(None, num_cpus=2)
    root = tmp_path_factory.mktemp("sft_then_rl")
    collect_demonstrations("vlarl/MetaWorld-reach-v3", 1, root / "demos", image_size=64, horizon=10,
                           keep_failures=True)
    dense = ["env.kwargs={obs_mode: rgb, image_size: 64, horizon: 10, reward_mode: dense}", "eval.episodes_per_task=3"]
    sft = run_sft(load_config(["recipe=metaworld_10_ppo_openpi_tiny", *SMALL_RUN, *dense, f"dataset={root / 'demos'}",
                               "sft.steps=3", "sft.warmup_steps=1", f"runner.output_dir={root}", "runner.name=sft"]))
    trainer = make_trainer(root, "metaworld_10_ppo_openpi_tiny", *dense, f"policy.pretrained={sft.checkpoint}",
                           "eval.at_start=true", "runner.max_steps=1", "actor.lr=1e-3", name="rl")
    rl = run_and_close(trainer)
    saved = evaluate_checkpoint(trainer.config, trainer.run_dir / "checkpoints" / "step_1" / "policy")
    return {"sft": sft.evaluation, "before": rl["before"], "after": rl["after"], "saved": saved}


def test_sft_and_rl_evaluation_score_a_checkpoint_alike(sft_then_rl):
    """vlarl-sft's evaluation and vlarl-train's evaluation before RL are one evaluator: on the same
    checkpoint and config they play the same episodes to the same returns."""
    sft, before = sft_then_rl["sft"], sft_then_rl["before"]
    assert sft["episodes"] == before["episodes"]
    assert len(before["episodes"]) == 3 and len({episode["return"] for episode in before["episodes"]}) == 3
    assert sft["table"] == before["table"]


def test_evaluation_after_training_scores_the_saved_policy(sft_then_rl):
    before, after = (sft_then_rl[key]["metrics"]["eval/return"] for key in ("before", "after"))
    assert after != pytest.approx(before, abs=1e-6), "one update at lr 1e-3 should change the evaluated return"
    assert after == pytest.approx(sft_then_rl["saved"]["metrics"]["eval/return"], rel=1e-5, abs=1e-6)


@pytest.fixture(scope="module")
def sparse_step_scored_on_push(tmp_path_factory, ray_for_the_session):
    """One step on reach-v3 under the sparse reward, scored before and after on push-v3 by one env of its
    own (eval.num_envs=1) while two envs train, and on reach-v3's test episodes by those two as split
    ``reach_test``. No 10-step episode of the random tiny pi0 on reach-v3 succeeds (the seed fixes it), so
    the step has no signal. The trainer, closed, and its results."""
    from vlarl_trainer.rl.cluster import start_ray

    start_ray(None, num_cpus=2)
    trainer = make_trainer(tmp_path_factory.mktemp("sparse_step"), "metaworld_10_ppo_openpi_tiny",
                           "env.kwargs.reward_mode=sparse", "runner.max_steps=1", "runner.save_interval=1",
                           "eval.at_start=true", "eval.env_id=vlarl/MetaWorld-push-v3", "eval.num_envs=1",
                           "eval.episodes_per_task=3", "eval.training_env_splits={reach_test: test}")
    return trainer, run_and_close(trainer)


def test_a_step_without_success_under_the_sparse_reward_changes_only_the_value_head(sparse_step_scored_on_push):
    """The step without signal: its checkpoint differs from the run's initial policy in ``value_head.*`` alone."""
    _, results = sparse_step_scored_on_push
    run_dir = Path(results["run_dir"])
    metrics = read_metrics(run_dir)[1]
    assert metrics["env/success_once"] == 0.0 and metrics["rollout/groups_without_signal"] == 1.0
    assert "train/actor/policy_loss" not in metrics and math.isfinite(metrics["train/critic/value_loss"])
    before = load_file(run_dir / "initial_policy" / "model.safetensors")
    after = load_file(run_dir / "checkpoints" / "step_1" / "policy" / "model.safetensors")
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert changed and all(name.startswith("value_head.") for name in changed), sorted(changed)[:5]


def test_evaluation_on_another_env_scores_its_tasks_and_groups(sparse_step_scored_on_push):
    trainer, results = sparse_step_scored_on_push
    assert (trainer.eval_layout.envs_per_stage, trainer.layout.envs_per_stage) == (1, 2)
    for report in (results["before"], results["after"]):
        assert set(report["table"]) == {("test", "push-v3"), ("reach_test", "reach-v3")}
        assert set(report["groups"]) == {("test", "hard"), ("reach_test", "easy")}
        assert [(e["split"], e["task"], e["episode_id"]) for e in report["episodes"]] == [
            *(("test", "push-v3", i) for i in range(3)), *(("reach_test", "reach-v3", i) for i in range(3))]
        assert report["splits"] == {"test": report["metrics"]["eval/success_once"],
                                    "reach_test": report["metrics"]["eval/reach_test/success_once"]}
    metrics = read_metrics(results["run_dir"])
    assert "env/success_once/reach-v3" in metrics[1] and "eval/test/group_success_once/hard" in metrics[1]
    assert "eval/reach_test/success_once/reach-v3" in metrics[1] and "eval/reach_test/success_once" in metrics[0]
    assert metrics[1]["eval/test/group_mean_success_once"] == metrics[1]["eval/test/group_success_once/hard"]
    assert metrics[1]["eval/test/success_once"] == metrics[1]["eval/success_once"]
    assert set(json.loads((trainer.run_dir / "workers.json").read_text())) == {"env", "eval_env", "rollout", "actor"}
