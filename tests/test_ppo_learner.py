"""benchmarks/ppo_learner.py: same network and same update as Stable-Baselines3, env checks, learning."""

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv

from vlarl_trainer.testing import load_script

_learner = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "ppo_learner.py")
ActorCritic, PPOConfig, _collect, _Rollout, _update, train_ppo = (
    _learner.ActorCritic, _learner.PPOConfig, _learner._collect, _learner._Rollout, _learner._update,
    _learner.train_ppo)

SAME_STEP = gym.vector.AutoresetMode.SAME_STEP


class ToyReach(gym.Env):
    """Move a 1-D point to a target: obs (position, target), reward -|position - target|."""

    observation_space = spaces.Box(-2.0, 2.0, (2,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.state = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        return self.state.copy(), {}

    def step(self, action):
        self.state[0] = np.clip(self.state[0] + 0.5 * float(action[0]), -2.0, 2.0)
        distance = abs(self.state[0] - self.state[1])
        return self.state.copy(), -float(distance), bool(distance < 0.05), False, {}


def _vector(make, num_envs=4):
    return gym.vector.SyncVectorEnv([make for _ in range(num_envs)], autoreset_mode=SAME_STEP)


def _copy_sb3_weights(model: PPO, policy: ActorCritic) -> None:
    """Loads SB3's separate actor and critic MLPs into the stacked ActorCritic."""
    pi, vf = model.policy.mlp_extractor.policy_net, model.policy.mlp_extractor.value_net
    with torch.no_grad():
        for k, index in enumerate((0, 2)):
            policy.hidden_weights[k].copy_(torch.stack([pi[index].weight.T, vf[index].weight.T]))
            policy.hidden_biases[k].copy_(torch.stack([pi[index].bias, vf[index].bias]).unsqueeze(1))
        policy.mean_weight.copy_(model.policy.action_net.weight.T)
        policy.mean_bias.copy_(model.policy.action_net.bias)
        policy.value_weight.copy_(model.policy.value_net.weight.T)
        policy.value_bias.copy_(model.policy.value_net.bias)
        policy.log_std.copy_(model.policy.log_std)


def test_actor_critic_computes_two_separate_mlps():
    model = PPO("MlpPolicy", DummyVecEnv([lambda: gym.make("Pendulum-v1")]), device="cpu", seed=0)
    policy = ActorCritic(3, 1)
    _copy_sb3_weights(model, policy)
    obs = torch.randn(16, 3)
    mean, value = policy(obs)
    with torch.no_grad():
        expected_value, _, _ = model.policy.evaluate_actions(obs, torch.zeros(16, 1))
        expected_mean = model.policy.get_distribution(obs).distribution.mean
    torch.testing.assert_close(mean, expected_mean)
    torch.testing.assert_close(value, expected_value.squeeze(-1))


def test_one_update_equals_stable_baselines3():
    # One epoch, one minibatch holding the whole rollout: the update is then independent of
    # the sample order, so both learners must land on the same weights.
    num_envs, num_steps = 2, 32
    model = PPO(
        "MlpPolicy", DummyVecEnv([lambda: gym.make("Pendulum-v1")] * num_envs), n_steps=num_steps,
        batch_size=num_envs * num_steps, n_epochs=1, learning_rate=1e-3, device="cpu", seed=0,
    )
    policy = ActorCritic(3, 1)
    _copy_sb3_weights(model, policy)
    model.learn(num_envs * num_steps)  # fills the buffer, then trains on it
    buffer = model.rollout_buffer
    batch = {
        "obs": torch.as_tensor(buffer.observations).reshape(-1, 3),
        "actions": torch.as_tensor(buffer.actions).reshape(-1, 1),
        "logprobs": torch.as_tensor(buffer.log_probs).reshape(-1, 1, 1),
        "advantages": torch.as_tensor(buffer.advantages).reshape(-1),
        "returns": torch.as_tensor(buffer.returns).reshape(-1),
        "values": torch.as_tensor(buffer.values).reshape(-1),
    }
    config = PPOConfig(minibatch_size=num_envs * num_steps, update_epochs=1, learning_rate=1e-3)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3, eps=1e-5, fused=True)
    _update(policy, optimizer, config, torch.Generator().manual_seed(0), batch)
    trained = ActorCritic(3, 1)
    _copy_sb3_weights(model, trained)
    for ours, theirs in zip(policy.parameters(), trained.parameters()):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


class RecordObs(gym.Wrapper):
    """Keeps every observation that ``step`` returns, before any autoreset replaces it."""

    def __init__(self, env):
        super().__init__(env)
        self.stepped = []

    def step(self, action):
        result = self.env.step(action)
        self.stepped.append(result[0])
        return result


def test_rollout_bootstraps_time_limit_truncations_from_the_final_observation():
    envs = _vector(lambda: RecordObs(gym.make("Pendulum-v1", max_episode_steps=5)), num_envs=2)
    policy = ActorCritic(3, 1)
    rollout = _Rollout.allocate(8, 2, 3, 1)
    rollout.obs[8], _ = envs.reset(seed=0)
    _collect(envs, policy, rollout, torch.Generator().manual_seed(0))
    assert rollout.truncations.tolist() == [[False, False]] * 4 + [[True, True]] + [[False, False]] * 3
    assert rollout.dones[5].all() and not rollout.dones[1:5].any()
    final_obs = torch.as_tensor(np.stack([env.stepped[4] for env in envs.envs]))
    with torch.no_grad():
        torch.testing.assert_close(rollout.final_values[4], policy.value(final_obs))
        torch.testing.assert_close(rollout.values[5], policy.value(torch.as_tensor(rollout.obs[5])))
    assert not torch.allclose(rollout.final_values[4], rollout.values[5])  # not the reset observation


def test_train_ppo_reports_metrics_with_architecture_names():
    envs = _vector(lambda: gym.make("Pendulum-v1"), num_envs=2)
    result = train_ppo(envs, PPOConfig(total_timesteps=512, num_steps=128, minibatch_size=32, update_epochs=2))
    assert len(result.history) == 2
    expected = {
        "global_step", "env/return", "env/episode_len", "train/actor/policy_loss", "train/actor/approx_kl",
        "train/actor/clip_fraction", "train/actor/entropy_loss", "train/critic/value_loss",
        "train/critic/value_clip_ratio", "train/critic/explained_variance", "time/sps",
    }
    assert set(result.history[0]) == expected
    assert result.history[-1]["global_step"] == 512
    assert all(np.isfinite(result.history[-1][name]) for name in expected - {"env/return", "env/episode_len"})


@pytest.mark.slow
def test_ppo_learns_toy_reach():
    envs = _vector(lambda: gym.wrappers.TimeLimit(ToyReach(), max_episode_steps=16), num_envs=8)
    config = PPOConfig(total_timesteps=8192, num_steps=64, minibatch_size=128, update_epochs=4,
                       learning_rate=3e-3, gamma=0.9, seed=1)
    history = train_ppo(envs, config).history
    assert history[-1]["env/return"] > 0.5 * history[0]["env/return"]  # returns are negative


def test_train_ppo_rejects_next_step_autoreset():
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1")])
    with pytest.raises(ValueError, match="autoreset_mode=AutoresetMode.SAME_STEP"):
        train_ppo(envs, PPOConfig(total_timesteps=8, num_steps=8, minibatch_size=8))


def test_train_ppo_rejects_discrete_actions():
    envs = _vector(lambda: gym.make("CartPole-v1"), num_envs=1)
    with pytest.raises(ValueError, match="flat Box action space"):
        train_ppo(envs, PPOConfig(total_timesteps=8, num_steps=8, minibatch_size=8))


def test_config_rejects_bad_sizes():
    with pytest.raises(ValueError, match="minibatch_size >= 2"):
        PPOConfig(minibatch_size=1)
    envs = _vector(lambda: gym.make("Pendulum-v1"), num_envs=1)
    with pytest.raises(ValueError, match="minibatch_size must be at most num_steps"):
        train_ppo(envs, PPOConfig(total_timesteps=8, num_steps=8, minibatch_size=16))
