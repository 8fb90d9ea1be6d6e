"""RL that does no harm: no policy update from groups without signal, and the KL brake.

The batch tests run ``build_batch`` on hand-made rollouts; the actor tests train a tiny pi0 in this process
(no Ray, no simulator) and compare the checkpoints it saves tensor by tensor.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import vlarl_policies
from vlarl_trainer.config import ActorConfig, AlgorithmConfig
from vlarl_trainer.rl.batch import build_batch, minibatch_plan
from vlarl_trainer.rl.workers.actor_worker import ActorWorker
from vlarl_trainer.rl.workers.process import local_rendezvous

STEPS, CHUNK, ACTION_DIM = 3, 2, 4


def rollout(rewards: list[list[float]], tasks: list[str], seed: int = 0) -> dict:
    """A rollout as ``concat_epochs`` makes it: ``rewards`` [T][B], no episode ending early, random values
    and log-probs, ``tasks[b]`` played by env b."""
    generator = torch.Generator().manual_seed(seed)
    reward = torch.tensor(rewards)
    steps, envs = reward.shape
    return {
        "rewards": reward,
        "dones": torch.zeros(steps + 1, envs),
        "logprobs": torch.randn(steps, envs, CHUNK, ACTION_DIM, generator=generator),
        "values": torch.randn(steps + 1, envs, generator=generator),
        "forward_inputs": {"x": torch.randn(steps, envs, 5, generator=generator)},
        "tasks": tasks,
        "success_once": (reward > 0).any(0).numpy(),
    }


TASKS = ["reach", "reach", "push", "push"]


def test_a_step_without_success_under_a_sparse_reward_trains_only_the_critic():
    batch, metrics = build_batch(rollout([[0.0] * 4] * STEPS, TASKS), AlgorithmConfig())
    assert metrics["rollout/groups_without_signal"] == 1.0
    assert (batch["advantages"] == 0).all() and (batch["policy_weights"] == 0).all()
    assert (batch["weights"] == 1).all() and batch["returns"].abs().sum() > 0


def test_only_the_tasks_with_signal_take_the_policy_loss_and_its_normalization():
    rewards = [[0.0] * 4, [1.0, 0.0, 0.0, 0.0], [0.0] * 4]  # one reach episode succeeds, no push episode does
    batch, metrics = build_batch(rollout(rewards, TASKS), AlgorithmConfig())
    assert metrics["rollout/groups_without_signal"] == 0.5
    per_env = lambda x: x.reshape(STEPS, 4)  # noqa: E731  (no step is masked: [N] is [T * B])
    policy_weights, advantages = per_env(batch["policy_weights"]), per_env(batch["advantages"])
    assert (policy_weights[:, :2] == 1).all() and (policy_weights[:, 2:] == 0).all()
    assert (advantages[:, 2:] == 0).all()
    kept = advantages[:, :2]
    assert abs(float(kept.mean())) < 1e-5 and abs(float(kept.std()) - 1.0) < 1e-4
    without_guard, _ = build_batch(rollout(rewards, TASKS), AlgorithmConfig(skip_no_signal=False))
    assert (without_guard["policy_weights"] == 1).all() and (per_env(without_guard["advantages"])[:, 2:] != 0).all()


def test_a_dense_reward_is_signal_even_where_no_episode_succeeds():
    dense = [[0.1, 0.2, 0.3, 0.3], [0.4, 0.1, 0.3, 0.3], [0.2, 0.2, 0.3, 0.31]]
    batch, metrics = build_batch(rollout(dense, TASKS), AlgorithmConfig())
    assert metrics["rollout/groups_without_signal"] == 0.0 and (batch["policy_weights"] == 1).all()


def test_grpo_leaves_out_the_groups_of_equal_scores():
    scores = [[1.0, 1.0, 0.0, 1.0]]  # group 0: both succeed (no signal); group 1: one of two
    config = AlgorithmConfig(name="grpo", group_size=2)
    batch, metrics = build_batch({**rollout(scores, TASKS), "values": None}, config)
    assert metrics["rollout/groups_without_signal"] == 0.5 and metrics["rollout/groups_kept"] == 0.5
    assert len(batch["weights"]) == 2 and (batch["policy_weights"] == batch["weights"]).all()
    _, unguarded = build_batch({**rollout(scores, TASKS), "values": None}, AlgorithmConfig(name="grpo", group_size=2,
                                                                                           skip_no_signal=False))
    assert unguarded["rollout/groups_kept"] == 1.0 and "rollout/groups_without_signal" not in unguarded


# ------------------------------------------------------------------------------------------ the actor

SAMPLES = 12


def observations(batch: int) -> dict:
    rng = np.random.default_rng(0)
    return {"main_images": rng.integers(0, 256, (batch, 64, 64, 3), dtype=np.uint8),
            "states": rng.uniform(-1, 1, (batch, 4)).astype(np.float32),
            "task_description": tuple(rng.choice(["reach the goal", "push the puck"], batch))}


@pytest.fixture(scope="module")
def policy_path(tmp_path_factory) -> str:
    torch.manual_seed(0)
    policy = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4, add_value_head=True,
                                 noise_method="flow_noise")
    return str(policy.save_pretrained(tmp_path_factory.mktemp("policy") / "pi0"))


def actor(policy_path: str, **algorithm) -> ActorWorker:
    """One actor rank on the CPU with weight decay and an entropy bonus, both of which move parameters
    whatever the advantages."""
    settings = ActorConfig(global_batch_size=4, micro_batch_size=2, lr=1e-2, value_lr=1e-2, weight_decay=0.1)
    worker = ActorWorker(0, 1, local_rendezvous(), policy_path, settings,
                         AlgorithmConfig(entropy_coef=0.01, **algorithm), total_optimizer_steps=10, threads=1)
    return worker


def batch_of(worker: ActorWorker, policy_weight: float, logprob_shift: float = 0.0) -> dict:
    """A batch of the policy's own samples with returns to fit, advantages of both signs where
    ``policy_weight`` is not 0, and old log-probs ``logprob_shift`` below the policy's."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        output = worker.policy.act(observations(SAMPLES), generator=generator)
    advantages = torch.randn(SAMPLES, generator=generator) * (policy_weight > 0)
    return {"forward_inputs": output.forward_inputs, "old_logprobs": output.logprobs - logprob_shift,
            "advantages": advantages, "returns": output.values + 1.0, "old_values": output.values,
            "weights": torch.ones(SAMPLES), "policy_weights": torch.full((SAMPLES,), policy_weight)}


def plan(epochs: int = 1) -> list:
    return minibatch_plan(SAMPLES, 4, 2, world_size=1, update_epoch=epochs, seed=0)


def saved(worker: ActorWorker, directory: Path) -> dict[str, torch.Tensor]:
    worker.save(str(directory))
    return load_file(directory / "policy" / "model.safetensors")


def test_a_step_without_signal_leaves_every_tensor_outside_the_value_head_bit_identical(policy_path, tmp_path):
    """After a step with signal (so AdamW holds moments that would keep moving the weights), a step whose
    batch has no policy weight changes the value head alone."""
    worker = actor(policy_path)
    worker.train(batch_of(worker, 1.0), plan())
    before = saved(worker, tmp_path / "before")
    metrics = worker.train(batch_of(worker, 0.0), plan())
    after = saved(worker, tmp_path / "after")
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert changed and all(name.startswith("value_head.") for name in changed), sorted(changed)[:5]
    assert metrics["update_fraction"] == 1.0 and "approx_kl" not in metrics and "value_loss" in metrics


def test_a_batch_with_signal_moves_the_policy(policy_path, tmp_path):
    worker = actor(policy_path)
    before = saved(worker, tmp_path / "before")
    worker.train(batch_of(worker, 1.0), plan())
    after = saved(worker, tmp_path / "after")
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert any(not name.startswith("value_head.") for name in changed)


def test_the_kl_brake_skips_the_rest_of_an_update(policy_path, tmp_path):
    """Old log-probs far below the policy's put the first minibatch's approximate KL past the target: nothing
    is applied. Without a target the same update runs its three minibatches over two epochs."""
    worker = actor(policy_path, target_kl=0.01)
    before = saved(worker, tmp_path / "before")
    metrics = worker.train(batch_of(worker, 1.0, logprob_shift=0.5), plan(epochs=2))
    assert metrics["early_stopped"] == 1.0 and metrics["update_fraction"] == 0.0
    assert metrics["approx_kl"] > 0.01
    after = saved(worker, tmp_path / "after")
    assert all(torch.equal(before[name], after[name]) for name in before)
    free = actor(policy_path)
    metrics = free.train(batch_of(free, 1.0, logprob_shift=0.5), plan(epochs=2))
    assert metrics["early_stopped"] == 0.0 and metrics["update_fraction"] == 1.0


def test_the_kl_brake_stops_once_the_updates_so_far_pass_it(policy_path):
    """The policy's own log-probs: the first minibatch measures no KL and steps at a large learning rate, and
    a later one measures the drift and stops the update part-way."""
    worker = actor(policy_path, target_kl=1e-6)
    metrics = worker.train(batch_of(worker, 1.0), plan(epochs=2))
    assert metrics["early_stopped"] == 1.0 and 0.0 < metrics["update_fraction"] < 1.0


def test_every_eval_sampling_mode_is_a_way_the_rollout_workers_act():
    from vlarl_trainer.config import EVAL_SAMPLING_MODES
    from vlarl_trainer.rl.workers.rollout_worker import SAMPLING_MODES

    assert set(SAMPLING_MODES) == set(EVAL_SAMPLING_MODES)
