"""CALVIN's symbolic task model, its 1000 evaluation chains and the chain score. No simulator needed.

The pinned chains and the digest of all 1000 were computed once with calvin's own generator
(``calvin_agent/evaluation/multistep_sequences.py`` from ../shared/vendor/calvin-reference, run as
``get_sequences(1000)`` with its missing ``calvin_agent.evaluation.utils.temp_seed`` supplied as a
save-seed-restore context manager over numpy's global generator, which is all calvin's helper does).
calvin's generator does not import on its own, so the test pins its output instead of running it.
"""

import hashlib
import json

import numpy as np
import pytest

from vlarl_envs.calvin.chains import (
    CHAIN_LENGTH,
    NUM_CHAINS,
    Chain,
    evaluation_chains,
    format_summary,
    summarize,
)
from vlarl_envs.calvin.tasks import CALVIN_TASKS, TASK_NAMES, chain_is_possible, initial_conditions, start_states


def condition(led, lightbulb, slider, drawer, red, blue, pink):
    return {"led": led, "lightbulb": lightbulb, "slider": slider, "drawer": drawer, "red_block": red,
            "blue_block": blue, "pink_block": pink, "grasped": 0}


CALVIN_FIRST_CHAINS = [
    (condition(1, 1, "left", "open", "slider_left", "table", "slider_right"),
     ("rotate_blue_block_right", "move_slider_right", "lift_red_block_slider", "place_in_slider",
      "turn_off_lightbulb")),
    (condition(1, 1, "right", "open", "slider_right", "table", "slider_left"),
     ("turn_off_led", "push_into_drawer", "lift_blue_block_drawer", "place_in_slider", "close_drawer")),
    (condition(0, 1, "right", "closed", "table", "slider_right", "slider_left"),
     ("lift_pink_block_slider", "place_in_slider", "open_drawer", "rotate_red_block_right", "lift_red_block_table")),
    (condition(1, 0, "right", "closed", "slider_right", "table", "table"),
     ("rotate_blue_block_right", "lift_pink_block_table", "place_in_slider", "move_slider_left", "open_drawer")),
    (condition(1, 0, "left", "closed", "slider_right", "table", "table"),
     ("open_drawer", "lift_pink_block_table", "place_in_slider", "turn_on_lightbulb", "rotate_blue_block_left")),
]
CALVIN_CHAINS_SHA256 = "840cb992c69ce9b6d59f6020966b6300c15233f8e0b9667b6486c1962424d308"
"""sha256 of ``json.dumps([[initial_condition, list(tasks)], ...])`` over calvin's 1000 chains."""


def test_the_model_has_calvins_34_tasks_and_192_start_states():
    assert len(TASK_NAMES) == 34 and TASK_NAMES[:2] == ("rotate_red_block_right", "rotate_red_block_left")
    assert TASK_NAMES[-1] == "push_into_drawer"
    assert len({task.category for task in CALVIN_TASKS.values()}) == 11
    states = initial_conditions()
    assert len(states) == 192 and all(state["grasped"] == 0 for state in states)
    for state in states:
        places = [state[key] for key in ("red_block", "blue_block", "pink_block")]
        assert 1 <= places.count("table") <= 2


def test_every_task_has_start_states_that_allow_it():
    for name in TASK_NAMES:
        states = start_states(name)
        assert states and all(CALVIN_TASKS[name].next_states(state) for state in states), name
    assert all(
        state["red_block"] == "drawer" and state["drawer"] == "open" for state in start_states("lift_red_block_drawer")
    )
    assert all(state["grasped"] == 1 for state in start_states("stack_block"))
    assert all("stacked_top" in state.values() for state in start_states("unstack_block"))
    assert all(state in initial_conditions() for state in start_states("open_drawer"))


def test_a_chain_follows_calvins_rules():
    state = condition(0, 0, "right", "closed", "table", "slider_left", "slider_right")
    assert chain_is_possible(state, ["open_drawer", "lift_red_block_table", "place_in_drawer", "turn_on_led",
                                     "move_slider_left"])
    assert not chain_is_possible(state, ["open_drawer", "close_drawer"])  # one category twice
    assert not chain_is_possible(state, ["close_drawer"])  # the drawer is closed
    assert not chain_is_possible(state, ["place_in_slider"])  # nothing is held


def test_the_first_chains_are_calvins():
    chains = evaluation_chains(len(CALVIN_FIRST_CHAINS))
    assert all(isinstance(chain, Chain) for chain in chains)
    assert [(chain.initial_condition, chain.tasks) for chain in chains] == CALVIN_FIRST_CHAINS
    assert evaluation_chains(2) == chains[:2]
    with pytest.raises(ValueError, match="1000 evaluation chains"):
        evaluation_chains(NUM_CHAINS + 1)


@pytest.mark.slow
def test_all_thousand_chains_are_calvins():
    chains = evaluation_chains()
    assert len(chains) == NUM_CHAINS
    for chain in chains:
        assert len(chain.tasks) == CHAIN_LENGTH and chain_is_possible(chain.initial_condition, chain.tasks)
    serialized = json.dumps([[dict(chain.initial_condition), list(chain.tasks)] for chain in chains])
    assert hashlib.sha256(serialized.encode()).hexdigest() == CALVIN_CHAINS_SHA256


def test_summarize_gives_success_in_a_row_and_average_length():
    summary = summarize([0, 1, 5, 2, 5])
    assert summary == pytest.approx({"success_1": 0.8, "success_2": 0.6, "success_3": 0.4, "success_4": 0.4,
                                     "success_5": 0.4, "average_length": 2.6})
    assert format_summary(summary) == (
        "1/5: 80.0% | 2/5: 60.0% | 3/5: 40.0% | 4/5: 40.0% | 5/5: 40.0% || average length 2.60"
    )
    lengths = np.random.default_rng(0).integers(0, 6, 200)
    summary = summarize(lengths)
    assert summary["average_length"] == pytest.approx(sum(summary[f"success_{k}"] for k in range(1, 6)))
    for bad in ([], [6], [-1]):
        with pytest.raises(ValueError):
            summarize(bad)
