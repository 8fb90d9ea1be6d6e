"""Batched ManiSkill behind the VectorEnv contract: subprocesses on CPU, one GPU-simulated env with CUDA."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from vlarl_envs.testing import require_simulator

require_simulator("mani_skill")

import vlarl_envs  # noqa: F401  (registers the ids)
from vlarl_envs.maniskill import ManiSkillBatchedEnv
from vlarl_envs.maniskill.put_on_plate import make_episode

pytestmark = pytest.mark.sim

PICK_CUBE = "vlarl/ManiSkill-PickCube-v1"
PUT_ON_PLATE = "vlarl/ManiSkill-PutOnPlate-v0"


@pytest.fixture(scope="module")
def batched_cpu():
    """The batched env on ManiSkill's CPU backend, where one sub-scene is the limit: it runs
    the same code as the GPU path, minus the device."""
    env = ManiSkillBatchedEnv("PutOnPlate", PUT_ON_PLATE, 1, obs_mode="state", horizon=3, sim_backend="cpu")
    yield env
    env.close()


def test_batched_reset_matches_the_single_env(batched_cpu):
    obs, info = batched_cpu.reset(options={"episode_id": [6], "split": "semantic"})
    assert info["episode_id"].tolist() == [6]
    assert obs["task_description"] == (make_episode("semantic", 6).instruction,)
    assert tuple(obs["states"].shape) == (1, 8) and tuple(obs["privileged_state"].shape) == (1, 41)
    single = gym.make(PUT_ON_PLATE, obs_mode="state")
    expected, _ = single.reset(options={"episode_id": 6, "split": "semantic"})
    np.testing.assert_allclose(obs["privileged_state"][0].numpy(), expected["privileged_state"], atol=1e-6)
    np.testing.assert_allclose(obs["states"][0].numpy(), expected["states"], atol=1e-6)
    single.close()


def test_batched_same_step_autoreset_with_statistics(batched_cpu):
    batched_cpu.reset(seed=0, options={"episode_id": 2})
    actions = np.zeros((1, 7), np.float32)
    for _ in range(3):
        obs, rewards, terminated, truncated, info = batched_cpu.step(actions)
        assert rewards.dtype.is_floating_point and tuple(rewards.shape) == (1,)
    assert truncated.tolist() == [True] and terminated.tolist() == [False]
    assert info["_final_obs"].tolist() == [True] and info["_final_info"].tolist() == [True]
    episode = info["final_info"]["episode"]
    assert episode["episode_len"].tolist() == [3] and episode["success_once"].tolist() == [False]
    assert episode["reward"].tolist() == pytest.approx((episode["return"] / 3).tolist())
    final_target = info["final_obs"][0]["privileged_state"]
    assert not np.allclose(final_target.numpy(), obs["privileged_state"][0].numpy())
    new_episode = make_episode("train", int(info["episode_id"][0]))
    assert obs["task_description"] == (new_episode.instruction,)
    truncations = [batched_cpu.step(actions)[3].tolist() for _ in range(3)]
    assert truncations == [[False], [False], [True]]  # the counters restarted with the new episode


def test_batched_shaped_and_progress_rewards_pay_the_rise_of_the_dense_reward():
    """Sub-step by sub-step, across an autoreset: the potential is the dense reward, which ``shaped``
    takes as 0 at the episode's end and ``progress`` does not."""
    actions = np.random.default_rng(0).uniform(-1, 1, (4, 1, 2, 7)).astype(np.float32)
    chunk_rewards = {}
    for mode in ("dense", "shaped", "progress"):
        env = ManiSkillBatchedEnv(
            "PickCube", PICK_CUBE, 1, obs_mode="state", horizon=6, action_chunk=2, reward_mode=mode,
            sim_backend="cpu", seed=0,
        )
        env.reset(options={"episode_id": 0})
        steps = [env.step(chunk) for chunk in actions]
        assert [bool(step[3][0]) for step in steps] == [False, False, True, False]
        assert not any(bool(step[4]["success"][0]) for step in steps)
        chunk_rewards[mode] = np.concatenate([step[4]["chunk_rewards"][0].cpu().numpy() for step in steps])
        env.close()
    assert np.ptp(chunk_rewards["dense"]) > 0
    potential = chunk_rewards["dense"].copy()
    potential[5] = 0.0
    assert chunk_rewards["shaped"] == pytest.approx(np.diff(potential, prepend=0.0), abs=1e-6)
    assert chunk_rewards["shaped"][:6].sum() == pytest.approx(0.0, abs=1e-6)
    progress_rewards = np.diff(chunk_rewards["dense"], prepend=0.0)
    progress_rewards[6] = chunk_rewards["dense"][6]  # the episode after the autoreset starts from 0
    assert chunk_rewards["progress"] == pytest.approx(progress_rewards, abs=1e-6)
    assert chunk_rewards["progress"][:6].sum() == pytest.approx(chunk_rewards["dense"][5], abs=1e-6)


def test_batched_action_chunks_and_bad_actions():
    env = ManiSkillBatchedEnv("PickCube", PICK_CUBE, 1, obs_mode="state", horizon=3, action_chunk=2,
                              reward_mode="dense", sim_backend="cpu")
    assert env.action_space.shape == (1, 2, 7)
    env.reset(options={"episode_id": 0})
    _, rewards, _, _, info = env.step(np.zeros((1, 2, 7), np.float32))
    assert (
        info["chunk_steps"].tolist() == [2]
        and float(rewards[0]) == pytest.approx(float(info["chunk_rewards"].sum()))
    )
    _, _, _, truncated, info = env.step(np.zeros((1, 2, 7), np.float32))
    assert truncated.tolist() == [True] and info["chunk_steps"].tolist() == [1]
    assert info["chunk_dones"].tolist() == [[True, False]]
    with pytest.raises(
        ValueError, match=r"vlarl/ManiSkill-PickCube-v1: expected actions of shape \(1, 2, 7\), got shape \(1, 7\)"
    ):
        env.step(np.zeros((1, 7), np.float32))
    with pytest.raises(ValueError, match="finite"):
        env.step(np.full((1, 2, 7), np.inf, np.float32))
    with pytest.raises(ValueError, match="dtype torch.int64"):
        env.step(np.zeros((1, 2, 7), np.int64))
    with pytest.raises(ValueError, match="expected 1 episode ids, got 2"):
        env.reset(options={"episode_id": [0, 1]})
    env.close()


def test_disabled_autoreset_holds_a_finished_env_until_the_reset_mask_restarts_it():
    """gymnasium's DISABLED mode, which the trainer's env workers step: a finished sub-env earns nothing,
    keeps its last observation and its statistics, and plays again once ``reset_mask`` restarts it."""
    env = ManiSkillBatchedEnv("PickCube", PICK_CUBE, 1, obs_mode="state", horizon=2, reward_mode="dense",
                              sim_backend="cpu", autoreset_mode="Disabled")
    assert env.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    env.reset(options={"episode_id": 5})
    actions = np.full((1, 7), 0.5, np.float32)
    env.step(actions)
    last, rewards, terminated, truncated, info = env.step(actions)
    assert truncated.tolist() == [True] and env.episode_over.tolist() == [True]
    assert info["_episode"].tolist() == [True] and info["episode"]["episode_len"].tolist() == [2]
    statistics = env.episode_statistics()
    held, rewards, terminated, truncated, info = env.step(actions)
    assert rewards.tolist() == [0.0] and not truncated.any() and "episode" not in info
    np.testing.assert_array_equal(held["privileged_state"].numpy(), last["privileged_state"].numpy())
    assert env.episode_statistics() == statistics and statistics[0]["episode_len"] == 2
    env.reset(options={"reset_mask": np.array([True]), "episode_id": 7})
    assert env.episode_over.tolist() == [False] and env.episode_infos[0]["episode_id"] == 7
    assert env.step(actions)[1].tolist() != [0.0] and env.episode_statistics()[0]["episode_len"] == 1
    env.close()


def test_bad_autoreset_modes_and_reset_masks(batched_cpu):
    with pytest.raises(ValueError, match=r"autoreset_mode must be one of \['SameStep', 'Disabled'\], got 'NextStep'"):
        ManiSkillBatchedEnv("PickCube", PICK_CUBE, 1, sim_backend="cpu", autoreset_mode="NextStep")
    with pytest.raises(ValueError, match="ManiSkill-PickCube-v1: wrist_camera=False is not supported: ManiSkill "
                                         "renders the hand camera of its 'panda_wristcam' robot"):
        ManiSkillBatchedEnv("PickCube", PICK_CUBE, 1, sim_backend="cpu", wrist_camera=False)
    with pytest.raises(ValueError, match="'idle' needs autoreset_mode DISABLED, got SameStep"):
        batched_cpu.reset(options={"idle": np.array([True])})
    with pytest.raises(ValueError, match="reset_mask restarts no sub-env"):
        batched_cpu.reset(options={"reset_mask": np.array([False])})
    with pytest.raises(ValueError, match=r"'reset_mask' must be a bool array of shape \(1,\), got dtype int64"):
        batched_cpu.reset(options={"reset_mask": np.array([1])})


@pytest.mark.slow
def test_make_vec_picks_subprocesses_without_cuda():
    import torch
    from gymnasium.vector import AsyncVectorEnv

    vec = gym.make_vec(PICK_CUBE, num_envs=2, obs_mode="state", horizon=3)
    assert isinstance(vec, ManiSkillBatchedEnv if torch.cuda.is_available() else AsyncVectorEnv)
    obs, _ = vec.reset(seed=0)
    assert obs["states"].shape == (2, 8) and len(obs["task_description"]) == 2
    for _ in range(3):
        obs, rewards, terminated, truncated, infos = vec.step(np.zeros((2, 7), np.float32))
    assert np.asarray(truncated).all()
    assert infos["_final_obs"].all()
    assert np.asarray(infos["final_info"]["episode"]["episode_len"]).tolist() == [3, 3]
    vec.close()


@pytest.mark.gpu
def test_gpu_batched_put_on_plate_keeps_tensors_on_the_device():
    import torch

    vec = gym.make_vec(PUT_ON_PLATE, num_envs=4, image_size=64, horizon=4, action_chunk=2)
    assert isinstance(vec, ManiSkillBatchedEnv)
    obs, _ = vec.reset(options={"episode_id": [0, 1, 2, 3]})
    assert obs["main_images"].device.type == "cuda" and tuple(obs["main_images"].shape) == (4, 64, 64, 3)
    assert obs["wrist_images"].dtype == torch.uint8 and tuple(obs["states"].shape) == (4, 8)
    assert obs["task_description"] == tuple(make_episode("train", k).instruction for k in range(4))
    first = obs["privileged_state"].clone()
    again, _ = vec.reset(options={"episode_id": [0, 1, 2, 3]})
    torch.testing.assert_close(again["privileged_state"], first)
    actions = torch.zeros((4, 2, 7), device="cuda")
    for _ in range(2):
        obs, rewards, terminated, truncated, info = vec.step(actions)
    assert rewards.device.type == "cuda" and truncated.all()
    assert info["_final_obs"].all() and info["final_obs"][3]["main_images"].device.type == "cuda"
    assert info["final_info"]["episode"]["episode_len"].tolist() == [2, 2, 2, 2]
    vec.close()
