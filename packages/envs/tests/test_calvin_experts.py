"""CALVIN's fixture points in ``privileged_state`` and its scripted experts. Needs calvin_env (an error in CI
when missing).

An expert's episode takes 30-100 steps, 0.2-0.5 s without cameras, so the tests play one task of each
kind of expert for two episodes, in both ids.
"""

import gymnasium as gym
import numpy as np
import pytest

from vlarl_envs.testing import require_simulator

require_simulator("calvin_env")

from vlarl_envs import family_of
from vlarl_envs.calvin import TASK_NAMES, calvin_env_id
from vlarl_envs.calvin.expert_geometry import euler_of, hand_down, rotation_of
from vlarl_envs.calvin.experts import EXPERT_TASKS
from vlarl_envs.calvin.privileged import PRIVILEGED_STATE_DIM, read_privileged_state
from vlarl_envs.calvin.simulator import aabb, by_name
from vlarl_envs.expert_success import play_expert, success_table

pytestmark = pytest.mark.sim

ABC, D = calvin_env_id("ABC"), calvin_env_id("D")


def test_euler_helpers_round_trip_and_the_hand_points_down():
    """The experts' Euler angles read back what built them, as pybullet composes them."""
    for euler in ([np.pi, 0.0, 1.5], [2.8, -0.3, -2.0], [0.1, 0.4, 3.0]):
        np.testing.assert_allclose(euler_of(rotation_of(np.array(euler))), euler, atol=1e-9)
    hand = rotation_of(hand_down(0.7))
    np.testing.assert_allclose(hand[:, 2], [0.0, 0.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(hand[:, 1], [np.sin(0.7), -np.cos(0.7), 0.0], atol=1e-12)  # the fingers' axis


def test_privileged_state_holds_the_fixture_points_of_every_scene():
    """The vector keeps robot_obs and scene_obs first and adds the handles, the button and the switch, each on
    its own moving link wherever the scene mounts it."""
    env = gym.make(ABC, obs_mode="state")
    assert env.observation_space["privileged_state"].shape == (PRIVILEGED_STATE_DIM,) == (51,)
    scenes = set()
    for episode_id in range(16):
        observation, info = env.reset(options={"episode_id": episode_id, "task": "open_drawer"})
        if info["scene"] in scenes:
            continue
        scenes.add(info["scene"])
        assert env.observation_space.contains(observation)
        np.testing.assert_array_equal(observation["privileged_state"][:15], observation["states"])
        state = read_privileged_state(observation["privileged_state"])
        simulator = env.unwrapped.simulator
        table = by_name(simulator.scene.fixed_objects)["table"]
        links = table.get_info()["links"]
        for link, point in (("drawer_link", state.drawer_handle), ("slide_link", state.slider_handle),
                            ("button_link", state.button_top), ("switch_link", state.switch_handle)):
            low, high = aabb(simulator, table.uid, links[link])
            assert np.all(low < point) and np.all(point < high), f"{link} in scene {info['scene']}"
        assert state.button_top[2] == pytest.approx(aabb(simulator, table.uid, links["button_link"])[1][2], abs=0.005)
        assert state.drawer_handle[1] < -0.2  # the handle sticks out in front of the table, towards the robot
    assert scenes == {"A", "B", "C"}
    env.close()


def test_every_task_has_an_expert_through_the_family():
    family = family_of(ABC)
    assert EXPERT_TASKS == TASK_NAMES
    assert all(family.expert(task) is not None for task in family.tasks(ABC))
    with pytest.raises(ValueError, match="no scripted expert"):
        family.make_expert("juggle_blocks")


@pytest.mark.parametrize(("env_id", "task"), [
    (ABC, "open_drawer"),
    (D, "move_slider_right"),
    (ABC, "turn_on_lightbulb"),
    (D, "turn_off_led"),
    (ABC, "lift_blue_block_slider"),
    (D, "place_in_drawer"),
    (ABC, "stack_block"),
    (D, "rotate_pink_block_left"),
    (ABC, "push_red_block_right"),
])
def test_expert_succeeds_on_train_episodes(env_id, task):
    """One task of each kind of expert succeeds in its first two training episodes, well within calvin's
    360 steps."""
    env = gym.make(env_id, obs_mode="state")
    for episode_id in range(2):
        succeeded, steps = play_expert(env, task, episode_id)
        assert succeeded and steps < env.unwrapped.horizon / 2, f"{task} episode {episode_id}: {steps} steps"
    env.close()


def test_success_table_counts_each_task_and_names_the_missing_experts(monkeypatch):
    """A row per task of the id with its successes out of the episodes played; a task without an expert says so."""
    import dataclasses

    from vlarl_envs import expert_success

    family = family_of(D)
    two_tasks = dataclasses.replace(family, tasks=lambda env_id, env_kwargs=None: ("open_drawer", "close_drawer"),
                                    expert=lambda task: family.expert(task) if task == "open_drawer" else None)
    monkeypatch.setattr(expert_success, "family_of", lambda env_id: two_tasks)
    table = success_table([D], episodes=1).splitlines()
    assert table[2].startswith(f"| {D} | open_drawer | 1/1 | ") and table[3] == f"| {D} | close_drawer | no expert | |"
    assert len(table) == 4
