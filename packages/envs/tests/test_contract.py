import numpy as np
import pytest
from gymnasium import spaces

from vlarl_envs.contract import (
    INSTRUCTION_SPACE,
    image_shape,
    observation_space,
    validate_action,
    validate_choice,
    validate_options,
)

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
