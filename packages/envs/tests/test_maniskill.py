"""ManiSkill3's own tasks under the vlarl contract. Needs the simulator (an error in CI when missing)."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from vlarl_envs.testing import assert_episode_ids_replay, require_simulator

require_simulator("mani_skill")

from vlarl_envs.maniskill import MANISKILL_INSTRUCTIONS, MANISKILL_TASKS, make_maniskill_env, pick_cube_expert
from vlarl_envs.maniskill.experts import PICK_CUBE_LAYOUT

pytestmark = pytest.mark.sim

PICK_CUBE = "vlarl/ManiSkill-PickCube-v1"
BUILTIN_TASKS = [task for task in MANISKILL_TASKS.values() if task.maniskill_id is not None]


@pytest.fixture(scope="module")
def rgb_env():
    """PickCube with both cameras at 64 px, shared by the tests that need images."""
    env = gym.make(PICK_CUBE, image_size=64, horizon=8)
    yield env
    env.close()


@pytest.fixture(scope="module")
def state_env():
    env = gym.make(PICK_CUBE, obs_mode="state")
    yield env
    env.close()


def test_required_tasks_are_registered_with_instructions():
    import mani_skill.envs  # noqa: F401
    from mani_skill.utils.registration import REGISTERED_ENVS

    required = {"PickCube", "PushCube", "PullCube", "StackCube", "PegInsertionSide", "PlugCharger", "PushT"}
    assert required <= set(MANISKILL_TASKS)
    for task in MANISKILL_TASKS.values():
        assert task.env_id in gym.registry
        if task.maniskill_id is not None:
            assert task.maniskill_id in REGISTERED_ENVS
            canonical = MANISKILL_INSTRUCTIONS.canonical(task.name)
            assert len(canonical.split()) >= 4 and canonical not in MANISKILL_INSTRUCTIONS.paraphrases(task.name)
            assert len(set(MANISKILL_INSTRUCTIONS.paraphrases(task.name))) == 3


def test_observation_contract(rgb_env):
    obs, info = rgb_env.reset(options={"episode_id": 2})
    assert info["episode_id"] == 2 and info["split"] == "train" and info["success"] is False
    assert obs["main_images"].shape == obs["wrist_images"].shape == (64, 64, 3)
    assert obs["main_images"].dtype == np.uint8
    assert not np.array_equal(obs["main_images"], obs["wrist_images"])
    assert obs["task_description"] == MANISKILL_INSTRUCTIONS.canonical("PickCube")
    qpos = rgb_env.unwrapped.simulator.agent.robot.get_qpos()[0].numpy()
    np.testing.assert_allclose(obs["states"], np.append(qpos[:7], qpos[7] + qpos[8]), atol=1e-6)
    obs, reward, terminated, truncated, info = rgb_env.step(np.zeros(7, np.float32))
    assert rgb_env.observation_space.contains(obs)
    assert isinstance(reward, float) and info["is_success"] == info["success"] is False


def test_main_image_is_upright(rgb_env):
    """The red cube lifted 15 cm appears higher in the image than the cube on the table."""
    simulator = rgb_env.unwrapped.simulator
    rows = []
    for height in (0.02, 0.17):
        rgb_env.reset(options={"episode_id": 0})
        pose = simulator.cube.pose.raw_pose.clone()
        pose[:, 2] = height
        simulator.cube.set_pose(pose)
        obs, *_ = rgb_env.step(np.zeros(7, np.float32))
        image = obs["main_images"].astype(int)
        red = (image[..., 0] > 120) & (image[..., 1] < 60) & (image[..., 2] < 60)
        assert red.sum() >= 3, "the cube is not visible"
        rows.append(np.nonzero(red)[0].mean())
    assert rows[1] < rows[0] - 3


def test_same_episode_id_replays_and_splits_differ(state_env):
    test = assert_episode_ids_replay(state_env)
    semantic, _ = state_env.reset(options={"episode_id": 7, "split": "semantic"})
    np.testing.assert_array_equal(test["privileged_state"], semantic["privileged_state"])
    assert semantic["task_description"] in MANISKILL_INSTRUCTIONS.paraphrases("PickCube")


def test_bad_input_names_maniskill_tasks_splits_and_controllers(state_env):
    """The contract's bad input is test_contract's; these are ManiSkill's own."""
    state_env.reset(seed=0)
    with pytest.raises(ValueError, match="unknown task 'PushCube'"):
        state_env.reset(options={"task": "PushCube"})
    with pytest.raises(ValueError, match=r"unknown split 'vision'.*\['train', 'test', 'semantic'\]"):
        state_env.reset(options={"split": "vision"})
    with pytest.raises(ValueError, match="unknown ManiSkill task 'OpenCabinetDrawer'"):
        make_maniskill_env(task="OpenCabinetDrawer")
    with pytest.raises(ValueError, match="unknown control_mode 'pd_ee_pose'"):
        gym.make(PICK_CUBE, control_mode="pd_ee_pose")
    with pytest.raises(ValueError, match="wrist_camera=False is not supported: ManiSkill renders the hand camera"):
        gym.make(PICK_CUBE, wrist_camera=False)


def test_end_effector_actions_move_the_tcp(state_env):
    obs, _ = state_env.reset(options={"episode_id": 0})
    start = obs["privileged_state"][PICK_CUBE_LAYOUT["tcp_pose"]][:3]
    for _ in range(3):
        obs, *_ = state_env.step(np.array([1, 0, 0, 0, 0, 0, 1], np.float32))
    moved = obs["privileged_state"][PICK_CUBE_LAYOUT["tcp_pose"]][:3] - start
    assert moved[0] > 0.05 and abs(moved[1]) < 0.02 and abs(moved[2]) < 0.02


def test_joint_control_is_selectable():
    env = gym.make(PICK_CUBE, obs_mode="state", control_mode="pd_joint_delta_pos")
    assert env.action_space.shape == (8,)
    obs, _ = env.reset(options={"episode_id": 0})
    action = np.zeros(8, np.float32)
    action[0] = 1.0
    for _ in range(3):
        moved, *_ = env.step(action)
    assert moved["states"][0] - obs["states"][0] > 0.05
    env.close()


def test_dense_reward_is_maniskills_normalized_reward():
    env = gym.make(PICK_CUBE, obs_mode="state", reward_mode="dense")
    env.reset(options={"episode_id": 0})
    rewards = [env.step(np.zeros(7, np.float32))[1] for _ in range(3)]
    assert all(0.0 < reward <= 1.0 for reward in rewards)
    env.close()


def test_video_of_a_state_episode_uses_the_render_camera(tmp_path):
    import imageio.v2 as imageio

    env = gym.make(PICK_CUBE, obs_mode="state", render_mode="rgb_array", image_size=48, horizon=4, video_dir=tmp_path)
    env.reset(options={"episode_id": 1})
    frame = env.render()
    assert frame.shape == (48, 48, 3) and frame.dtype == np.uint8 and frame.std() > 5
    done = False
    while not done:
        *_, terminated, truncated, _ = env.step(np.zeros(7, np.float32))
        done = terminated or truncated
    (video,) = tmp_path.glob("*.mp4")
    assert len(imageio.mimread(video)) == 1 + 4
    env.close()


def test_make_in_fresh_interpreter_without_import():
    code = (
        "import gymnasium as gym\n"
        "env = gym.make('vlarl_envs:vlarl/ManiSkill-PickCube-v1', obs_mode='state')\n"
        "obs, info = env.reset(seed=0)\n"
        "print(obs['task_description'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert MANISKILL_INSTRUCTIONS.canonical("PickCube") in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("task", BUILTIN_TASKS, ids=[task.name for task in BUILTIN_TASKS])
def test_check_env_every_task(task):
    env = gym.make(task.env_id, obs_mode="state", horizon=5)
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(options={"episode_id": 0})
    assert obs["states"].shape == ((8,) if task.gripper else (7,))
    assert info["task"] == task.name
    for _ in range(5):
        obs, _, terminated, truncated, info = env.step(env.action_space.sample())
    assert truncated or terminated
    assert set(info["episode"]) == {"success_once", "success_at_end", "return", "episode_len", "reward"}
    env.close()


@pytest.mark.slow
def test_pick_cube_expert_succeeds(state_env):
    expert = pick_cube_expert()
    wins = 0
    for episode_id in range(10):
        obs, _ = state_env.reset(options={"episode_id": episode_id})
        expert.reset()
        done = False
        while not done:
            obs, _, terminated, truncated, info = state_env.step(expert(obs))
            done = terminated or truncated
        wins += info["episode"]["success_once"]
    assert wins >= 8
