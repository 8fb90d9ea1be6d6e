"""CALVIN under the vlarl contract. Needs calvin_env and calvin's annotations (an error in CI when missing).

A scene's simulator builds in about half a second and steps at 20-30 steps/s at 32 px on a CPU, so the
tests play a few short episodes, most of them in scene D with state observations.
"""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import yaml
from gymnasium.utils.env_checker import check_env

from vlarl_envs.testing import assert_episode_ids_replay, require_simulator

require_simulator("calvin_env")

from vlarl_envs import family_of
from vlarl_envs.calvin import TASK_NAMES, calvin_env_id, play_chain
from vlarl_envs.calvin.assets import (
    TRAINING_ANNOTATIONS,
    VALIDATION_ANNOTATIONS,
    annotations_dir,
    task_oracle_config,
)
from vlarl_envs.calvin.chains import evaluation_chains
from vlarl_envs.calvin.simulator import by_name, joint_limits

pytestmark = pytest.mark.sim

ABC, D = calvin_env_id("ABC"), calvin_env_id("D")
OPEN_AND_STILL = np.array([0, 0, 0, 0, 0, 0, 1], np.float32)


def contacts_of(info, block):
    """(body, link name or index) pairs a block touches, the table's links by name."""
    table = info["scene_info"]["fixed_objects"]["table"]
    links = {index: name for name, index in table["links"].items()}
    return {(contact[2], links[contact[4]] if contact[2] == table["uid"] else contact[4])
            for contact in info["scene_info"]["movable_objects"][block]["contacts"]}


def test_family_lists_calvins_tasks_with_its_annotations():
    folder = annotations_dir()
    validation = yaml.safe_load((folder / VALIDATION_ANNOTATIONS).read_text())
    training = yaml.safe_load((folder / TRAINING_ANNOTATIONS).read_text())
    oracle = yaml.safe_load(task_oracle_config().read_text())["tasks"]
    assert set(TASK_NAMES) == set(validation) == set(oracle) and len(TASK_NAMES) == 34
    for env_id in (ABC, D):
        family = family_of(env_id)
        assert family.name == "CALVIN" and family.tasks(env_id) == TASK_NAMES
        assert family.splits(env_id) == ("train", "test", "semantic")
        instructions = family.instructions(env_id)
        for task in TASK_NAMES:
            assert instructions.canonical(task) == validation[task][0]
            assert set(instructions.paraphrases(task)) == set(training[task]) - {validation[task][0]}
    family = family_of(D)
    assert len(family.feature_names["observation.state"]) == 15 and len(family.feature_names["action"]) == 7
    assert family.tasks(D, {"tasks": ["close_drawer", "open_drawer"]}) == ("close_drawer", "open_drawer")
    with pytest.raises(ValueError, match="unknown"):
        family.tasks(D, {"tasks": ["fly_to_the_moon"]})


def test_the_family_answers_without_importing_calvin_env_or_pybullet():
    code = ("import sys; from vlarl_envs import family_of; f = family_of('vlarl/CALVIN-ABC-v0'); "
            "print(len(f.tasks('vlarl/CALVIN-ABC-v0')), f.splits('vlarl/CALVIN-ABC-v0'), "
            "len(f.instructions('vlarl/CALVIN-ABC-v0').sentences)); "
            "print([m for m in ('calvin_env', 'pybullet', 'gym', 'hydra') if m in sys.modules])")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.splitlines() == ["34 ('train', 'test', 'semantic') 34", "[]"]


@pytest.mark.slow
def test_check_env_passes_on_the_abc_id():
    """gymnasium's checker on scenes A, B and C; test_contract checks the D id."""
    env = gym.make(ABC, image_size=32, tasks=["open_drawer"])
    check_env(env.unwrapped, skip_render_check=True)
    check_env(env, skip_render_check=True)
    observation, info = env.reset(options={"episode_id": 0})
    assert env.observation_space.contains(observation)
    assert observation["main_images"].shape == observation["wrist_images"].shape == (32, 32, 3)
    assert observation["states"].shape == (15,) and observation["privileged_state"].shape == (51,)
    assert env.action_space.shape == (7,) and env.unwrapped.horizon == 360
    assert info["scene"] in {"A", "B", "C"}
    env.close()


@pytest.mark.slow
def test_episode_ids_replay_and_choose_scene_task_and_instruction():
    env = gym.make(ABC, image_size=32)
    held_out = assert_episode_ids_replay(env)
    assert held_out["task_description"] == env.unwrapped.instructions.canonical(env.unwrapped.task)
    scenes = {
        env.reset(options={"episode_id": episode_id, "task": "open_drawer"})[1]["scene"] for episode_id in range(16)
    }
    assert scenes == {"A", "B", "C"}
    _, info = env.reset(options={"episode_id": 37, "split": "test"})
    assert info["task"] == TASK_NAMES[37 % 34] and info["split"] == "test"
    test, _ = env.reset(options={"episode_id": 5, "split": "test", "task": "turn_on_led"})
    semantic, info = env.reset(options={"episode_id": 5, "split": "semantic", "task": "turn_on_led"})
    np.testing.assert_array_equal(test["privileged_state"], semantic["privileged_state"])
    assert semantic["task_description"] in env.unwrapped.instructions.paraphrases("turn_on_led")
    assert info == {"success": False, "is_success": False, "task": "turn_on_led", "episode_id": 5,
                    "split": "semantic", "scene": info["scene"]}
    env.close()
    d_env = gym.make(D, obs_mode="state")
    assert {d_env.reset(options={"episode_id": episode_id})[1]["scene"] for episode_id in range(3)} == {"D"}
    d_env.close()


@pytest.mark.slow
def test_episodes_replay_through_egl_too():
    """The renderer CALVIN's datasets were made with, through Mesa's llvmpipe on a CPU."""
    env = gym.make(D, image_size=32, renderer="egl", tasks=["open_drawer"])
    assert_episode_ids_replay(env)
    env.close()


@pytest.mark.slow
def test_an_env_keeps_at_most_max_simulators_and_plays_episodes_as_one_that_keeps_all():
    keeps_all = gym.make(ABC, image_size=32, tasks=["open_drawer"])
    keeps_one = gym.make(ABC, image_size=32, tasks=["open_drawer"], max_simulators=1)
    action = np.array([0.5, -0.5, 0.2, 0.0, 0.0, 0.1, -1.0], np.float32)
    scenes = []
    for episode_id in range(10):
        expected, info = keeps_all.reset(options={"episode_id": episode_id})
        observation, _ = keeps_one.reset(options={"episode_id": episode_id})
        scenes.append(info["scene"])
        assert keeps_one.unwrapped.built_scenes == (info["scene"],)
        for _ in range(3):
            for key in ("main_images", "wrist_images", "privileged_state"):
                np.testing.assert_array_equal(observation[key], expected[key])
            expected, observation = keeps_all.step(action)[0], keeps_one.step(action)[0]
    assert len(set(scenes)) == 3 and sorted(keeps_all.unwrapped.built_scenes) == ["A", "B", "C"]
    keeps_all.close()
    keeps_one.close()
    with pytest.raises(ValueError, match=r"vlarl/CALVIN-ABC-v0: max_simulators must be >= 1 or None .*got 0"):
        gym.make(ABC, max_simulators=0)


@pytest.mark.slow
def test_building_a_simulator_prints_nothing(capfd):
    env = gym.make(D, obs_mode="state")
    env.reset(options={"episode_id": 0})
    env.close()
    print("after")
    assert capfd.readouterr().out == "after\n"


@pytest.mark.slow
def test_envs_in_one_process_render_alike_and_outlive_each_other():
    """pybullet calls that name no client go to the process's first; the second env's robot still has its
    pedestal (the same frame as the first env's) and still loads once the first env is closed. The second
    renders no gripper camera (``wrist_camera=False``) and the same static frames."""
    first, second = (gym.make(D, image_size=32, tasks=["open_drawer"], wrist_camera=wrist) for wrist in (True, False))
    observations = [env.reset(options={"episode_id": 2})[0] for env in (first, second)]
    frames = [observation["main_images"] for observation in observations]
    np.testing.assert_array_equal(*frames)
    assert "wrist_images" in observations[0] and "wrist_images" not in observations[1]
    assert "wrist_images" not in second.observation_space.spaces
    first.close()
    again, _ = second.reset(options={"episode_id": 2})
    np.testing.assert_array_equal(again["main_images"], frames[0])
    second.close()


@pytest.mark.slow
def test_start_states_realize_what_the_task_needs():
    """A held block touches the fingers only and the robot touches it only; a stacked block rests on the
    other alone; a block in the drawer rests on the drawer; the lightbulb is lit where it must be."""
    env = gym.make(D, obs_mode="state")
    env.reset(options={"episode_id": 0, "task": "place_in_drawer"})
    info = env.unwrapped.simulator.get_info()
    robot = info["robot_info"]["uid"]
    (held,) = {contact[2] for contact in info["robot_info"]["contacts"]}
    name = next(name for name, block in info["scene_info"]["movable_objects"].items() if block["uid"] == held)
    assert {body for body, _ in contacts_of(info, name)} == {robot}
    assert by_name(env.unwrapped.simulator.scene.doors)["base__drawer"].get_state() > 0.2
    env.reset(options={"episode_id": 1, "task": "unstack_block"})
    info = env.unwrapped.simulator.get_info()
    blocks = info["scene_info"]["movable_objects"]
    uids = {block["uid"] for block in blocks.values()}
    tops = [name for name in blocks if {body for body, _ in contacts_of(info, name)} <= uids - {blocks[name]["uid"]}
            and contacts_of(info, name)]
    assert len(tops) == 1
    env.reset(options={"episode_id": 2, "task": "lift_blue_block_drawer"})
    table = env.unwrapped.simulator.get_info()["scene_info"]["fixed_objects"]["table"]["uid"]
    assert (table, "drawer_link") in contacts_of(env.unwrapped.simulator.get_info(), "block_blue")
    env.reset(options={"episode_id": 3, "task": "turn_off_lightbulb"})
    assert env.unwrapped.simulator.get_info()["scene_info"]["lights"]["lightbulb"]["logical_state"] == 1
    env.close()


@pytest.mark.slow
def test_success_is_calvins_oracle_against_the_tasks_start():
    """Moving the drawer through its joint from closed to open completes open_drawer (reward 1, terminated)
    and, from wherever it was to its other end, not turn_on_led; lighting the LED then completes turn_on_led."""
    env = gym.make(D, obs_mode="state", tasks=["open_drawer", "turn_on_led"])
    for task in ("open_drawer", "turn_on_led"):
        env.reset(options={"episode_id": 4, "task": task, "split": "test"})
        _, reward, terminated, _, info = env.step(OPEN_AND_STILL)
        assert not info["success"] and reward == 0.0 and not terminated
        drawer = by_name(env.unwrapped.simulator.scene.doors)["base__drawer"]
        closed, opened = joint_limits(drawer)
        assert task != "open_drawer" or drawer.get_state() < closed + 0.05
        drawer.reset(opened if drawer.get_state() < (closed + opened) / 2 else closed)
        _, reward, terminated, _, info = env.step(OPEN_AND_STILL)
        assert info["success"] == (task == "open_drawer") and terminated == info["success"]
        assert reward == float(task == "open_drawer")
    by_name(env.unwrapped.simulator.scene.lights)["led"].reset(1)
    _, reward, terminated, _, info = env.step(OPEN_AND_STILL)
    assert info["success"] and terminated and reward == 1.0 and info["episode"]["success_once"]
    env.close()


def test_an_unknown_renderer_is_refused():
    """The contract's bad input is test_contract's; this is CALVIN's own."""
    with pytest.raises(ValueError, match="unknown renderer"):
        gym.make(D, renderer="opengl")


@pytest.mark.slow
def test_a_chunk_renders_only_its_last_observation_and_matches_single_steps(monkeypatch):
    import vlarl_envs.calvin.env as calvin_env_module

    chunked = gym.make(D, image_size=32, action_chunk=3, tasks=["open_drawer"])
    single = gym.make(D, image_size=32, tasks=["open_drawer"])
    renders = []
    render = calvin_env_module.render_cameras
    monkeypatch.setattr(
        calvin_env_module, "render_cameras", lambda simulator, **kw: renders.append(1) or render(simulator, **kw)
    )
    actions = np.random.default_rng(0).uniform(-1, 1, (2, 3, 7)).astype(np.float32)
    chunked.reset(options={"episode_id": 5})
    single.reset(options={"episode_id": 5})
    for chunk in actions:
        renders.clear()
        observation, *_ = chunked.step(chunk)
        assert len(renders) == 1
        expected = [single.step(action) for action in chunk][-1][0]
        for key in ("main_images", "wrist_images", "privileged_state"):
            np.testing.assert_array_equal(observation[key], expected[key])
    chunked.close()
    single.close()


@pytest.mark.slow
def test_a_chain_renders_only_the_observations_its_policy_sees(monkeypatch):
    import vlarl_envs.calvin.env as calvin_env_module

    renders = []
    render = calvin_env_module.render_cameras
    monkeypatch.setattr(
        calvin_env_module, "render_cameras", lambda simulator, **kw: renders.append(1) or render(simulator, **kw)
    )
    chunks = np.random.default_rng(1).uniform(-1, 1, (4, 3, 7)).astype(np.float32)
    seen = []

    def policy(observation):
        seen.append(observation)
        return chunks[len(seen) - 1]

    env = gym.make(D, image_size=32)
    assert play_chain(env, policy, chain_index=0, steps_per_task=10) == 0
    assert len(seen) == 4 and len(renders) == 4  # chunks of 3, 3, 3 and 1 action; nothing after the last
    calvin = env.unwrapped
    observation, _ = calvin.reset(options={"chain": 0})
    for chunk, expected in zip(chunks, seen):
        for key in ("main_images", "wrist_images", "states"):
            np.testing.assert_array_equal(expected[key], observation[key])
        for action in chunk:
            observation, *_ = calvin.step(action)
    env.close()


class OracleHelper:
    """A 'policy' that completes the tasks it knows by setting the scene's joints, and nothing otherwise;
    it counts the resets the chain gives it."""

    def __init__(self, env, known):
        self.env, self.known, self.resets = env, known, 0

    def reset(self):
        self.resets += 1

    def __call__(self, observation):
        scene = self.env.unwrapped.simulator.scene
        task = self.env.unwrapped.task
        if task == "open_drawer" and task in self.known:
            drawer = by_name(scene.doors)["base__drawer"]
            drawer.reset(joint_limits(drawer)[1])
        if task == "turn_on_led" and task in self.known:
            by_name(scene.lights)["led"].reset(1)
        return np.tile(OPEN_AND_STILL, (2, 1))  # a chunk of two actions


CHAIN_OF_DRAWER_AND_LED = 65
"""An evaluation chain that opens the drawer, then turns on the LED, then moves the slider right."""


@pytest.mark.slow
def test_a_chain_goes_on_while_its_tasks_succeed():
    assert evaluation_chains(CHAIN_OF_DRAWER_AND_LED + 1)[-1].tasks[:3] == ("open_drawer", "turn_on_led",
                                                                         "move_slider_right")
    env = gym.make(D, obs_mode="state")
    helper = OracleHelper(env, {"open_drawer", "turn_on_led"})
    assert play_chain(env, helper, CHAIN_OF_DRAWER_AND_LED, steps_per_task=3) == 2
    assert helper.resets == 3 and env.unwrapped.task == "move_slider_right"
    assert env.unwrapped.simulator.get_info()["scene_info"]["lights"]["led"]["logical_state"] == 1
    assert play_chain(env, OracleHelper(env, {"turn_on_led"}), CHAIN_OF_DRAWER_AND_LED, steps_per_task=3) == 0
    env.close()


@pytest.mark.slow
def test_a_chain_is_one_episode_whose_return_is_its_length(monkeypatch):
    """Through the registered wrappers a chain is an episode like any other: a chunk stops where a task
    succeeds (``replan``) and the next one begins with its own instruction and step budget; the episode
    ends at the first task that runs out of steps, its return the tasks completed."""
    import vlarl_envs.calvin.env as calvin_env_module

    steps = []
    physics = calvin_env_module.step_physics
    monkeypatch.setattr(calvin_env_module, "step_physics", lambda *args: steps.append(1) or physics(*args))
    succeed_at = {4: "open_drawer", 9: "turn_on_led"}  # the step (of the episode) each task succeeds at
    monkeypatch.setattr(calvin_env_module, "task_done",
                        lambda task, start_info, info: succeed_at.get(len(steps)) == task)
    env = gym.make(D, obs_mode="state", action_chunk=3)
    observation, info = env.reset(options={"chain": CHAIN_OF_DRAWER_AND_LED, "steps_per_task": 6})
    assert info["chain_tasks"][:2] == ["open_drawer", "turn_on_led"] and info["chain_length"] == 0
    instructions, chunk_steps, rewards = [observation["task_description"]], [], []
    terminated = truncated = False
    while not (terminated or truncated):
        observation, reward, terminated, truncated, info = env.step(np.tile(OPEN_AND_STILL, (3, 1)))
        instructions.append(observation["task_description"])
        chunk_steps.append(info["chunk_steps"])
        rewards.append(reward)
    # steps 1-3, 4 (open_drawer succeeds: the chunk stops), 5-7, 8-9 (turn_on_led), 10-12, 13-15 (6 steps spent)
    assert chunk_steps == [3, 1, 3, 2, 3, 3] and rewards == [0, 1, 0, 1, 0, 0]
    assert truncated and not terminated and info["chain_length"] == 2 and info["episode"]["return"] == 2
    assert len(set(instructions)) == 3 and instructions[1] == instructions[0] != instructions[2]
    with pytest.raises(ValueError, match="a chain fixes its own task, split and start; got \\['task'\\]"):
        env.reset(options={"chain": 0, "task": "open_drawer"})
    with pytest.raises(ValueError, match="numbered 0..999, got 1000"):
        env.reset(options={"chain": 1000})
    with pytest.raises(ValueError, match="steps_per_task sets the steps of a chain's tasks"):
        env.reset(options={"steps_per_task": 5})
    env.close()
