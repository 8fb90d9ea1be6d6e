import imageio.v2 as imageio
import numpy as np
import pytest

from vlarl_envs.wrappers import ActionChunk, EpisodeStatistics, RecordVideo, RewardMode

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
    ],
)
def test_reward_modes(mode, expected, counter_env):
    rewards, _ = run_episode(RewardMode(counter_env(), mode))
    assert rewards == expected


def test_only_at_end_pays_nothing_for_a_failed_end(counter_env):
    rewards, _ = run_episode(RewardMode(counter_env(success_from=99), "only_at_end"))
    assert rewards == [0] * 6


def test_unknown_reward_mode(counter_env):
    with pytest.raises(ValueError, match="sparse"):
        RewardMode(counter_env(), "shaped")


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


def test_episode_statistics_success_once_differs_from_at_end(counter_env):
    class Flicker(counter_env):
        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs, reward, terminated, truncated, {"success": self.steps == 3}

    env = EpisodeStatistics(RewardMode(Flicker(), "sparse"))
    _, infos = run_episode(env)
    assert all("episode" not in info for info in infos[:-1])
    assert infos[-1]["episode"] == {"success_once": True, "success_at_end": False, "return": 1.0, "episode_len": 6}


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
