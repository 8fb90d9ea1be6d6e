"""The contract every vlarl env keeps (docs/architecture.md): its helpers, and every registered ``vlarl/`` id.

Building a simulator takes from half a second (CALVIN) to over ten (ManiSkill, GSEnv), so every id is checked
as registered, the ids whose envs build their simulator at the first reset are built, and one id per family
(``STEPPED``) is reset and stepped in one test, its simulator built once.
"""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from vlarl_envs import family_of
from vlarl_envs.contract import (
    INSTRUCTION_SPACE,
    image_shape,
    observation_space,
    validate_action,
    validate_choice,
    validate_options,
)
from vlarl_envs.testing import require_simulator

BOX = spaces.Box(-1.0, 1.0, (4,), np.float32)


def test_valid_action_is_clipped_float32():
    action = validate_action("vlarl/X-v0", np.array([2.0, -3.0, 0.5, 0.0]), BOX)
    assert action.dtype == np.float32
    np.testing.assert_allclose(action, [1.0, -1.0, 0.5, 0.0])


@pytest.mark.parametrize(
    "bad, expected",
    [
        (np.zeros(3, np.float32), "shape (4,)"),
        (np.zeros((1, 4), np.float32), "shape (4,)"),
        (np.zeros(4, np.int64), "dtype int64"),
        (np.array([0.0, np.nan, 0.0, 0.0]), "finite"),
        (np.array([0.0, np.inf, 0.0, 0.0]), "finite"),
        ("left", "dtype"),
    ],
)
def test_bad_actions_name_env_expected_and_received(bad, expected):
    with pytest.raises(ValueError, match="vlarl/X-v0") as error:
        validate_action("vlarl/X-v0", bad, BOX)
    assert expected in str(error.value)


def test_unknown_option_and_bad_episode_id():
    assert validate_options("e", {"episode_id": 3, "task": "a"}) == {"episode_id": 3, "task": "a"}
    with pytest.raises(ValueError, match="unknown reset option.*'colour'"):
        validate_options("e", {"colour": "red"})
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match="episode_id"):
            validate_options("e", {"episode_id": bad})


def test_validate_choice_lists_allowed_values():
    with pytest.raises(ValueError, match=r"unknown task 'fly'.*\['reach', 'push'\]"):
        validate_choice("e", "task", "fly", ["reach", "push"])


def test_observation_space_modes():
    rgb = observation_space("rgb", (48, 64), np.zeros(2), np.ones(2), wrist_camera=True)
    assert rgb["main_images"].shape == (48, 64, 3) and rgb["wrist_images"].dtype == np.uint8
    state = observation_space("state", 64, np.zeros(2), np.ones(2))
    assert set(state.spaces) == {"states", "task_description"}
    with pytest.raises(ValueError, match="obs_mode"):
        observation_space("depth", 64, np.zeros(2), np.ones(2))
    with pytest.raises(ValueError, match="positive"):
        image_shape(0)


def test_instruction_space_takes_sentences():
    assert INSTRUCTION_SPACE.contains("put the red cube on the plate, then let go.")
    assert not INSTRUCTION_SPACE.contains("")


VLARL_IDS = sorted(env_id for env_id in gym.registry if env_id.startswith("vlarl/"))
SIMULATORS = {"MetaWorld": "metaworld", "ManiSkill": "mani_skill", "GSEnv": "mani_skill",
              "LIBERO": "libero.libero.envs", "CALVIN": "calvin_env"}
"""The module each family's simulator needs."""
BUILT_ON_RESET = ("MetaWorld", "LIBERO", "CALVIN")
"""Families whose envs build their simulator at the first reset, so that building every id costs little."""
STEPPED = {
    "vlarl/MetaWorld-reach-v3": {"image_size": 32},
    "vlarl/ManiSkill-PickCube-v1": {"image_size": 32},
    "vlarl/GSEnv-PutCubeOnPlate-v0": {"image_size": (48, 64)},
    "vlarl/LIBERO-Spatial-v0": {"image_size": 32, "first_task_only": True},
    "vlarl/CALVIN-D-v0": {"image_size": 32, "tasks": ["open_drawer"]},
}
"""One id per family, with the keywords that keep its simulator small; a multi-task id plays one task, so that
check_env's resets build one simulator."""
SLOW = ("vlarl/ManiSkill-PickCube-v1", "vlarl/LIBERO-Spatial-v0")
"""The stepped ids whose checks take over 20 s on a CPU (ManiSkill's scene builds in 13 s, LIBERO's resets settle)."""


def test_every_family_has_ids_and_every_stepped_id_is_registered():
    assert {family_of(env_id).name for env_id in VLARL_IDS} == set(SIMULATORS)
    assert {family_of(env_id).name for env_id in STEPPED} == set(SIMULATORS) and set(STEPPED) <= set(VLARL_IDS)


@pytest.mark.parametrize("env_id", VLARL_IDS)
def test_every_id_is_registered_under_the_contract(env_id):
    """Each id builds its own env (named in its errors) without gymnasium's checker and order wrappers, whose
    checks the env makes itself, and a family that batches gives the id a vector entry point."""
    spec = gym.spec(env_id)
    assert spec.kwargs["env_id"] == env_id
    assert not spec.order_enforce and spec.disable_env_checker
    assert (spec.vector_entry_point is not None) == family_of(env_id).batched


@pytest.mark.sim
@pytest.mark.parametrize("env_id", [env_id for env_id in VLARL_IDS if family_of(env_id).name in BUILT_ON_RESET])
def test_an_id_that_builds_on_reset_declares_the_contract_spaces(env_id):
    family = family_of(env_id)
    require_simulator(SIMULATORS[family.name])
    env = gym.make(env_id, image_size=16)
    simulator = env.unwrapped
    keys = {"main_images", "states", "task_description", "privileged_state"}
    assert keys <= set(env.observation_space.spaces) <= keys | {"wrist_images"}
    assert env.observation_space["main_images"] == spaces.Box(0, 255, (16, 16, 3), np.uint8)
    for key in ("states", "privileged_state"):
        assert env.observation_space[key].dtype == np.float32 and len(env.observation_space[key].shape) == 1
    action = env.action_space
    assert action.dtype == np.float32 and len(action.shape) == 1
    assert (action.low == -1).all() and (action.high == 1).all()
    assert tuple(simulator.tasks) == family.tasks(env_id) and simulator.splits == family.splits(env_id)
    env.close()


@pytest.mark.sim
@pytest.mark.parametrize("env_id", [pytest.param(env_id, marks=[pytest.mark.slow] if env_id in SLOW else [])
                                    for env_id in STEPPED])
def test_one_id_per_family_keeps_the_contract(env_id):
    """One env per family, built once, rendering for ``render()`` too: gymnasium's checker, a reset and a step
    within the declared spaces with the contract's info keys, bad input refused naming the id, and images
    deferred and completed."""
    family = family_of(env_id)
    require_simulator(SIMULATORS[family.name])
    kwargs = dict(STEPPED[env_id])
    if kwargs.pop("first_task_only", False):
        kwargs["tasks"] = list(family.tasks(env_id)[:1])
    env = gym.make(env_id, render_mode="rgb_array", **kwargs)
    try:
        with pytest.raises(RuntimeError, match=f"{env_id}: call reset"):
            env.step(env.action_space.sample())
        check_env(env.unwrapped, skip_render_check=True)
        check_env(env, skip_render_check=True)
        assert_reset_and_step_keep_the_contract(env, family.splits(env_id)[-1])
        assert_bad_input_is_refused_naming_the_id(env, env_id)
        assert_deferred_images_complete(env)
    finally:
        env.close()


def assert_reset_and_step_keep_the_contract(env, split):
    observation, info = env.reset(seed=0, options={"episode_id": 3, "split": split})
    assert set(observation) == set(env.observation_space.spaces) and env.observation_space.contains(observation)
    assert {"success", "is_success", "task", "episode_id", "split"} <= set(info)
    assert (info["episode_id"], info["split"], info["is_success"]) == (3, split, info["success"])
    assert info["task"] in env.unwrapped.tasks and isinstance(info["success"], bool)
    np.testing.assert_array_equal(env.render(), observation["main_images"])
    observation, reward, terminated, truncated, info = env.step(np.zeros(env.action_space.shape, np.float32))
    assert env.observation_space.contains(observation) and isinstance(reward, float)
    assert isinstance(terminated, bool) and isinstance(truncated, bool)
    assert isinstance(info["success"], bool) and info["is_success"] == info["success"]


def assert_bad_input_is_refused_naming_the_id(env, env_id):
    env.reset(options={"episode_id": 0})
    shape = env.action_space.shape
    with pytest.raises(ValueError, match=rf"{env_id}.*shape \({shape[0]},\).*got shape \({shape[0] - 1},\)"):
        env.step(np.zeros(shape[0] - 1, np.float32))
    with pytest.raises(ValueError, match=f"{env_id}.*finite"):
        env.step(np.full(shape, np.nan, np.float32))
    with pytest.raises(ValueError, match=f"{env_id}.*dtype int64"):
        env.step(np.zeros(shape, np.int64))
    for options, message in (({"difficulty": 3}, "unknown reset option"), ({"split": "nowhere"}, "unknown split"),
                             ({"task": "fly_to_the_moon"}, "unknown task 'fly_to_the_moon'")):
        with pytest.raises(ValueError, match=f"{env_id}: {message}"):
            env.reset(options=options)
    env.step(np.full(shape, 3.0, np.float32))  # clipped to the Box: the env still works after refusing


def assert_deferred_images_complete(env):
    """Within an action chunk a step leaves the images out (``DefersImages``); completing the observation
    renders those of the state the step left, which ``render()`` then shows."""
    simulator = env.unwrapped
    env.reset(options={"episode_id": 1})
    simulator.defer_images = True
    try:
        deferred, *_ = env.step(np.zeros(env.action_space.shape, np.float32))
    finally:
        simulator.defer_images = False
    assert "main_images" not in deferred and "wrist_images" not in deferred
    completed = simulator.complete_observation(deferred)
    assert set(completed) == set(env.observation_space.spaces) and env.observation_space.contains(completed)
    np.testing.assert_array_equal(env.render(), completed["main_images"])
    np.testing.assert_array_equal(simulator.complete_observation(completed)["main_images"], completed["main_images"])
