"""vlarl/ManiSkill-PutOnPlate-v0 in the simulator: contract, splits, success and the expert."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from vlarl_envs.testing import require_simulator

require_simulator("mani_skill")

import vlarl_envs  # noqa: F401  (registers the ids)
from vlarl_envs.maniskill import put_on_plate_expert
from vlarl_envs.maniskill.experts import PUT_ON_PLATE_LAYOUT
from vlarl_envs.maniskill.put_on_plate import make_episode
from vlarl_envs.maniskill.put_on_plate.appearance import UNSEEN_TABLES, ImageOverlay
from vlarl_envs.maniskill.put_on_plate.objects import OBJECTS_BY_NAME
from vlarl_envs.maniskill.put_on_plate.receptacles import (
    ALL_RECEPTACLES,
    RECEPTACLES_BY_NAME,
    TRAIN_RECEPTACLE,
)

pytestmark = pytest.mark.sim

PUT_ON_PLATE = "vlarl/ManiSkill-PutOnPlate-v0"


@pytest.fixture(scope="module")
def rgb_env():
    env = gym.make(PUT_ON_PLATE, image_size=64, horizon=20)
    yield env
    env.close()


@pytest.fixture(scope="module")
def state_env():
    env = gym.make(PUT_ON_PLATE, obs_mode="state")
    yield env
    env.close()


def target_position(observation):
    return observation["privileged_state"][PUT_ON_PLATE_LAYOUT["target_pose"]][:3]


def render(simulator, episode):
    """(main, wrist) images of ``episode``'s first frame, as int arrays."""
    raw, _ = simulator.reset(seed=0, options={"episodes": [episode]})
    sensors = raw["sensor_data"]
    return tuple(sensors[camera]["rgb"][0].numpy().astype(int) for camera in ("main_camera", "hand_camera"))


def released_on(env, episode, receptacle) -> bool:
    """Success after the target is set down on ``receptacle`` (a placement of ``episode``) and
    the gripper stays open for a step."""
    simulator = env.unwrapped.simulator
    spec = OBJECTS_BY_NAME[episode.target]
    top = RECEPTACLES_BY_NAME[receptacle.name].thickness
    pose = simulator.target.pose.raw_pose.clone()
    pose[0, :3] = pose.new_tensor([receptacle.x + 0.01, receptacle.y, top + spec.height / 2 + 0.002])
    simulator.target.set_pose(pose)
    _, _, _, _, info = env.step(np.array([0, 0, 0, 0, 0, 0, 1], np.float32))
    return bool(info["success"])


def test_check_env(rgb_env):
    check_env(rgb_env.unwrapped, skip_render_check=True)


def test_reset_builds_the_episode_record(rgb_env):
    episode = make_episode("semantic", 5)
    obs, info = rgb_env.reset(options={"episode_id": 5, "split": "semantic"})
    assert info["variation"] == episode.variation and info["target"] == episode.target
    assert obs["task_description"] == episode.instruction
    assert obs["main_images"].shape == obs["wrist_images"].shape == (64, 64, 3)
    assert obs["states"].shape == (8,)
    simulator = rgb_env.unwrapped.simulator
    for placement in episode.placements:
        actor = simulator.objects[list(OBJECTS_BY_NAME).index(placement.name)]
        np.testing.assert_allclose(actor.pose.p[0, :2].numpy(), [placement.x, placement.y], atol=2e-3)
    np.testing.assert_allclose(target_position(obs)[:2], [episode.placements[0].x, episode.placements[0].y], atol=2e-3)
    plate = obs["privileged_state"][PUT_ON_PLATE_LAYOUT["plate_position"]]
    np.testing.assert_allclose(plate[:2], episode.plate_xy, atol=1e-5)
    on_table = [actor for actor in simulator.objects if actor.pose.p[0, 2] > -0.1]
    assert len(on_table) == len(episode.placements)


def test_same_episode_replays_exactly(rgb_env):
    first, _ = rgb_env.reset(options={"episode_id": 4, "split": "vision"})
    rgb_env.reset(options={"episode_id": 9})
    again, _ = rgb_env.reset(options={"episode_id": 4, "split": "vision"})
    for key in ("main_images", "wrist_images", "privileged_state"):
        np.testing.assert_array_equal(first[key], again[key])


def test_vision_variations_change_the_image_not_the_state(rgb_env):
    """The same layout under an unseen table, light and camera: other pixels, same physics."""
    simulator = rgb_env.unwrapped.simulator
    base = make_episode("train", 11)
    images = {}
    for name, episode in {
        "train": base,
        "table": dataclasses.replace(base, table=UNSEEN_TABLES[2].name),
        "lighting": dataclasses.replace(base, lighting=make_episode("vision", 1).lighting),
        "camera": dataclasses.replace(base, camera_eye=make_episode("vision", 2).camera_eye),
    }.items():
        raw, _ = simulator.reset(seed=0, options={"episodes": [episode]})
        images[name] = raw["sensor_data"]["main_camera"]["rgb"][0].numpy().astype(int)
        if name == "train":
            state = raw["state"][0].numpy()
        else:
            np.testing.assert_allclose(raw["state"][0].numpy(), state, atol=1e-5)
    for name in ("table", "lighting", "camera"):
        assert np.abs(images[name] - images["train"]).mean() > 3, name


def test_overlays_blend_a_texture_into_the_main_image_only(rgb_env):
    """Texture: the robot and objects change, the table does not; noise: every pixel changes;
    the strong overlays change more than the weak ones; the wrist camera never changes."""
    simulator = rgb_env.unwrapped.simulator
    base = make_episode("train", 11)
    clean_main, clean_wrist = render(simulator, base)
    change, changed_pixels = {}, {}
    for kind in ("texture", "noise"):
        for strength in (0.3, 0.5):
            main, wrist = render(simulator, dataclasses.replace(base, overlay=ImageOverlay(kind, strength, 3)))
            np.testing.assert_array_equal(wrist, clean_wrist)
            difference = np.abs(main - clean_main)
            change[kind, strength] = difference.mean()
            changed_pixels[kind, strength] = (difference.max(axis=-1) > 0).mean()
    for kind in ("texture", "noise"):
        assert change[kind, 0.5] > 1.3 * change[kind, 0.3] and change[kind, 0.3] > 1.5, (kind, change)
    assert changed_pixels["noise", 0.3] > 0.9
    assert changed_pixels["texture", 0.3] < 0.6, "the table and the background keep their colour"


def test_vision_overlay_episodes_reach_the_observation(rgb_env):
    simulator = rgb_env.unwrapped.simulator
    for episode_id, variation in ((3, "texture_weak"), (6, "noise_strong")):
        obs, info = rgb_env.reset(options={"episode_id": episode_id, "split": "vision"})
        assert info["variation"] == variation
        clean = dataclasses.replace(make_episode("vision", episode_id), overlay=None)
        clean_main, clean_wrist = render(simulator, clean)
        assert np.abs(obs["main_images"].astype(int) - clean_main).mean() > 1.5, variation
        np.testing.assert_array_equal(obs["wrist_images"], clean_wrist)


def test_an_unseen_receptacle_replaces_the_plate(state_env):
    episode_id = next(k for k in range(150) if make_episode("semantic", k).variation == "plate")
    episode = make_episode("semantic", episode_id)
    obs, info = state_env.reset(options={"episode_id": episode_id, "split": "semantic"})
    assert info["variation"] == "plate" and info["receptacle"] == episode.receptacle != TRAIN_RECEPTACLE.name
    assert obs["task_description"] == f"put the {episode.target} on the {episode.receptacle}"
    simulator = state_env.unwrapped.simulator
    on_table = [spec.name for spec, actor in zip(ALL_RECEPTACLES, simulator.receptacles) if actor.pose.p[0, 2] > -0.1]
    assert on_table == [episode.receptacle]
    top = obs["privileged_state"][PUT_ON_PLATE_LAYOUT["plate_position"]]
    np.testing.assert_allclose(top, [*episode.plate_xy, RECEPTACLES_BY_NAME[episode.receptacle].thickness], atol=1e-5)
    assert released_on(state_env, episode, episode.receptacles[0])


def test_multi_plate_succeeds_on_the_named_receptacle_only(state_env):
    episode_id = next(k for k in range(150) if make_episode("semantic", k).variation == "multi_plate")
    episode = make_episode("semantic", episode_id)
    named, other = episode.receptacles
    options = {"episode_id": episode_id, "split": "semantic"}
    obs, _ = state_env.reset(options=options)
    simulator = state_env.unwrapped.simulator
    on_table = {spec.name for spec, actor in zip(ALL_RECEPTACLES, simulator.receptacles) if actor.pose.p[0, 2] > -0.1}
    assert on_table == {named.name, other.name}
    np.testing.assert_allclose(obs["privileged_state"][PUT_ON_PLATE_LAYOUT["plate_position"]][:2], [named.x, named.y],
                               atol=1e-5)
    assert not released_on(state_env, episode, other)
    state_env.reset(options=options)
    assert released_on(state_env, episode, named)


def test_success_needs_the_object_on_the_plate_and_released(state_env):
    obs, _ = state_env.reset(options={"episode_id": 0})
    simulator = state_env.unwrapped.simulator
    plate = obs["privileged_state"][PUT_ON_PLATE_LAYOUT["plate_position"]]
    spec = OBJECTS_BY_NAME[make_episode("train", 0).target]
    pose = simulator.target.pose.raw_pose.clone()
    pose[0, :3] = pose.new_tensor([plate[0] + 0.01, plate[1], plate[2] + spec.height / 2 + 0.002])
    simulator.target.set_pose(pose)
    obs, reward, terminated, _, info = state_env.step(np.array([0, 0, 0, 0, 0, 0, 1], np.float32))
    assert info["success"] and terminated and reward == 1.0
    obs, _ = state_env.reset(options={"episode_id": 0})
    _, _, terminated, _, info = state_env.step(np.zeros(7, np.float32))
    assert not info["success"] and not terminated


def test_moved_object_jumps_once_mid_episode(state_env):
    episode_id = next(k for k in range(2, 150, 3) if make_episode("execution", k).move.step <= 8)
    move = make_episode("execution", episode_id).move
    obs, info = state_env.reset(options={"episode_id": episode_id, "split": "execution"})
    assert info["variation"] == "moved_object"
    positions = [target_position(obs)]
    for _ in range(move.step + 2):
        obs, *_ = state_env.step(np.array([0, 0, 0, 0, 0, 0, 1], np.float32))
        positions.append(target_position(obs))
    np.testing.assert_allclose(positions[move.step][:2], positions[0][:2], atol=5e-3)
    np.testing.assert_allclose(positions[move.step + 1][:2], [move.x, move.y], atol=5e-3)


def test_bad_episode_and_split_raise(state_env):
    with pytest.raises(
        ValueError, match=r"vlarl/ManiSkill-PutOnPlate-v0: split 'vision' has episode ids 0\.\.209, got episode_id=210"
    ):
        state_env.reset(options={"episode_id": 210, "split": "vision"})
    with pytest.raises(ValueError, match=r"unknown split 'test'.*\['train', 'vision', 'semantic', 'execution'\]"):
        state_env.reset(options={"split": "test"})
    with pytest.raises(ValueError, match="unknown split 'ood'"):
        gym.make(PUT_ON_PLATE, obs_mode="state", split="ood")


@pytest.mark.slow
def test_expert_succeeds_on_train_episodes(state_env):
    expert = put_on_plate_expert()
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


@pytest.mark.parametrize("split, episode_id", [("train", 3), ("vision", 3)])  # vision 3: texture_weak's overlay
def test_a_chunk_renders_only_its_last_observation_and_matches_single_steps(split, episode_id):
    """Within a chunk the cameras render once, and the chunk's observation is the one single steps give."""
    chunked = gym.make(PUT_ON_PLATE, image_size=32, action_chunk=3)
    single = gym.make(PUT_ON_PLATE, image_size=32)
    simulator = chunked.unwrapped.simulator.unwrapped
    renders = []
    render = simulator._get_obs_sensor_data
    simulator._get_obs_sensor_data = lambda *args, **kwargs: renders.append(1) or render(*args, **kwargs)
    actions = np.random.default_rng(0).uniform(-1, 1, (2, 3, 7)).astype(np.float32)
    options = {"episode_id": episode_id, "split": split}
    chunked.reset(options=options)
    single.reset(options=options)
    for chunk in actions:
        renders.clear()
        observation, *_ = chunked.step(chunk)
        assert len(renders) == 1
        expected = [single.step(action) for action in chunk][-1][0]
        for key in ("main_images", "wrist_images", "states", "privileged_state"):
            np.testing.assert_array_equal(observation[key], expected[key], err_msg=key)
    chunked.close()
    single.close()
