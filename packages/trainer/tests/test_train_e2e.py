"""Whole training runs of a CPU recipe on MetaWorld reach-v3 with a tiny pi0, on embedded Ray."""

import json
import math
from pathlib import Path

import pytest
import torch

from vlarl_envs.testing import require_simulator

require_simulator("metaworld")

from vlarl_trainer.rl.cluster import start_ray  # noqa: E402  (before ray: it configures Ray's start-up)

import ray  # noqa: E402,I001
from vlarl_trainer.config import load_config  # noqa: E402
from vlarl_trainer.metrics import read_metrics as read_logged  # noqa: E402
from vlarl_trainer.testing import SMALL_RUN  # noqa: E402
from vlarl_trainer.rl.rollout import run_episodes  # noqa: E402
from vlarl_trainer.rl.runner import Trainer, training_options  # noqa: E402

pytestmark = [pytest.mark.sim, pytest.mark.slow]


PPO_METRICS = {
    "env/success_once", "env/success_at_end", "env/return", "env/episode_len", "env/reward",
    "rollout/advantages_mean", "rollout/returns_mean", "train/loss",
    "train/actor/policy_loss", "train/actor/approx_kl", "train/actor/clip_fraction", "train/actor/clipped_ratio",
    "train/actor/entropy_loss",
    "train/actor/grad_norm", "train/actor/lr",
    "train/critic/value_loss", "train/critic/value_clip_ratio", "train/critic/explained_variance",
    "time/step", "time/generate_rollouts", "time/actor_training", "time/sync_weights",
}


@pytest.fixture(scope="module", autouse=True)
def embedded_ray():
    start_ray(None, num_cpus=2)
    yield
    ray.shutdown()


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
    saved = json.loads((trainer.run_dir / "checkpoints" / "step_2" / "policy" / "config.json").read_text())
    assert saved["type"] == trainer.config.policy.name and saved["action_chunk"] == trainer.config.env.action_chunk


def test_grpo_two_steps(tmp_path):
    trainer = make_trainer(tmp_path, "metaworld_10_grpo_openpi_tiny", "env.num_envs=4", "algorithm.group_size=2",
                           "algorithm.score_range=null", "actor.global_batch_size=8", "runner.max_steps=2")
    results = run_and_close(trainer)
    metrics = read_metrics(results["run_dir"])
    for step in (1, 2):
        for name in ("env/success_once", "rollout/advantages_mean", "train/actor/policy_loss", "train/actor/grad_norm"):
            assert math.isfinite(metrics[step][name])
        assert not any(name.startswith("train/critic/value_loss") for name in metrics[step])
        assert metrics[step]["rollout/groups_kept"] == 1.0  # score_range=null keeps every group


def test_two_pipeline_stages_give_the_same_trajectories(tmp_path):
    one = make_trainer(tmp_path, "metaworld_10_ppo_openpi_tiny", "env.num_envs=4", "actor.global_batch_size=8",
                       name="one")
    two = make_trainer(tmp_path, "metaworld_10_ppo_openpi_tiny", "env.num_envs=4", "actor.global_batch_size=8",
                       "rollout.pipeline_stage_num=2", f"policy.pretrained={one.run_dir / 'initial_policy'}",
                       name="two")
    try:
        options = training_options(one.config, step=0, epoch=0)
        first = run_episodes(one.shards, options, one.layout.chunk_steps, deterministic=True, seed=1)
        second = run_episodes(two.shards, options, two.layout.chunk_steps, deterministic=True, seed=1)
    finally:
        one.close()
        two.close()
    assert two.shards.stage_num == 2 and two.shards.envs_per_stage == 2
    for name in ("rewards", "dones", "episode_len", "success_once"):
        assert (first[name] == second[name]).all(), name
    # One act over 4 envs and two over 2 run the same math through differently shaped matrix
    # products, so floats agree to rounding, not bit for bit.
    torch.testing.assert_close(first["logprobs"], second["logprobs"], rtol=1e-4, atol=1e-4)
    for name, value in first["forward_inputs"].items():
        other = second["forward_inputs"][name]
        assert value.shape == other.shape, name
        if value.is_floating_point():
            torch.testing.assert_close(value, other, rtol=1e-3, atol=1e-3, msg=name)
        elif value.dtype == torch.uint8:  # images: a rounding difference in a pose moves a few pixels
            assert (value.float() - other.float()).abs().mean() < 0.5, name
        else:
            assert torch.equal(value, other), name


def test_resume_continues_exactly(tmp_path):
    straight = make_trainer(tmp_path, "metaworld_10_ppo_openpi_tiny", "runner.max_steps=2", "runner.save_interval=1",
                            name="straight")
    run_and_close(straight)
    interrupted = make_trainer(tmp_path, "metaworld_10_ppo_openpi_tiny", "runner.max_steps=1", name="interrupted")
    run_and_close(interrupted)
    from vlarl_trainer.rl.runner import resumed_config

    resumed = Trainer(resumed_config(str(interrupted.run_dir), ["runner.max_steps=2"]))
    run_and_close(resumed)
    expected, got = read_metrics(straight.run_dir)[2], read_metrics(interrupted.run_dir)[2]
    for name, value in expected.items():
        if not name.startswith("time/"):
            assert got[name] == pytest.approx(value, rel=1e-4, abs=1e-5), name


def test_evaluation_after_training_scores_the_saved_policy(tmp_path):
    # The progress reward ends each return at the dense reward of the last state, so a return tells
    # two policies apart where success alone (0 for both) would not.
    progress = "env.kwargs={obs_mode: rgb, image_size: 64, horizon: 10, reward_mode: progress}"
    trained = make_trainer(tmp_path, "metaworld_10_ppo_openpi_tiny", "runner.max_steps=1", "eval.at_start=true",
                           "actor.lr=1e-3", progress, name="trained")
    results = run_and_close(trained)
    checkpoint = trained.run_dir / "checkpoints" / "step_1" / "policy"
    reloaded = make_trainer(tmp_path, "metaworld_10_ppo_openpi_tiny", "runner.max_steps=1", "eval.at_start=true",
                            f"policy.pretrained={checkpoint}", progress, name="reloaded")
    saved_policy = run_and_close(reloaded)["before"]["metrics"]["eval/return"]
    before, after = (results[key]["metrics"]["eval/return"] for key in ("before", "after"))
    assert after != pytest.approx(before, abs=1e-6), "one update at lr 1e-3 should change the evaluated return"
    assert after == pytest.approx(saved_policy, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_actor_ranks_make_the_same_update_as_one(tmp_path, strategy):
    # Some parameters have a zero true gradient (a key bias under softmax); Adam would turn their
    # rounding noise into full steps of random sign, so a large eps keeps such noise inert.
    adam = ["actor.adam_eps=1e-3", "actor.lr=1e-3"]
    single = make_trainer(tmp_path, "metaworld_10_ppo_openpi_tiny", "env.num_envs=4", "actor.global_batch_size=8",
                          "actor.micro_batch_size=2", *adam, name="single")
    double = make_trainer(tmp_path, "metaworld_10_ppo_openpi_tiny", "env.num_envs=4", "actor.global_batch_size=8",
                          "actor.micro_batch_size=2", *adam, f"policy.pretrained={single.run_dir / 'initial_policy'}",
                          "cluster.component_placement={env: 0, rollout: 0, actor: '0:0-1'}",
                          f"actor.strategy={strategy}", name="double")
    try:
        assert len(double.actor) == 2
        single.train_step(0)
        double.train_step(0)
        one = single.actor_weights()
        two = double.actor_weights()  # FSDP: a gather every rank takes part in
        if strategy == "ddp":
            replica = ray.get(double.actor.workers[1].weights.remote())
            assert all(torch.equal(replica[name], tensor) for name, tensor in two.items()), "DDP ranks drifted"
        double.train_step(1)  # its weight sync goes through the same gather
    finally:
        single.close()
        double.close()
    initial = vlarl_policies_state(single.run_dir / "initial_policy")
    moved = 0
    for name, tensor in one.items():
        torch.testing.assert_close(two[name], tensor, rtol=1e-4, atol=1e-6, msg=name)
        moved += int(not torch.equal(tensor, initial[name]))
    assert moved > len(one) // 2, "the update changed too few parameters to compare"


def vlarl_policies_state(path):
    import vlarl_policies

    return vlarl_policies.from_pretrained(path).state_dict()


def test_sft_and_rl_evaluation_score_a_checkpoint_alike(tmp_path):
    """vlarl-sft's evaluation and vlarl-train's evaluation before RL are one evaluator: on the same
    checkpoint and config they play the same episodes to the same returns."""
    from vlarl_trainer.data import collect_demonstrations
    from vlarl_trainer.sft.train import run_sft

    collect_demonstrations("vlarl/MetaWorld-reach-v3", 1, tmp_path / "demos", image_size=64, horizon=10,
                           keep_failures=True)
    dense = ["env.kwargs={obs_mode: rgb, image_size: 64, horizon: 10, reward_mode: dense}", "eval.episodes_per_task=3"]
    sft = run_sft(load_config(["recipe=metaworld_10_ppo_openpi_tiny", *SMALL_RUN, *dense, f"dataset={tmp_path / 'demos'}",
                               "sft.steps=3", "sft.warmup_steps=1", f"runner.output_dir={tmp_path}", "runner.name=sft"]))
    trainer = make_trainer(tmp_path, "metaworld_10_ppo_openpi_tiny", *dense, f"policy.pretrained={sft.checkpoint}",
                           "eval.at_start=true", "runner.max_steps=1", name="rl")
    before = run_and_close(trainer)["before"]
    assert sft.evaluation["episodes"] == before["episodes"]
    assert len(before["episodes"]) == 3 and len({episode["return"] for episode in before["episodes"]}) == 3
    assert sft.evaluation["table"] == before["table"]


def test_evaluation_on_another_env_scores_its_tasks_and_groups(tmp_path):
    """push-v3 scored by one env of its own (eval.num_envs=1) while two envs train on reach-v3."""
    trainer = make_trainer(tmp_path, "metaworld_10_ppo_openpi_tiny", "runner.max_steps=1", "eval.at_start=true",
                           "eval.env_id=vlarl/MetaWorld-push-v3", "eval.num_envs=1", "eval.episodes_per_task=3")
    assert (trainer.eval_layout.envs_per_stage, trainer.layout.envs_per_stage) == (1, 2)
    results = run_and_close(trainer)
    for report in (results["before"], results["after"]):
        assert set(report["table"]) == {("test", "push-v3")} and set(report["groups"]) == {("test", "hard")}
        assert [episode["episode_id"] for episode in report["episodes"]] == [0, 1, 2]
        assert report["splits"] == {"test": report["metrics"]["eval/success_once"]}
    metrics = read_metrics(results["run_dir"])
    assert "env/success_once/reach-v3" in metrics[1] and "eval/test/group_success_once/hard" in metrics[1]
    assert metrics[1]["eval/test/group_mean_success_once"] == metrics[1]["eval/test/group_success_once/hard"]
    assert metrics[1]["eval/test/success_once"] == metrics[1]["eval/success_once"]
    assert set(json.loads((trainer.run_dir / "workers.json").read_text())) == {"env", "eval_env", "rollout", "actor"}
