"""LIBERO's privileged state and scripted experts. Needs the simulator (an error in CI when missing).

An episode of an expert takes 1-2 s without cameras and building a task's simulator 4-9 s, so the
tests play two tasks for two episodes each.
"""

import gymnasium as gym
import numpy as np
import pytest

from vlarl_envs.testing import require_simulator

require_simulator("libero.libero.envs")

from vlarl_envs import family_of
from vlarl_envs.expert_success import play_expert
from vlarl_envs.libero import libero_env_id
from vlarl_envs.libero.expert_geometry import downward_hand, hand_yaw
from vlarl_envs.libero.experts import scripted_expert
from vlarl_envs.libero.privileged import (
    PRIVILEGED_STATE_DIM,
    quaternion_of,
    read_privileged_state,
    rotation_of,
)

pytestmark = pytest.mark.sim

SPATIAL, OBJECT, GOAL = (libero_env_id(suite) for suite in ("Spatial", "Object", "Goal"))


def test_rotation_helpers_round_trip():
    """Quaternions and the hand's yaw read back what built them, so the experts steer the right way."""
    for yaw in (-2.5, -0.3, 0.0, 1.2, 3.0):
        hand = downward_hand(yaw)
        assert hand_yaw(hand) == pytest.approx(yaw)
        np.testing.assert_allclose(rotation_of(quaternion_of(hand)), hand, atol=1e-12)
        np.testing.assert_allclose(hand[:, 2], [0.0, 0.0, -1.0], atol=1e-12)  # pointing down


def test_privileged_state_is_declared_and_holds_the_goal_entities():
    """Both obs modes declare a fixed-size ``privileged_state``; it holds the hand as ``states`` has it
    and the bowl and plate the goal names, where the simulator has them, and zeros in unused slots."""
    for obs_mode in ("rgb", "state"):
        space = gym.make(SPATIAL, obs_mode=obs_mode, image_size=32).observation_space["privileged_state"]
        assert space.shape == (PRIVILEGED_STATE_DIM,) and space.dtype == np.float32
    env = gym.make(SPATIAL, obs_mode="state", tasks=[family_of(SPATIAL).tasks(SPATIAL)[0]])
    observation, _ = env.reset(options={"episode_id": 0, "split": "train"})
    assert env.observation_space.contains(observation)
    state = read_privileged_state(observation["privileged_state"])
    np.testing.assert_allclose(state.hand_position, observation["states"][:3], atol=1e-6)
    np.testing.assert_allclose(state.fingers, observation["states"][6:8], atol=1e-6)
    sim = env.unwrapped.simulator.sim
    bowl, plate = state.entities
    for entity, body in ((bowl, "akita_black_bowl_1_main"), (plate, "plate_1_main")):
        np.testing.assert_allclose(entity.position, sim.data.body_xpos[sim.model.body_name2id(body)], atol=1e-6)
        assert entity.bottom == pytest.approx(bowl.position[2], abs=0.01)  # both rest on the table
    assert 0.1 < 2 * max(bowl.box_half) < 0.12 and bowl.top - bowl.bottom == pytest.approx(0.05, abs=0.01)
    assert not observation["privileged_state"][-2 * 20:].any()
    env.close()


def test_tasks_without_an_expert_answer_none_and_the_family_raises():
    """Spatial and Object have an expert for every task, Goal for all but one, LIBERO-10 and -90 none."""
    family = family_of(GOAL)
    assert all(family.expert(task) is not None for env_id in (SPATIAL, OBJECT) for task in family.tasks(env_id))
    uncovered = "open_the_top_drawer_and_put_the_bowl_inside"
    assert [task for task in family.tasks(GOAL) if family.expert(task) is None] == [uncovered]
    long_task, kitchen_task = (family.tasks(libero_env_id(suite))[0] for suite in ("10", "90"))
    assert scripted_expert(long_task) is None and family.expert(kitchen_task) is None
    with pytest.raises(ValueError, match="no scripted expert"):
        family.make_expert(uncovered)


@pytest.mark.slow
@pytest.mark.parametrize(("env_id", "task_index"), [(SPATIAL, 4), (OBJECT, 7)])
def test_expert_succeeds_on_train_episodes(env_id, task_index):
    """The bowl from the drawer onto the plate (Spatial) and the milk into the basket (Object), each in
    two training episodes and well within the suite's horizon."""
    family = family_of(env_id)
    task = family.tasks(env_id)[task_index]
    env = gym.make(env_id, obs_mode="state", tasks=[task])
    for episode_id in range(2):
        succeeded, steps = play_expert(env, task, episode_id)
        assert succeeded and steps < env.unwrapped.horizon * 0.7, f"{task} episode {episode_id}: {steps} steps"
    env.close()
