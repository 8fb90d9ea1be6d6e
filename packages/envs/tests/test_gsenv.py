"""GSEnv PutCubeOnPlate under the vlarl contract. Needs ManiSkill (an error in CI when missing).

Building a ManiSkill scene takes 10 s or more, so envs are shared per module. The splat
assets are built into the user's cache on first use (about a minute) and reused after.
"""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from vlarl_envs.testing import assert_episode_ids_replay, require_simulator

require_simulator("mani_skill")

from vlarl_envs.gsenv import GSENV_ID
from vlarl_envs.gsenv.env import INSTRUCTION
from vlarl_envs.gsenv.expert import pick_and_place_action
from vlarl_envs.gsenv.robustness import VARIATIONS, sample_look
from vlarl_envs.stack import wrap_contract

pytestmark = pytest.mark.sim
SMALL = (72, 96)
TINY = (48, 64)


@pytest.fixture(scope="module")
def env():
    env = gym.make(GSENV_ID, image_size=SMALL)
    yield env
    env.close()


@pytest.fixture(scope="module")
def tiny_env():
    env = gym.make(GSENV_ID, image_size=TINY)
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


def test_observation_holds_the_splat_image_joints_and_instruction(env):
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


def test_unknown_splat_backends_and_renderers_are_refused():
    """The contract's bad input is test_contract's; these are GSEnv's own."""
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

    obs, infos = vec.reset(options={"split": "robustness", "episode_id": 2})  # a background episode
    single, info = env.reset(options={"split": "robustness", "episode_id": 2})
    assert list(infos["variation"]) == ["background"] * 2 and info["variation"] == "background"
    assert np.abs(obs["main_images"].astype(int) - single["main_images"]).max() <= 3
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


# --- the robustness split ----------------------------------------------------------------------


def image_of(env, split: str, episode_id: int) -> tuple[dict, dict]:
    return env.reset(options={"split": split, "episode_id": episode_id})


def test_robustness_episodes_replay_test_layouts_with_their_variation(tiny_env):
    for episode_id, name in enumerate(VARIATIONS):
        robust, info = image_of(tiny_env, "robustness", episode_id)
        assert info["variation"] == name and info["split"] == "robustness"
        again, _ = image_of(tiny_env, "robustness", episode_id)
        np.testing.assert_array_equal(again["main_images"], robust["main_images"])
        test, test_info = image_of(tiny_env, "test", episode_id)
        assert test_info["variation"] == "none"
        np.testing.assert_array_equal(robust["privileged_state"], test["privileged_state"])
        changed = np.abs(robust["main_images"].astype(int) - test["main_images"]).max(-1) > 10
        assert changed.mean() > 0.01, (name, changed.mean())


def test_training_episodes_render_as_before(tiny_env):
    """train and test render with the nominal renderer, through ManiSkill's own camera, whatever
    robustness episode came before."""
    from vlarl_envs.gsenv.task import CAMERA_NAME

    env = tiny_env.unwrapped
    first, info = image_of(tiny_env, "train", 5)
    assert info["variation"] == "none" and env.splat_renderer is env._look_renderers.nominal
    extrinsic = env.task._sensors[CAMERA_NAME].get_params()["extrinsic_cv"][0]
    np.testing.assert_allclose(env.splat_renderer.camera.world_to_camera[:3].numpy(), extrinsic.numpy(), atol=1e-6)
    for episode_id in range(3):
        image_of(tiny_env, "robustness", episode_id)
        again, _ = image_of(tiny_env, "train", 5)
        np.testing.assert_array_equal(again["main_images"], first["main_images"])


def test_camera_variation_moves_the_camera_a_few_centimetres_and_degrees(tiny_env):
    import torch

    env = tiny_env.unwrapped
    nominal = env._look_renderers.nominal.camera
    image_of(tiny_env, "robustness", 3)
    moved, look = env.splat_renderer.camera, sample_look("robustness", 3)
    assert look.variation == "camera"
    distance = float(torch.linalg.vector_norm(moved.position - nominal.position))
    assert 0.02 <= distance <= 0.05 and distance == pytest.approx(np.linalg.norm(look.camera_shift), abs=1e-5)
    relative = moved.world_to_camera[:3, :3] @ nominal.world_to_camera[:3, :3].T
    angle = np.degrees(np.arccos(np.clip((float(torch.trace(relative)) - 1) / 2, -1, 1)))
    assert 1.0 <= angle <= 3.0


def body_masks(renderer, env) -> np.ndarray:
    return renderer.body_masks(env._bodies.poses(), list(renderer.scene.body_names))[0].numpy()


def test_appearance_variation_changes_colours_not_shapes(tiny_env):
    env = tiny_env.unwrapped
    clean, _ = image_of(tiny_env, "test", 4)
    varied, info = image_of(tiny_env, "robustness", 4)
    assert info["variation"] == "appearance"
    clean_mean, varied_mean = clean["main_images"].mean((0, 1)), varied["main_images"].mean((0, 1))
    assert np.abs(varied_mean - clean_mean).max() > 5, (clean_mean, varied_mean)
    np.testing.assert_array_equal(body_masks(env.splat_renderer, env), body_masks(env._look_renderers.nominal, env))


def test_background_variation_changes_only_the_background(tiny_env):
    env = tiny_env.unwrapped
    clean, _ = image_of(tiny_env, "test", 5)
    varied, info = image_of(tiny_env, "robustness", 5)
    assert info["variation"] == "background"
    nominal, poses = env._look_renderers.nominal, env._bodies.poses()
    names = list(nominal.scene.body_names)
    covered = nominal.body_masks(poses, names, threshold=0.999)[0].numpy()
    uncovered = ~nominal.body_masks(poses, names, threshold=0.001)[0].numpy()
    assert covered.sum() > 50 and uncovered.sum() > 1000
    difference = np.abs(varied["main_images"].astype(int) - clean["main_images"]).max(-1)
    assert difference[covered].max() <= 1, "the robot, cube and plate look the same"
    assert (difference[uncovered] > 10).mean() > 0.8, "the table and backdrop changed"


def test_robustness_needs_the_splat_renderer_for_images(state_env):
    with pytest.raises(ValueError, match="split 'robustness' varies the splat render; it needs renderer='gaussian'"):
        gym.make(GSENV_ID, renderer="maniskill", split="robustness")
    _, info = state_env.reset(options={"split": "robustness", "episode_id": 1})  # state alone: no images to vary
    assert info["variation"] == "appearance"


def test_a_capture_made_from_a_tabletop_ply_renders_in_the_env(tiny_env, tmp_path, capsys):
    """vlarl-gsenv-capture on a green tabletop PLY in centimetres with y up; the env shows it."""
    import torch

    from vlarl_envs.gsenv.capture_cli import main
    from vlarl_envs.splats.gaussians import Gaussians
    from vlarl_envs.splats.ply import write_ply
    from vlarl_envs.splats.sh import rgb_to_sh_dc

    grid = torch.arange(-60.0, 60.1, 2.0)
    x, z = torch.meshgrid(grid, grid, indexing="ij")
    means = torch.stack([x.flatten(), torch.zeros(x.numel()), z.flatten()], dim=1)  # the table is y = 0
    count = len(means)
    green = Gaussians(
        means=means,
        quats=torch.tensor([[1.0, 0.0, 0.0, 0.0]]).repeat(count, 1),
        scales=torch.tensor([[1.5, 0.1, 1.5]]).repeat(count, 1),
        opacities=torch.full((count,), 0.95),
        sh=rgb_to_sh_dc(torch.tensor([0.1, 0.8, 0.2])).expand(count, 1, 3).clone(),
    )
    ply = write_ply(green, tmp_path / "tabletop.ply")
    y_up_to_z_up = ["0.3", "0", "-0.001", "0.7071067811865476", "0.7071067811865476", "0", "0"]  # +90 deg about x
    main([str(ply), "--table-pose", *y_up_to_z_up, "--scale", "0.01", "--output", str(tmp_path / "capture")])
    assert "wrote capture" in capsys.readouterr().out

    env = gym.make(GSENV_ID, image_size=(32, 48), capture=tmp_path / "capture")
    obs, _ = env.reset(options={"episode_id": 0})
    env.close()
    image = obs["main_images"].astype(int)
    greenish = (image[..., 1] > 150) & (image[..., 0] < 90) & (image[..., 2] < 110)
    assert greenish.mean() > 0.2, f"the green table covers {greenish.mean():.0%} of the image"
    default, _ = image_of(tiny_env, "train", 0)
    assert not ((default["main_images"][..., 1] > 150) & (default["main_images"][..., 0] < 90)).any()
