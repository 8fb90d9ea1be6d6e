import imageio.v2 as imageio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vlarl_envs.wrappers import ActionChunk, EpisodeStatistics, RecordVideo, RewardMode, episode_figures

ZERO = np.zeros(2, np.float32)


def run_episode(env, action=ZERO):
    env.reset(seed=0)
    rewards, infos = [], []
    while True:
        _, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        infos.append(info)
        if terminated or truncated:
            return rewards, infos


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("sparse", [0, 0, 1, 0, 0, 0]),
        ("only_at_end", [0, 0, 0, 0, 0, 1]),
        ("dense", [1, 2, 3, 4, 5, 6]),
        ("shaped", [1, 1, 2, 1, 1, -5]),
        ("progress", [1, 1, 2, 1, 1, 1]),
    ],
)
def test_reward_modes(mode, expected, counter_env):
    rewards, _ = run_episode(RewardMode(counter_env(), mode))
    assert rewards == expected


def test_only_at_end_pays_nothing_for_a_failed_end(counter_env):
    rewards, _ = run_episode(RewardMode(counter_env(success_from=99), "only_at_end"))
    assert rewards == [0] * 6


def test_unknown_reward_mode(counter_env):
    with pytest.raises(ValueError, match="sparse.*got 'potential'"):
        RewardMode(counter_env(), "potential")


def test_rlinf_reward_names_mean_ours(counter_env):
    assert (run_episode(RewardMode(counter_env(), "only_success"))[0]
            == run_episode(RewardMode(counter_env(), "sparse"))[0])
    assert RewardMode(counter_env(), "raw").mode == "dense"


@settings(max_examples=60, deadline=None)
@given(mode=st.sampled_from(["sparse", "only_at_end", "dense", "shaped", "progress"]),
       steps=st.lists(st.tuples(st.booleans(), st.floats(0, 1, width=32), st.booleans()), min_size=1, max_size=12))
def test_step_reward_on_a_torch_batch_equals_step_reward_env_by_env(mode, steps):
    """The batched ManiSkill env's rewards (torch, all envs at once) are the wrapper's (Python scalars, one env)."""
    import torch

    from vlarl_envs.wrappers.reward_mode import step_reward

    success = torch.tensor([s for s, _, _ in steps])
    dense = torch.tensor([d for _, d, _ in steps])
    done = torch.tensor([e for _, _, e in steps])
    succeeded = torch.roll(success, 1) & (torch.arange(len(steps)) % 2 == 0)
    potential = dense.flip(0)
    batch, batch_next = step_reward(mode, success, succeeded, dense, done, potential)
    for index in range(len(steps)):
        one, one_next = step_reward(mode, bool(success[index]), bool(succeeded[index]),
                                    float(dense[index]), bool(done[index]),
                                    float(potential[index]))
        assert float(batch[index]) == pytest.approx(float(one), abs=1e-6)
        assert float(batch_next[index]) == pytest.approx(float(one_next), abs=1e-6)


def test_shaped_needs_a_positive_dense_reward_max(counter_env):
    with pytest.raises(ValueError, match="dense_reward_max must be > 0, got 0"):
        RewardMode(counter_env(), "shaped", dense_reward_max=0)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    dense=st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=12),
    success_flags=st.lists(st.booleans(), min_size=12, max_size=12),
    dense_reward_max=st.floats(0.5, 20),
    terminate_on_success=st.booleans(),
)
def test_shaped_and_progress_returns_against_the_sparse_return(
    counter_env, dense, success_flags, dense_reward_max, terminate_on_success
):
    """Over any episode, ended by success or by the horizon, the shaping terms telescope: to zero
    under ``shaped``, to the scaled dense reward of the last step under ``progress``."""

    class Scripted(counter_env):
        def step(self, action):
            obs, _, _, _, _ = super().step(action)
            success = success_flags[self.steps - 1]
            terminated = success and terminate_on_success
            truncated = self.steps >= len(dense) and not terminated
            return obs, dense[self.steps - 1], terminated, truncated, {"success": success}

    returns = {}
    for mode in ("sparse", "shaped", "progress"):
        rewards, _ = run_episode(RewardMode(Scripted(horizon=len(dense)), mode, dense_reward_max))
        returns[mode] = sum(rewards)
    final_potential = dense[len(rewards) - 1] / dense_reward_max
    assert returns["shaped"] == pytest.approx(returns["sparse"], abs=1e-9)
    assert returns["progress"] == pytest.approx(returns["sparse"] + final_potential, abs=1e-9)


def test_progress_pays_a_failed_episode_for_how_far_it_got(counter_env):
    rewards, _ = run_episode(RewardMode(counter_env(success_from=99), "progress", dense_reward_max=10))
    assert rewards == pytest.approx([0.1] * 6) and sum(rewards) == pytest.approx(0.6)


def test_shaped_pays_progress_before_success(counter_env):
    """Each step before success is paid the rise of the scaled dense reward."""
    rewards, _ = run_episode(RewardMode(counter_env(success_from=99), "shaped", dense_reward_max=10))
    assert rewards[:5] == pytest.approx([0.1] * 5) and rewards[5] == pytest.approx(-0.5)


def test_action_chunk_runs_substeps_and_stops_at_done(counter_env):
    base = counter_env(success_from=3, terminate_on_success=True)
    env = ActionChunk(RewardMode(base, "dense"), chunk=2)
    chunk = np.stack([np.full(2, 0.1, np.float32), np.full(2, 0.2, np.float32)])
    env.reset()
    _, reward, terminated, _, info = env.step(chunk)
    assert reward == 1 + 2 and not terminated and info["chunk_steps"] == 2
    np.testing.assert_allclose(info["chunk_rewards"], [1, 2])
    _, reward, terminated, _, info = env.step(chunk)
    assert terminated and info["chunk_steps"] == 1 and reward == 3
    np.testing.assert_array_equal(info["chunk_dones"], [True, False])
    np.testing.assert_allclose(info["chunk_rewards"], [3, 0])
    np.testing.assert_allclose(base.received[0], 0.1)
    np.testing.assert_allclose(base.received[1], 0.2)
    with pytest.raises(ValueError, match=r"\(2, 2\).*\(2,\)"):
        env.step(np.zeros(2, np.float32))


@pytest.mark.parametrize("mode", ["sparse", "only_at_end"])
def test_a_replan_starts_a_new_goal_that_pays_again_and_ends_the_chunk(mode, counter_env):
    """A CALVIN chain's task switch: each goal's success pays, and a chunk stops at the switch."""
    goals = counter_env(success_from=2, horizon=6, replan_at=(2, 4))
    assert run_episode(RewardMode(goals, mode))[0] == [0, 1, 0, 1, 0, 1]
    env = EpisodeStatistics(ActionChunk(RewardMode(counter_env(success_from=2, horizon=6, replan_at=(2, 4)), mode), 3))
    env.reset()
    steps, rewards = [], []
    for _ in range(3):
        *_, reward, _, truncated, info = env.step(np.zeros((3, 2), np.float32))
        steps.append(info["chunk_steps"])
        rewards.append(reward)
    assert steps == [2, 2, 2] and rewards == [1, 1, 1] and truncated and info["episode"]["return"] == 3


def test_episode_statistics_success_once_differs_from_at_end(counter_env):
    class Flicker(counter_env):
        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs, reward, terminated, truncated, {"success": self.steps == 3}

    env = EpisodeStatistics(RewardMode(Flicker(), "sparse"))
    _, infos = run_episode(env)
    assert all("episode" not in info for info in infos[:-1])
    assert infos[-1]["episode"] == {"success_once": True, "success_at_end": False, "return": 1.0, "episode_len": 6,
                                    "reward": 1.0 / 6}
    env.reset()
    env.step(np.zeros(2, np.float32))
    assert env.get_wrapper_attr("episode_so_far")() == {"success_once": False, "success_at_end": False, "return": 0.0,
                                                        "episode_len": 1, "reward": 0.0}


def test_record_video_writes_readable_mp4_and_never_overwrites(tmp_path, counter_env):
    env = RecordVideo(RewardMode(counter_env(horizon=5), "sparse"), tmp_path, fps=5)
    run_episode(env)
    run_episode(env)
    paths = sorted(tmp_path.glob("*.mp4"))
    assert [p.name for p in paths] == ["episode-00000.mp4", "episode-00001.mp4"]
    frames = imageio.mimread(paths[0])
    assert len(frames) == 5 + 1  # the reset frame and one per step
    assert frames[0].shape[1] == 256
    # the first step's image (value 10) is brighter than the reset image (value 0) at the top
    assert frames[1][:100].mean() > frames[0][:100].mean()
    again = RecordVideo(RewardMode(counter_env(horizon=5), "sparse"), tmp_path)
    run_episode(again)
    assert again.written == [tmp_path / "episode-00002.mp4"]
    assert not list(tmp_path.glob(".*partial*"))


def test_record_video_leaves_a_file_another_writer_made_meanwhile(tmp_path, counter_env):
    env = RecordVideo(RewardMode(counter_env(horizon=3), "sparse"), tmp_path)
    (tmp_path / "episode-00000.mp4").write_bytes(b"another env's video")
    run_episode(env)
    assert env.written == [tmp_path / "episode-00001.mp4"] and len(imageio.mimread(env.written[0])) == 4
    assert (tmp_path / "episode-00000.mp4").read_bytes() == b"another env's video"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episode-00000.mp4", "episode-00001.mp4"]


# An episode of no steps has earned nothing.
EPISODE_COUNTERS = st.tuples(st.floats(-50, 50), st.integers(0, 400), st.booleans(), st.booleans()).map(
    lambda counters: (counters[0] if counters[1] else 0.0, *counters[1:]))


@given(st.lists(EPISODE_COUNTERS, min_size=1, max_size=16))
def test_episode_figures_of_a_batch_are_each_episodes_own(episodes):
    """The batched envs' figures (torch, numpy) equal the single env's (Python), episode by episode."""
    import torch

    returns, lengths, once, at_end = (list(column) for column in zip(*episodes))
    for to_array in (torch.tensor, np.array):
        batch = episode_figures(to_array(returns), to_array(lengths), to_array(once), to_array(at_end))
        for index, episode in enumerate(episodes):
            single = episode_figures(*episode)
            assert single["reward"] == (episode[0] / episode[1] if episode[1] else 0.0)
            for key, value in single.items():
                assert float(batch[key][index]) == pytest.approx(float(value), rel=1e-6, abs=1e-6), key
