"""GSEnv PutCubeOnPlate under the vlarl contract. Needs ManiSkill (an error in CI when missing).

Building a ManiSkill scene takes 10 s or more, so envs are shared per module. The splat
assets are built into the user's cache on first use (about a minute) and reused after.
"""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from vlarl_envs.testing import assert_episode_ids_replay, require_simulator

require_simulator("mani_skill")

import vlarl_envs  # noqa: E402  (registers the ids once the simulator is known to exist)
from vlarl_envs.gsenv import GSENV_ID  # noqa: E402
from vlarl_envs.gsenv.env import INSTRUCTION  # noqa: E402
from vlarl_envs.gsenv.expert import pick_and_place_action  # noqa: E402
from vlarl_envs.stack import wrap_contract  # noqa: E402

pytestmark = pytest.mark.sim
SMALL = (72, 96)


@pytest.fixture(scope="module")
def env():
    env = gym.make(GSENV_ID, image_size=SMALL)
    yield env
    env.close()


@pytest.fixture(scope="module")
def state_env():
    env = gym.make(GSENV_ID, obs_mode="state")
    yield env
    env.close()


def run_expert(env, episode_id: int, on_step=None) -> dict:
    obs, _ = env.reset(options={"episode_id": episode_id})
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(pick_and_place_action(obs))
        if on_step is not None:
            on_step(obs, info)
        done = terminated or truncated
    return info


def test_check_env_rgb(env):
    check_env(env.unwrapped)
    check_env(env, skip_render_check=True)
    obs, info = env.reset(options={"episode_id": 0})
    assert obs["main_images"].shape == (*SMALL, 3) and obs["main_images"].dtype == np.uint8
    assert obs["states"].shape == (8,) and obs["task_description"] == INSTRUCTION
    assert info["success"] is False and info["is_success"] is False
    assert env.action_space.shape == (7,)


def test_make_in_fresh_interpreter_without_import():
    code = (
        "import sys, gymnasium as gym\n"
        "import vlarl_envs\n"
        "assert 'mani_skill' not in sys.modules and 'torch' not in sys.modules, 'imported too early'\n"
        f"env = gym.make('vlarl_envs:{GSENV_ID}', obs_mode='state')\n"
        "obs, info = env.reset(options={'episode_id': 3})\n"
        "print(obs['task_description'], obs['states'].shape)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{INSTRUCTION} (8,)" in result.stdout


def test_same_episode_id_gives_identical_initial_observations(env):
    assert "main_images" in env.reset(options={"episode_id": 0})[0]
    assert_episode_ids_replay(env)


def test_small_images_render_fewer_wider_body_gaussians(env):
    from vlarl_envs.gsenv.bodies import auto_decimation

    assert [auto_decimation(h) for h in (480, 224, 200, 128, 96, 48)] == [1, 1, 1, 2, 4, 8]
    from vlarl_envs.gsenv.assets import BuildSettings, default_asset_dir
    from vlarl_envs.gsenv.capture import load_capture

    capture = load_capture(default_asset_dir(BuildSettings()))
    bodies = {body.name: len(body.gaussians) for body in env.unwrapped.splat_renderer.scene.bodies}
    decimation = auto_decimation(SMALL[0])
    assert decimation > 1
    assert bodies["cube"] == len(capture.objects["cube"]) // decimation
    assert bodies["panda_link0"] == len(capture.links["panda_link0"]) // decimation


def test_bad_input_raises_the_contract_value_error(env):
    env.reset(options={"episode_id": 0})
    with pytest.raises(ValueError, match=rf"{GSENV_ID}.*shape \(7,\)"):
        env.step(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array([np.nan] * 7, np.float32))
    with pytest.raises(ValueError, match="unknown task 'PickCube'"):
        env.reset(options={"task": "PickCube"})
    with pytest.raises(ValueError, match="unknown split 'semantic'"):
        env.reset(options={"split": "semantic"})
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"difficulty": 3})
    env.step(np.zeros(7, np.float32))  # the env still works after rejecting bad input
    with pytest.raises(ValueError, match="unknown splat_backend 'vulkan'"):
        gym.make(GSENV_ID, splat_backend="vulkan")
    with pytest.raises(ValueError, match="unknown renderer 'raytracer'"):
        gym.make(GSENV_ID, renderer="raytracer")


def test_scripted_pick_and_place_succeeds(state_env):
    wins = [run_expert(state_env, episode_id)["episode"]["success_once"] for episode_id in range(4)]
    assert all(wins), wins


def test_success_needs_the_cube_released_on_the_plate(state_env):
    """Holding the cube over the plate is not success; letting go there is."""
    held_over_plate = []

    def watch(obs, info):
        if obs["privileged_state"][17] > 0.5:
            held_over_plate.append(info["success"])

    info = run_expert(state_env, episode_id=5, on_step=watch)
    assert held_over_plate and not any(held_over_plate)
    assert info["success"]


def test_dense_reward_climbs_through_the_stages(state_env):
    dense = wrap_contract(state_env.unwrapped, reward_mode="dense")
    obs, _ = dense.reset(options={"episode_id": 6})
    rewards, done = [], False
    while not done:
        obs, reward, terminated, truncated, info = dense.step(pick_and_place_action(obs))
        rewards.append(reward)
        done = terminated or truncated
    assert info["success"] and rewards[-1] == pytest.approx(1.0)
    assert min(rewards) >= 0.0 and max(rewards[:-1]) < 1.0
    assert rewards[0] < np.mean(rewards[len(rewards) // 2 : -1]), "carrying should pay more than reaching"


def test_video_shows_the_cube_moving_with_the_gripper(env, tmp_path):
    """The expert's episode on video: the red cube's pixels sit where the simulator's cube
    projects into the image, frame after frame, while the gripper carries it across."""
    import imageio.v2 as imageio

    from vlarl_envs.wrappers.record_video import VIDEO_WIDTH

    recorded = wrap_contract(env.unwrapped, video_dir=tmp_path)
    cube_positions = []
    obs, _ = recorded.reset(options={"episode_id": 2})
    cube_positions.append(obs["privileged_state"][7:10])
    done = False
    while not done:
        obs, _, terminated, truncated, info = recorded.step(pick_and_place_action(obs))
        cube_positions.append(obs["privileged_state"][7:10])
        done = terminated or truncated
    assert info["success"]
    (video,) = tmp_path.glob("*.mp4")
    frames = imageio.mimread(video)
    assert len(frames) == len(cube_positions)

    camera = env.unwrapped.splat_renderer.camera
    scale = VIDEO_WIDTH / SMALL[1]
    world_to_camera, intrinsics = camera.world_to_camera.numpy(), camera.intrinsics.numpy()
    tracked = []
    for frame, position in zip(frames, cube_positions):
        local = world_to_camera[:3, :3] @ position + world_to_camera[:3, 3]
        expected = (intrinsics[:2, :2] @ (local[:2] / local[2]) + intrinsics[:2, 2]) * scale  # (x, y) in the video
        picture = frame[: int(SMALL[0] * scale)].astype(int)
        red = (picture[..., 0] > 140) & (picture[..., 1] < 90) & (picture[..., 2] < 90)
        if red.sum() >= 6:
            rows, cols = np.nonzero(red)
            tracked.append(np.hypot(cols.mean() - expected[0], rows.mean() - expected[1]))
    travelled = np.linalg.norm(cube_positions[-1][:2] - cube_positions[0][:2])
    assert travelled > 0.1, "the cube did not move far enough to tell"
    assert len(tracked) >= 0.7 * len(frames), f"the cube is visible in only {len(tracked)} of {len(frames)} frames"
    assert np.median(tracked) < 4 * scale, f"red pixels are {np.median(tracked):.1f} px from the cube's position"


def test_vector_env_renders_all_sub_envs_in_one_batch(env):
    vec = gym.make_vec(GSENV_ID, num_envs=2, physics="sync", image_size=SMALL, horizon=3)
    obs, _ = vec.reset(seed=0, options={"episode_id": 4})
    assert obs["main_images"].shape == (2, *SMALL, 3) and isinstance(obs["task_description"], tuple)
    single, _ = env.reset(options={"episode_id": 4})
    assert np.abs(obs["main_images"][0].astype(int) - single["main_images"]).max() <= 3
    for _ in range(3):
        obs, _, terminated, truncated, infos = vec.step(np.zeros((2, 7), np.float32))
    assert truncated.all() and infos["_final_obs"].all()
    assert infos["final_obs"][0]["main_images"].shape == (*SMALL, 3)
    assert vec.observation_space["main_images"].shape == (2, *SMALL, 3)
    vec.close()


@pytest.mark.slow
def test_splat_silhouettes_match_the_simulator_segmentation():
    """At the real camera's 640x480, cube and plate splats cover ManiSkill's own masks."""
    full = gym.make(GSENV_ID, render_mode="rgb_array", obs_mode="state")
    scores = []
    for episode_id in range(4):
        full.reset(options={"episode_id": episode_id})
        splat, simulator = full.unwrapped.alignment_masks(["cube", "plate"])
        scores.append((splat & simulator).sum() / (splat | simulator).sum())
        for name in ("cube", "plate"):
            splat, simulator = full.unwrapped.alignment_masks([name])
            if simulator.sum() >= 200:  # an object mostly hidden by the gripper leaves a sliver
                assert (splat & simulator).sum() / (splat | simulator).sum() >= 0.7, (episode_id, name)
    full.close()
    assert min(scores) >= 0.7, scores
