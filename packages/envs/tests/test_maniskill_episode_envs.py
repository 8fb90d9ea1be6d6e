"""ManiSkill's episode envs (one batched simulator, the trainer's env on a GPU) plays exactly what the
EpisodeEnvs of single envs plays: checked on ManiSkill's CPU backend, which holds one sub-scene."""

import numpy as np
import pytest
import torch

from vlarl_envs.testing import require_simulator

pytestmark = pytest.mark.sim
require_simulator("mani_skill")

import vlarl_envs  # noqa: F401  (registers the ids)
from vlarl_envs.maniskill.episode_envs import ManiSkillEpisodeEnvs, make_maniskill_episode_envs
from vlarl_envs.vector import EpisodeEnvs, make_episode_envs

PUT_ON_PLATE = "vlarl/ManiSkill-PutOnPlate-v0"
KWARGS = {"image_size": 32, "horizon": 7, "action_chunk": 3, "reward_mode": "shaped"}


def batched(**kwargs):
    return ManiSkillEpisodeEnvs("PutOnPlate", PUT_ON_PLATE, 1, sim_backend="cpu", **{**KWARGS, **kwargs})


@pytest.mark.parametrize("options", [{"episode_id": 3, "split": "train"}, {"episode_id": 3, "split": "vision"}])
def test_it_plays_what_single_envs_play_up_to_an_episode_that_ends_inside_a_chunk(options):
    """A horizon of 7 in chunks of 3 ends the episode at the first sub-step of the third chunk; a fourth
    chunk finds the env done and changes nothing."""
    one, reference = batched(), make_episode_envs(PUT_ON_PLATE, 1, **KWARGS)
    first, info = one.reset([options])
    expected, expected_info = reference.reset([options])
    assert (
        info[0]["episode_id"] == expected_info[0]["episode_id"]
        and info[0]["variation"] == expected_info[0]["variation"]
    )
    compare(first, expected)
    actions = np.random.default_rng(0).uniform(-1, 1, (4, 1, 3, 7)).astype(np.float32)
    for chunk in actions:
        batch, rewards, done, infos = one.step(chunk)
        expected, expected_rewards, expected_done, expected_infos = reference.step(chunk)
        compare(batch, expected)
        np.testing.assert_allclose(rewards, expected_rewards, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(done, expected_done)
        assert infos[0].keys() == expected_infos[0].keys()
        for key in ("success", "chunk_steps", "chunk_dones", "episode"):
            if key in expected_infos[0]:
                assert_same(infos[0][key], expected_infos[0][key])
    assert done[0] and infos == [{}]
    assert_same(one.episode_statistics(), reference.episode_statistics())
    assert one.episode_statistics()[0]["episode_len"] == 3
    one.close()
    reference.close()


def test_episode_statistics_of_an_unfinished_episode_and_bad_actions():
    one, reference = batched(), make_episode_envs(PUT_ON_PLATE, 1, **KWARGS)
    for vec in (one, reference):
        vec.reset([{"episode_id": 11}])
        vec.step(np.zeros((1, 3, 7), np.float32))
    assert_same(one.episode_statistics(), reference.episode_statistics())
    with pytest.raises(ValueError, match=r"expected actions of shape \(1, 3, 7\), got shape \(1, 7\)"):
        one.step(np.zeros((1, 7), np.float32))
    with pytest.raises(ValueError, match="expected finite actions"):
        one.step(np.full((1, 3, 7), np.nan, np.float32))
    with pytest.raises(ValueError, match="expected reset options for each of 1 envs, got 2"):
        one.reset([{}, {}])
    one.reset([{"episode_id": 11}], idle=[True])
    _, rewards, done, infos = one.step(np.zeros((1, 3, 7), np.float32))
    assert done.tolist() == [True] and infos == [{}] and one.episode_statistics()[0]["episode_len"] == 0
    one.close()
    reference.close()


def test_without_cuda_the_family_steps_single_envs():
    from vlarl_envs import family_of

    if torch.cuda.is_available():
        pytest.skip("the family batches on the GPU where CUDA is present")
    for make in (family_of(PUT_ON_PLATE).make_episode_envs, make_maniskill_episode_envs):
        vec = make(PUT_ON_PLATE, 1, obs_mode="state")
        assert isinstance(vec, EpisodeEnvs)
        vec.close()


def compare(batch, expected):
    assert batch.keys() == expected.keys()
    for key, value in expected.items():
        if key == "task_description":
            assert batch[key] == value
        else:
            np.testing.assert_array_equal(batch[key], value, err_msg=key)


def assert_same(value, expected):
    if isinstance(expected, dict):
        assert value.keys() == expected.keys()
        for key in expected:
            assert_same(value[key], expected[key])
    elif isinstance(expected, list):
        assert len(value) == len(expected)
        for item, expected_item in zip(value, expected):
            assert_same(item, expected_item)
    else:
        np.testing.assert_allclose(np.asarray(value, dtype=float), np.asarray(expected, dtype=float), rtol=0, atol=1e-6)


@pytest.mark.gpu
def test_on_a_gpu_eight_sub_scenes_play_the_expert_and_stop_at_their_ends():
    """ManiSkill's GPU simulation: the scripted expert on each sub-scene's privileged state succeeds in
    most episodes, and a finished sub-scene keeps its last observation while the others play on."""
    from vlarl_envs.maniskill import put_on_plate_expert

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    vec = make_maniskill_episode_envs(PUT_ON_PLATE, 8, image_size=64)
    assert isinstance(vec, ManiSkillEpisodeEnvs)
    batch, _ = vec.reset([{"episode_id": episode, "split": "train"} for episode in range(8)])
    experts = [put_on_plate_expert() for _ in range(8)]
    done = np.zeros(8, bool)
    while not done.all():
        singles = [{key: value[env] for key, value in batch.items()} for env in range(8)]
        actions = np.stack([experts[env](singles[env]) for env in range(8)])
        previous = batch
        batch, _, now_done, _ = vec.step(actions)
        for env in np.flatnonzero(done):
            np.testing.assert_array_equal(batch["main_images"][env], previous["main_images"][env])
        done = now_done
    statistics = vec.episode_statistics()
    assert np.mean([episode["success_once"] for episode in statistics]) >= 0.75
    vec.close()
