"""GSEnv in RL rollouts: a chunk renders once, and the family's episode envs render all its
envs' images of a step in one rasterizer call yet returns what the default per-env one returns."""

import gymnasium as gym
import numpy as np
import pytest

from vlarl_envs.testing import require_simulator

require_simulator("mani_skill")

import vlarl_envs
from vlarl_envs.gsenv import GSENV_ID
from vlarl_envs.gsenv.vector import SplatEpisodeEnvs
from vlarl_envs.vector import EpisodeEnvs

pytestmark = pytest.mark.sim
TINY = (48, 64)


def count_calls(owner, name: str) -> list:
    """Patch ``owner.name`` to record each call's first argument's leading size (or 1) before running it."""
    calls, original = [], getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(args[0].shape[0] if args and hasattr(args[0], "shape") else 1)
        return original(*args, **kwargs)

    setattr(owner, name, counted)
    return calls


@pytest.mark.parametrize(
    "renderer, split, episode_id",
    [
        ("gaussian", "train", 0),
        ("gaussian", "robustness", 1),
        pytest.param("maniskill", "test", 0, marks=pytest.mark.slow),
    ],
)
def test_a_chunk_renders_only_its_last_observation_and_matches_single_steps(renderer, split, episode_id):
    """Within a chunk the camera renders once (splats or ManiSkill's), and the chunk's observation is
    the one single steps give."""
    chunked = gym.make(GSENV_ID, image_size=TINY, renderer=renderer, action_chunk=3, render_mode="rgb_array")
    single = gym.make(GSENV_ID, image_size=TINY, renderer=renderer)
    simulator = chunked.unwrapped
    options = {"episode_id": episode_id, "split": split}
    chunked.reset(options=options)
    single.reset(options=options)
    if renderer == "gaussian":  # the look's renderer has cached its table by now
        renders = count_calls(simulator.splat_renderer.rasterizer, "rasterize")
    else:
        renders = count_calls(simulator.task, "_get_obs_sensor_data")
    actions = np.random.default_rng(0).uniform(-1, 1, (2, 3, 7)).astype(np.float32)
    for chunk in actions:
        renders.clear()
        observation, *_ = chunked.step(chunk)
        assert renders == [1]
        expected = [single.step(action) for action in chunk][-1][0]
        for key in ("main_images", "states", "privileged_state"):
            np.testing.assert_array_equal(observation[key], expected[key], err_msg=key)
        np.testing.assert_array_equal(chunked.render(), expected["main_images"])
    assert not simulator.defer_images
    chunked.close()
    single.close()


def make_envs(horizons, shared: bool):
    """GSEnvs of the given horizons (dense reward, chunks of 2); with ``shared`` the others share the
    first's splat renderers, as ``make_gsenv_episode_envs`` builds them."""
    kwargs = dict(image_size=TINY, action_chunk=2, reward_mode="dense", render_mode="rgb_array")
    first = gym.make(GSENV_ID, horizon=horizons[0], **kwargs)
    renderers = first.unwrapped.look_renderers if shared else None
    if shared:
        renderers.keep = len(horizons)
    return [first, *(gym.make(GSENV_ID, horizon=horizon, splat_renderers=renderers, **kwargs)
                     for horizon in horizons[1:])]


def assert_same_batch(got: dict, expected: dict) -> None:
    assert list(got) == list(expected)
    assert got["task_description"] == expected["task_description"]
    for key in ("states", "privileged_state"):
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
    difference = np.abs(got["main_images"].astype(int) - expected["main_images"])
    assert difference.max() <= 1 and (difference > 0).mean() < 1e-3, (difference.max(), (difference > 0).mean())


def test_the_episode_vec_renders_each_step_in_one_call_and_matches_single_envs():
    """Train and robustness episodes (camera, appearance, background looks), one env ending early:
    the same observations, rewards, dones, infos and statistics as the per-env EpisodeEnvs."""
    horizons = [2, 5, 5, 5]
    default = EpisodeEnvs(make_envs(horizons, shared=False))
    batched = SplatEpisodeEnvs(make_envs(horizons, shared=True))
    rasterizer = batched.simulators[0].splat_renderer.rasterizer
    assert all(simulator.look_renderers is batched.simulators[0].look_renderers for simulator in batched.simulators)
    options = [{"split": "train", "episode_id": 3}] + [{"split": "robustness", "episode_id": k} for k in (0, 1, 2)]
    expected, expected_infos = default.reset(options)
    calls = count_calls(rasterizer, "rasterize")
    got, infos = batched.reset(options)
    assert [info["variation"] for info in infos] == ["none", "camera", "appearance", "background"]
    assert calls.count(4) == 1 and set(calls) == {1, 4}  # the bodies in one call; each look's table once
    assert_same_batch(got, expected)
    np.testing.assert_equal(infos, expected_infos)
    actions = np.random.default_rng(0).uniform(-1, 1, (4, 4, 2, 7)).astype(np.float32)
    for step, chunk in enumerate(actions):
        calls.clear()
        expected, expected_rewards, expected_done, expected_infos = default.step(chunk)
        got, rewards, done, infos = batched.step(chunk)
        assert calls == ([4], [3], [3], [])[step]  # env 0 ends after its first chunk; no call once all ended
        assert_same_batch(got, expected)
        np.testing.assert_array_equal(rewards, expected_rewards)
        assert np.any(rewards != 0) or step == 3
        np.testing.assert_array_equal(done, expected_done)
        np.testing.assert_equal(infos, expected_infos)
        for index, env in enumerate(batched.envs):
            np.testing.assert_array_equal(env.render(), got["main_images"][index])
    assert done.all() and [env.unwrapped._elapsed for env in batched.envs] == horizons  # ended envs stopped
    np.testing.assert_equal(batched.episode_statistics(), default.episode_statistics())
    default.close()
    batched.close()


def test_the_family_builds_the_batched_vec_for_splat_images_only():
    family = vlarl_envs.family_of(GSENV_ID)
    vec = family.make_episode_envs(GSENV_ID, 2, image_size=TINY, action_chunk=2)
    assert isinstance(vec, SplatEpisodeEnvs)
    first, second = (env.unwrapped for env in vec.envs)
    assert second.look_renderers is first.look_renderers and first.look_renderers.keep >= 2
    batch, _ = vec.reset([{"episode_id": 0}, {"episode_id": 1}])
    assert batch["main_images"].shape == (2, *TINY, 3)
    with pytest.raises(ValueError, match="splat_renderers render 48x64 images, this env's image_size is 32x32"):
        gym.make(GSENV_ID, image_size=32, splat_renderers=first.look_renderers)
    vec.close()
    states = family.make_episode_envs(GSENV_ID, 2, obs_mode="state")
    assert type(states) is EpisodeEnvs
    states.close()
