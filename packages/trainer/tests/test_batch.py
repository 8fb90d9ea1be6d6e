"""From rollouts to samples: advantages, masks and the minibatch plan (no Ray)."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vlarl_trainer.config import AlgorithmConfig
from vlarl_trainer.rl.batch import build_batch, minibatch_plan


def rollout(T=4, B=4, C=2, A=3, done_at=(1, None, 3, None), success=(1, 0, 1, 0)):
    dones = torch.zeros(T + 1, B)
    rewards = torch.zeros(T, B)
    for b, t in enumerate(done_at):
        if t is not None:
            dones[t + 1 :, b] = 1
            rewards[t, b] = success[b]
    return {
        "rewards": rewards,
        "dones": dones,
        "logprobs": torch.randn(T, B, C, A),
        "values": torch.randn(T + 1, B),
        "forward_inputs": {"states": torch.arange(T * B, dtype=torch.float32).reshape(T, B, 1)},
        "tasks": ["reach"] * B,
        "success_once": rewards.sum(0).numpy() > 0,
    }


def test_ppo_batch_keeps_steps_up_to_the_first_done():
    data = rollout()
    batch, metrics = build_batch(data, AlgorithmConfig(name="ppo"))
    # env 0 ends at step 1 (2 steps), env 2 at step 3 (4 steps), envs 1 and 3 run all 4
    assert len(batch["weights"]) == 2 + 4 + 4 + 4
    kept_states = set(batch["forward_inputs"]["states"].flatten().tolist())
    assert 2 * 4 + 0 not in kept_states  # step 2 of env 0 comes after its done
    assert batch["old_logprobs"].shape == (14, 2, 3)
    assert abs(float(batch["advantages"].mean())) < 1e-5  # normalized over kept entries
    assert "train/critic/explained_variance" in metrics and "rollout/returns_mean" in metrics


def test_grpo_batch_drops_uniform_groups():
    data = rollout(B=4, done_at=(1, 2, 0, 3), success=(1, 0, 1, 1))
    data["values"] = None
    config = AlgorithmConfig(name="grpo", group_size=2, score_range=[0.1, 0.9])
    batch, metrics = build_batch(data, config)
    # group (0, 1) mixes success and failure and is kept; group (2, 3) all succeeded and is dropped
    assert len(batch["weights"]) == 2 + 3
    assert batch["returns"] is None and batch["old_values"] is None
    env = batch["forward_inputs"]["states"].flatten().long() % 4  # samples are flattened time-major
    assert set(env.tolist()) == {0, 1}
    assert torch.all(batch["advantages"][env == 0] > 0) and torch.all(batch["advantages"][env == 1] < 0)
    assert metrics["rollout/groups_kept"] == 0.5


def test_grpo_groups_kept_counts_groups_not_envs():
    data = rollout(B=6, done_at=(0, 0, 1, 1, 2, 2), success=(0, 1, 1, 1, 1, 0))
    data["values"] = None
    batch, metrics = build_batch(data, AlgorithmConfig(name="grpo", group_size=3, score_range=[0.1, 0.9]))
    assert metrics["rollout/groups_kept"] == 1.0  # envs (0, 1, 2) and (3, 4, 5) each mix outcomes
    _, metrics = build_batch(data, AlgorithmConfig(name="grpo", group_size=2, score_range=[0.1, 0.9]))
    assert metrics["rollout/groups_kept"] == 2 / 3  # (2, 3) all succeeded


def test_grpo_from_a_policy_with_a_value_head_trains_no_critic():
    """A PPO checkpoint carries a value head; GRPO ignores its values instead of asking for returns."""
    data = rollout(B=4, done_at=(1, 2, 0, 3), success=(1, 0, 1, 1))
    batch, metrics = build_batch(data, AlgorithmConfig(name="grpo", group_size=2, score_range=[0.1, 0.9]))
    assert batch["returns"] is None and batch["old_values"] is None
    assert "train/critic/explained_variance" not in metrics


def test_reward_scale_multiplies_rewards_before_returns():
    data = rollout()
    data["values"] = torch.zeros_like(data["values"])
    plain, _ = build_batch(data, AlgorithmConfig(name="ppo"))
    scaled, metrics = build_batch(data, AlgorithmConfig(name="ppo", reward_scale=0.1))
    assert plain["returns"].abs().max() > 0
    assert torch.allclose(scaled["returns"], 0.1 * plain["returns"])
    assert abs(metrics["rollout/rewards"] - 0.1 * float(data["rewards"].sum() / 4)) < 1e-6


def test_length_normalized_weights_give_each_trajectory_equal_total():
    batch, _ = build_batch(rollout(), AlgorithmConfig(name="ppo", length_normalized=True))
    env = batch["forward_inputs"]["states"].flatten().long() % 4
    assert torch.allclose(batch["weights"][env == 0], torch.full((2,), 0.5))
    assert abs(float(batch["weights"].sum()) - 4.0) < 1e-5


@settings(max_examples=30, deadline=None)
@given(
    samples=st.integers(8, 200),
    global_batch=st.sampled_from([8, 16, 32]),
    micro=st.sampled_from([1, 2, 4]),
    world=st.sampled_from([1, 2, 4]),
    epochs=st.integers(1, 3),
)
def test_minibatch_plan_covers_every_sample_once_per_epoch(samples, global_batch, micro, world, epochs):
    plan = minibatch_plan(samples, global_batch, micro, world, epochs, seed=0)
    flat = torch.cat([idx for batch in plan for rank in batch for idx in rank])
    assert flat.numel() == samples * epochs
    assert torch.equal(torch.bincount(flat, minlength=samples), torch.full((samples,), epochs))
    for batch in plan:
        assert len(batch) == world and all(len(rank) >= 1 for rank in batch)
        assert all(idx.numel() <= micro for rank in batch for idx in rank)


def test_per_task_normalization_gives_each_task_mean_zero_and_unit_std():
    """Two tasks whose returns differ a hundredfold: one batch scale would leave the small one near zero."""
    data = rollout(B=6, done_at=(None,) * 6, success=(0,) * 6)
    data["rewards"] = torch.randn(4, 6, generator=torch.Generator().manual_seed(0)) * torch.tensor([100.0, 1.0] * 3)
    data["tasks"] = ["push", "reach"] * 3
    batch, _ = build_batch(data, AlgorithmConfig(name="ppo", normalize_per_task=True))
    env = batch["forward_inputs"]["states"].flatten().long() % 6
    for task_envs in (env % 2 == 0, env % 2 == 1):
        advantages = batch["advantages"][task_envs]
        assert abs(float(advantages.mean())) < 1e-5 and abs(float(advantages.std()) - 1) < 1e-5
    shared, _ = build_batch(data, AlgorithmConfig(name="ppo"))
    assert float(shared["advantages"][env % 2 == 1].std()) < 0.1


def test_skipping_unsolved_tasks_zeroes_their_advantages_and_keeps_their_returns():
    """push fails in both of its episodes: no policy gradient from it, but the critic still sees it."""
    data = rollout(B=6, done_at=(None,) * 6, success=(0,) * 6)
    data["rewards"] = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    data["tasks"] = ["push", "reach", "drawer"] * 2
    data["success_once"] = np.array([False, True, False, False, False, True])
    batch, metrics = build_batch(data, AlgorithmConfig(name="ppo", skip_unsolved_tasks=True))
    env = batch["forward_inputs"]["states"].flatten().long() % 6
    push = env % 3 == 0
    assert torch.all(batch["advantages"][push] == 0)
    solved = batch["advantages"][~push]
    assert abs(float(solved.mean())) < 1e-5 and abs(float(solved.std()) - 1) < 1e-5
    assert len(batch["weights"]) == 24 and batch["returns"].shape == (24,)
    assert metrics["rollout/skipped_tasks"] == 1
    everything, _ = build_batch(data, AlgorithmConfig(name="ppo"))
    assert torch.all(everything["advantages"][push] != 0)


def test_skipping_unsolved_tasks_when_nothing_succeeded_leaves_only_the_critic_to_train():
    data = rollout(B=4, done_at=(None,) * 4, success=(0,) * 4)
    data["rewards"] = torch.rand(4, 4, generator=torch.Generator().manual_seed(2))
    data["tasks"] = ["push", "reach"] * 2
    data["success_once"] = np.zeros(4, dtype=bool)
    batch, metrics = build_batch(data, AlgorithmConfig(name="ppo", skip_unsolved_tasks=True))
    assert torch.all(batch["advantages"] == 0) and torch.isfinite(batch["returns"]).all()
    assert len(batch["weights"]) == 16 and metrics["rollout/skipped_tasks"] == 2
