"""EpisodeEnvs: per-env reset options, no autoreset, an ended episode is no longer stepped,
statistics from each env's own info["episode"]."""

import numpy as np
import pytest

from vlarl_envs.vector import EpisodeEnvs, stack_observations
from vlarl_envs.wrappers import ActionChunk, EpisodeStatistics, RewardMode


def test_each_env_plays_one_episode_and_stops(counter_env):
    envs = [EpisodeStatistics(ActionChunk(RewardMode(counter_env(horizon=horizon, success_from=99), "dense"), 2))
            for horizon in (3, 6)]
    vec = EpisodeEnvs(envs)
    batch, infos = vec.reset([{}, {}])
    assert batch["states"].shape == (2, 1) and batch["task_description"] == ["count up", "count up"]
    actions = np.zeros((2, 2, 2), np.float32)
    steps = [vec.step(actions) for _ in range(4)]
    dones = [done.tolist() for _, _, done, _ in steps]
    assert dones == [[False, False], [True, False], [True, True], [True, True]]
    rewards = [rewards.tolist() for _, rewards, _, _ in steps]
    assert rewards == [[3.0, 3.0], [3.0, 7.0], [0.0, 11.0], [0.0, 0.0]]  # dense: the counter's value per sub-step
    assert steps[-1][0]["states"][:, 0].tolist() == [3.0, 6.0]  # an ended env keeps its last observation
    assert [env.unwrapped.steps for env in envs] == [3, 6]          # and is stepped no more
    assert steps[2][3][0] == {}
    assert [episode["return"] for episode in vec.episode_statistics()] == [6.0, 21.0]
    assert [episode["episode_len"] for episode in vec.episode_statistics()] == [2, 3]


def test_an_episode_still_running_reports_its_statistics_so_far(counter_env):
    vec = EpisodeEnvs([EpisodeStatistics(RewardMode(counter_env(horizon=50), "dense"))])
    vec.reset([{}])
    vec.step(np.zeros((1, 2), np.float32))
    assert vec.episode_statistics() == [{"success_once": False, "success_at_end": False, "return": 1.0,
                                         "episode_len": 1, "reward": 1.0}]
    with pytest.raises(ValueError, match="expected reset options for each of 1 envs, got 2"):
        vec.reset([{}, {}])


def test_an_idle_env_resets_but_plays_nothing(counter_env):
    envs = [EpisodeStatistics(RewardMode(counter_env(horizon=3), "dense")) for _ in range(2)]
    vec = EpisodeEnvs(envs)
    batch, _ = vec.reset([{}, {}], idle=[False, True])
    assert batch["states"].shape == (2, 1)
    _, rewards, done, infos = vec.step(np.zeros((2, 2), np.float32))
    assert done.tolist() == [False, True] and rewards.tolist() == [1.0, 0.0] and infos[1] == {}
    assert [env.unwrapped.steps for env in envs] == [1, 0]
    assert vec.episode_statistics()[1]["episode_len"] == 0
    vec.reset([{}, {}])
    assert vec.step(np.zeros((2, 2), np.float32))[2].tolist() == [False, False]
    with pytest.raises(ValueError, match="expected an idle flag for each of 2 envs, got 1"):
        vec.reset([{}, {}], idle=[True])


def test_stacked_observations_keep_instructions_as_a_list():
    batch = stack_observations([{"states": np.ones(2), "task_description": "a"},
                                {"states": np.zeros(2), "task_description": "b"}])
    assert batch["states"].shape == (2, 2) and batch["task_description"] == ["a", "b"]
