"""MetaWorld under the vlarl contract. Needs the simulator (an error in CI when missing)."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from vlarl_envs.testing import assert_episode_ids_replay, require_simulator

require_simulator("metaworld")

import vlarl_envs
from vlarl_envs.metaworld import METAWORLD_INSTRUCTIONS, METAWORLD_TASKS, scripted_expert
from vlarl_envs.wrappers import StateOnlyObservation

pytestmark = pytest.mark.sim


def test_task_list_matches_metaworld():
    import metaworld

    assert set(METAWORLD_TASKS) == set(metaworld.ALL_V3_ENVIRONMENTS)
    assert len(METAWORLD_TASKS) == 50


def test_instructions_are_sentences_not_task_ids():
    for task in METAWORLD_TASKS:
        canonical = METAWORLD_INSTRUCTIONS.canonical(task)
        assert canonical != task.removesuffix("-v3").replace("-", " ")
        assert len(canonical.split()) >= 3
        assert len(set(METAWORLD_INSTRUCTIONS.paraphrases(task))) >= 3
        assert canonical not in METAWORLD_INSTRUCTIONS.paraphrases(task)


def test_state_only_view_passes_gymnasium_and_sb3_checkers():
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = StateOnlyObservation(gym.make("vlarl/MetaWorld-reach-v3", obs_mode="state"))
    assert env.observation_space.shape == (39,)
    check_env(env, skip_render_check=True)
    sb3_check_env(env, warn=True)
    env.close()


@pytest.mark.slow
def test_sb3_ppo_trains_on_state_view():
    from stable_baselines3 import PPO

    env = StateOnlyObservation(gym.make("vlarl/MetaWorld-reach-v3", obs_mode="state", reward_mode="dense"))
    model = PPO("MlpPolicy", env, n_steps=500, batch_size=100, n_epochs=2, seed=0, device="cpu", verbose=0)
    model.learn(total_timesteps=2000)
    assert model.num_timesteps >= 2000
    env.close()


@pytest.mark.slow
def test_check_env_mt50():
    env = gym.make("vlarl/MetaWorld-MT50-v3", obs_mode="state")
    check_env(env, skip_render_check=True)
    tasks = {env.reset(options={"episode_id": k})[1]["task"] for k in range(12)}
    assert len(tasks) > 5
    _, info = env.reset(options={"task": "door-open-v3"})
    assert info["task"] == "door-open-v3"
    env.close()


def test_make_in_fresh_interpreter_without_import():
    code = (
        "import gymnasium as gym\n"
        "env = gym.make('vlarl_envs:vlarl/MetaWorld-reach-v3', obs_mode='state')\n"
        "obs, info = env.reset(seed=0)\n"
        "print(obs['task_description'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "reach the goal position" in result.stdout


def test_a_task_subset_draws_and_accepts_only_its_tasks():
    subset = ["drawer-close-v3", "button-press-topdown-v3"]
    env = gym.make("vlarl/MetaWorld-MT10-v3", tasks=subset, image_size=32)
    drawn = {env.reset(options={"episode_id": episode_id})[1]["task"] for episode_id in range(12)}
    assert drawn == set(subset)
    with pytest.raises(ValueError, match="reach-v3"):
        env.reset(options={"task": "reach-v3"})
    env.close()


def test_same_episode_id_gives_identical_initial_observations():
    env = gym.make("vlarl/MetaWorld-pick-place-v3", image_size=32)
    assert "main_images" in env.reset(options={"episode_id": 0})[0]
    assert_episode_ids_replay(env)
    env.close()


def test_images_do_not_depend_on_the_tasks_played_before():
    """Each task's simulator renders through its own GL context: after switching tasks (or with
    several envs in one process), a frame shows its own scene, not one drawn with the meshes of
    the task whose context was made current last."""
    multi = gym.make("vlarl/MetaWorld-MT10-v3", image_size=32)
    single = gym.make("vlarl/MetaWorld-drawer-open-v3", image_size=32)
    options = {"task": "drawer-open-v3", "episode_id": 0}
    before_switch, _ = multi.reset(options=options)
    multi.reset(options={"task": "push-v3", "episode_id": 3})
    after_switch, _ = multi.reset(options=options)
    alone, _ = single.reset(options={"episode_id": 0})
    np.testing.assert_array_equal(after_switch["main_images"], before_switch["main_images"])
    np.testing.assert_array_equal(after_switch["main_images"], alone["main_images"])
    multi.close()
    single.close()


def test_fast_render_skips_the_reflection_pass_and_draws_the_same_frame():
    """fast_render turns MuJoCo's reflection pass off (a third of a small frame on a CPU): the frames
    equal those drawn with it, for a task whose scene holds the most reflective materials."""
    import mujoco

    env = gym.make("vlarl/MetaWorld-window-open-v3", image_size=64)
    fast, _ = env.reset(options={"episode_id": 0})
    viewer = env.unwrapped.simulator.mujoco_renderer.viewer
    assert viewer.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] == 0
    viewer.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 1
    reflected = env.unwrapped.complete_observation({})["main_images"]
    env.close()
    np.testing.assert_array_equal(fast["main_images"], reflected)


def test_first_frame_shows_the_episode_layout():
    """The reset frame shows where this episode put the window, not a layout that the first
    step then corrects: a step that barely moves the arm changes the frame far less than
    switching between episodes does."""
    env = gym.make("vlarl/MetaWorld-window-open-v3", image_size=64)
    frames, stepped = [], []
    for episode_id in (0, 1, 2):
        observation, _ = env.reset(options={"episode_id": episode_id, "split": "test"})
        frames.append(observation["main_images"].astype(np.int64))
        stepped.append(env.step(np.zeros(4, np.float32))[0]["main_images"].astype(np.int64))
    env.close()
    step_change = max(np.abs(frame - after).sum() for frame, after in zip(frames, stepped))
    episode_change = min(np.abs(frames[i] - frames[j]).sum() for i, j in ((0, 1), (0, 2), (1, 2)))
    assert 4 * step_change < episode_change, (step_change, episode_change)


def test_chunk_renders_only_its_last_observation_and_matches_single_steps(monkeypatch):
    """A chunk of 3 renders one frame, not 3, and returns what 3 single steps return: the
    images rendered after the chunk are those of the state its last sub-step left."""
    chunked = gym.make("vlarl/MetaWorld-push-v3", image_size=32, action_chunk=3, reward_mode="dense")
    single = gym.make("vlarl/MetaWorld-push-v3", image_size=32, reward_mode="dense")
    renders = []
    render = type(chunked.unwrapped)._render_main_camera
    monkeypatch.setattr(type(chunked.unwrapped), "_render_main_camera", lambda env: renders.append(env) or render(env))
    actions = np.random.default_rng(0).uniform(-1, 1, (4, 3, 4)).astype(np.float32)
    chunked.reset(options={"episode_id": 5})
    single.reset(options={"episode_id": 5})
    for chunk in actions:
        renders.clear()
        observation, reward, *_ = chunked.step(chunk)
        assert len(renders) == 1
        steps = [single.step(action) for action in chunk]
        expected = steps[-1][0]
        np.testing.assert_array_equal(observation["main_images"], expected["main_images"])
        np.testing.assert_array_equal(observation["privileged_state"], expected["privileged_state"])
        assert list(observation) == list(expected)
        assert reward == pytest.approx(sum(step[1] for step in steps))
    chunked.close()
    single.close()


def test_shaped_reward_pays_the_rise_of_the_dense_reward_over_ten():
    """On an expert's episode the shaped rewards are the tenth-scaled dense rewards' rises and sum to the success."""
    expert = scripted_expert("reach-v3")
    rewards = {}
    for mode in ("dense", "shaped"):
        env = gym.make("vlarl/MetaWorld-reach-v3", image_size=16, horizon=100, reward_mode=mode)
        obs, _ = env.reset(options={"episode_id": 0})
        rewards[mode], done = [], False
        while not done:
            obs, reward, terminated, truncated, info = env.step(expert(obs))
            rewards[mode].append(reward)
            done = terminated or truncated
        env.close()
    assert terminated and info["success"] and len(rewards["dense"]) >= 10
    potential = np.array(rewards["dense"]) / 10
    potential[-1] = 0.0
    expected = np.diff(potential, prepend=0.0)
    expected[-1] += 1.0
    assert rewards["shaped"] == pytest.approx(expected.tolist(), abs=1e-9)
    assert sum(rewards["shaped"]) == pytest.approx(1.0)


def test_semantic_split_replays_test_states_with_paraphrases():
    env = gym.make("vlarl/MetaWorld-push-v3", obs_mode="state")
    test, _ = env.reset(options={"episode_id": 3, "split": "test"})
    semantic, _ = env.reset(options={"episode_id": 3, "split": "semantic"})
    np.testing.assert_array_equal(test["privileged_state"], semantic["privileged_state"])
    assert test["task_description"] == METAWORLD_INSTRUCTIONS.canonical("push-v3")
    assert semantic["task_description"] in METAWORLD_INSTRUCTIONS.paraphrases("push-v3")
    env.close()


def test_a_single_task_id_plays_only_its_task_and_an_unknown_task_is_refused():
    """The contract's bad input is test_contract's; these are MetaWorld's own."""
    env = gym.make("vlarl/MetaWorld-reach-v3", obs_mode="state")
    with pytest.raises(ValueError, match="unknown task 'push-v3'"):
        env.reset(options={"task": "push-v3"})
    env.close()
    with pytest.raises(ValueError, match="unknown MetaWorld task 'fly-v3'"):
        vlarl_envs.metaworld.make_metaworld_env(task="fly-v3")


def camera_pixels(simulator, point, height, width):
    """Pixel (row, col) of a world point in the main camera's own image frame, from
    MuJoCo's camera pose and field of view (independent of the env's image code)."""
    camera = simulator.model.camera("corner2")
    position = simulator.data.cam_xpos[camera.id]
    rotation = simulator.data.cam_xmat[camera.id].reshape(3, 3)
    local = rotation.T @ (np.asarray(point) - position)  # camera frame: x right, y up, looks along -z
    focal = (height / 2) / np.tan(np.deg2rad(simulator.model.cam_fovy[camera.id]) / 2)
    return np.array([height / 2 - focal * local[1] / -local[2], width / 2 + focal * local[0] / -local[2]])


def upright_pixels(simulator, point, height, width):
    """Where a world point must appear in an upright image: one where a point 10 cm higher
    appears higher. A camera mounted rolled upside down needs its frame rotated 180 degrees."""
    pixel = camera_pixels(simulator, point, height, width)
    above = camera_pixels(simulator, np.asarray(point) + [0.0, 0.0, 0.1], height, width)
    if above[0] > pixel[0]:
        return np.array([height, width]) - pixel
    return pixel


def test_main_camera_frames_the_table_closely():
    """10 cm on the table spans about 4 pixels of a 64 px image from the close corner2 position,
    against 2.2 from MetaWorld's own, where goals and small objects shrink to a pixel."""
    env = gym.make("vlarl/MetaWorld-reach-v3", image_size=64)
    env.reset(options={"episode_id": 0})
    simulator = env.unwrapped.simulator
    left, right = (camera_pixels(simulator, [x, 0.6, 0.0], 64, 64) for x in (-0.05, 0.05))
    assert np.linalg.norm(left - right) > 3.5
    env.close()


def test_rendered_frame_is_upright():
    size = 96
    env = gym.make("vlarl/MetaWorld-reach-v3", image_size=size)
    env.reset(options={"episode_id": 0})
    simulator = env.unwrapped.simulator
    goal_site = simulator.model.site("goal").id
    simulator.model.site_rgba[goal_site] = [0.0, 1.0, 0.0, 1.0]
    simulator.model.site_size[goal_site] = [0.06, 0.06, 0.06]
    obs, *_ = env.step(np.zeros(4, np.float32))
    image = obs["main_images"].astype(int)
    green = (image[..., 1] > 150) & (image[..., 0] < 90) & (image[..., 2] < 90)
    assert green.sum() >= 10, "the goal marker is not visible"
    rows, cols = np.nonzero(green)
    expected_row, expected_col = upright_pixels(simulator, simulator.data.site_xpos[goal_site], size, size)
    assert abs(expected_row - size / 2) > 8 or abs(expected_col - size / 2) > 8, "marker too central to tell"
    assert abs(rows.mean() - expected_row) < 6 and abs(cols.mean() - expected_col) < 6
    env.close()


def test_vector_env_same_step_autoreset():
    vec = vlarl_envs.make_vec("vlarl/MetaWorld-reach-v3", 2, vectorization_mode="sync", obs_mode="state", horizon=3)
    obs, _ = vec.reset(seed=0)
    assert obs["states"].shape == (2, 4) and len(obs["task_description"]) == 2
    for _ in range(3):
        obs, rewards, terminated, truncated, infos = vec.step(np.zeros((2, 4), np.float32))
    assert truncated.all()
    assert infos["_final_obs"].all() and infos["final_info"]["episode"]["episode_len"].tolist() == [3, 3]
    assert obs["privileged_state"].shape == (2, 39)
    vec.close()


@pytest.mark.slow
def test_async_vector_env_with_images():
    vec = vlarl_envs.make_vec("vlarl/MetaWorld-reach-v3", 2, image_size=32, horizon=5)
    obs, _ = vec.reset(seed=0)
    assert obs["main_images"].shape == (2, 32, 32, 3)
    obs, *_ = vec.step(np.zeros((2, 4), np.float32))
    assert obs["main_images"].dtype == np.uint8 and isinstance(obs["task_description"], tuple)
    vec.close()


def test_video_of_a_metaworld_episode(tmp_path):
    import imageio.v2 as imageio

    env = gym.make("vlarl/MetaWorld-reach-v3", image_size=64, horizon=8, video_dir=tmp_path, action_chunk=2)
    env.reset(options={"episode_id": 1})
    done = False
    while not done:
        *_, terminated, truncated, _ = env.step(np.zeros((2, 4), np.float32))
        done = terminated or truncated
    (video,) = tmp_path.glob("*.mp4")
    assert len(imageio.mimread(video)) == 1 + 4
    env.close()


@pytest.mark.slow
def test_scripted_experts_succeed_on_most_tasks():
    successes = {}
    for task in METAWORLD_TASKS:
        env = gym.make(f"vlarl/MetaWorld-{task}", obs_mode="state")
        expert = scripted_expert(task)
        wins = 0
        for episode_id in range(2):
            obs, _ = env.reset(options={"episode_id": episode_id})
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(expert(obs))
                done = terminated or truncated
            wins += info["episode"]["success_once"]
        successes[task] = wins / 2
        env.close()
    rate = np.mean(list(successes.values()))
    assert rate >= 0.8, {task: rate for task, rate in successes.items() if rate < 1}
