"""LIBERO's goal progress: the dense reward of pick-and-place goals, from the privileged state."""

import gymnasium as gym
import numpy as np
import pytest

from vlarl_envs.libero.privileged import ENTITY_STATE_DIM, PRIVILEGED_STATE_DIM, ROBOT_STATE_DIM
from vlarl_envs.libero.progress import goal_progress, placing_pairs


def privileged(hand, *positions):
    """A privileged state vector: the hand at ``hand``, unrotated unit boxes at ``positions``."""
    state = np.zeros(PRIVILEGED_STATE_DIM, np.float32)
    state[0:3], state[3] = hand, 1.0
    for slot, position in enumerate(positions):
        start = ROBOT_STATE_DIM + slot * ENTITY_STATE_DIM
        state[start:start + 3], state[start + 3] = position, 1.0
    return state


def test_placing_pairs_cover_on_and_in_goals_only():
    names = ("akita_black_bowl_1", "plate_1", "basket_1_contain_region")
    assert placing_pairs([["on", "akita_black_bowl_1", "plate_1"]], names) == ((0, 1),)
    assert placing_pairs([["In", "plate_1", "basket_1_contain_region"], ["on", "akita_black_bowl_1", "plate_1"]],
                         names) == ((1, 2), (0, 1))
    assert placing_pairs([["open", "wooden_cabinet_1_top_region"]], names) == ()
    assert placing_pairs([["on", "akita_black_bowl_1", "plate_1"], ["turnon", "flat_stove_1"]], names) == ()


def test_progress_grows_as_the_hand_reaches_and_the_object_nears_its_target():
    pairs = ((0, 1),)
    far = goal_progress(privileged([0.0, 0.0, 1.0], [0.3, 0.0, 0.9], [0.0, 0.3, 0.9]), pairs)
    reached = goal_progress(privileged([0.3, 0.0, 0.9], [0.3, 0.0, 0.9], [0.0, 0.3, 0.9]), pairs)
    carried = goal_progress(privileged([0.1, 0.2, 1.0], [0.1, 0.2, 1.0], [0.0, 0.3, 0.9]), pairs)
    placed = goal_progress(privileged([0.0, 0.3, 0.95], [0.0, 0.3, 0.95], [0.0, 0.3, 0.9]), pairs)
    assert 0.0 <= far < reached < carried < placed == pytest.approx(1.0)
    assert goal_progress(privileged([0.0, 0.0, 1.0], [0.3, 0.0, 0.9]), ()) == 0.0


@pytest.mark.sim
@pytest.mark.slow
def test_the_expert_earns_progress_and_shaped_pays_the_sparse_return():
    """On a LIBERO-Spatial task the scripted expert's progress climbs from near 0 to most of its range (the
    released bowl sits a few cm off the plate's origin, the hand above it); the shaped reward's undiscounted
    return is the sparse one."""
    from vlarl_envs import family_of
    from vlarl_envs.libero.registration import libero_env_id
    from vlarl_envs.testing import require_simulator

    require_simulator("libero")
    env_id = libero_env_id("Spatial")
    task = family_of(env_id).tasks(env_id)[0]
    returns = {}
    for mode in ("dense", "shaped"):
        env = gym.make(env_id, obs_mode="state", reward_mode=mode)
        observation, _ = env.reset(options={"episode_id": 0, "task": task, "split": "train"})
        expert = family_of(env_id).make_expert(task)
        rewards, done, success = [], False, False
        while not done:
            observation, reward, terminated, truncated, info = env.step(expert(observation))
            rewards.append(reward)
            success = success or info["success"]
            done = terminated or truncated
        env.close()
        assert success
        returns[mode] = rewards
    dense = returns["dense"]
    assert dense[0] < 0.3 and dense[-1] > 0.7 and max(dense) <= 1.0  # measured: 0.12 at the start, 0.76 at success
    assert sum(returns["shaped"]) == pytest.approx(1.0)
