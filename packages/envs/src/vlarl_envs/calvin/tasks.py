"""CALVIN's 34 tasks as a symbolic model of the play table: the discrete states that allow each task and
what each changes.

CALVIN's chain generator reasons on this model (``vlarl_envs.calvin.chains``), and it also gives single-task
episodes their start states (a task is played from a state in which it is possible). A symbolic state names
what CALVIN's evaluation tracks: the two lights (``led``, ``lightbulb``: 0 or 1), the side of the sliding door
(``slider``: ``left`` or ``right``), the ``drawer`` (``open`` or ``closed``), where each block lies
(``<color>_block``: ``table``, ``slider_left``, ``slider_right``, ``drawer``, ``grasped``, ``stacked_top``
or ``stacked_bottom``) and whether the gripper holds a block (``grasped``: 0 or 1).

The tasks are listed in the order of calvin's own table (``calvin_agent/evaluation/multistep_sequences.py``):
the chain generator draws tasks by position in that order, so the order is part of the benchmark.
Nothing here imports the simulator.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BLOCK_COLORS = ("red", "blue", "pink")
SLIDER_SIDES = ("right", "left")

SymbolicState = Mapping[str, "str | int"]


def block(color: str) -> str:
    """The state key of a block: ``red`` -> ``red_block``."""
    return f"{color}_block"


@dataclass(frozen=True)
class Transition:
    """One way a task can go: it is possible where every key of ``condition`` has one of its allowed
    values, and it sets the keys of ``effect``."""

    condition: Mapping[str, tuple]
    effect: Mapping[str, str | int]

    def applies(self, state: SymbolicState) -> bool:
        return all(state[key] in allowed for key, allowed in self.condition.items())


@dataclass(frozen=True)
class CalvinTask:
    """A CALVIN task: its name, its category (tasks of one category never share an evaluation chain) and
    the transitions it may take."""

    name: str
    category: int
    transitions: tuple[Transition, ...]

    def next_states(self, state: SymbolicState) -> list[dict]:
        """The state after the task, once per transition that applies (none where the task is impossible)."""
        return [{**state, **transition.effect} for transition in self.transitions if transition.applies(state)]


def transition(effect: Mapping[str, str | int], **condition: str | int | tuple) -> Transition:
    """A transition from keyword conditions, a single value or a tuple of allowed values each."""
    return Transition({key: value if isinstance(value, tuple) else (value,) for key, value in condition.items()},
                      dict(effect))


def _build_tasks() -> tuple[CalvinTask, ...]:
    tasks: list[CalvinTask] = []
    for verb in ("rotate", "push"):
        for color in BLOCK_COLORS:
            for side in SLIDER_SIDES:
                stays = transition({block(color): "table"}, **{block(color): "table", "grasped": 0})
                tasks.append(CalvinTask(f"{verb}_{color}_block_{side}", 1, (stays,)))
    tasks += [
        CalvinTask("move_slider_left", 2, (transition({"slider": "left"}, slider="right", grasped=0),)),
        CalvinTask("move_slider_right", 2, (transition({"slider": "right"}, slider="left", grasped=0),)),
        CalvinTask("open_drawer", 3, (transition({"drawer": "open"}, drawer="closed", grasped=0),)),
        CalvinTask("close_drawer", 3, (transition({"drawer": "closed"}, drawer="open", grasped=0),)),
    ]
    for color in BLOCK_COLORS:
        lifted = {block(color): "grasped", "grasped": 1}
        tasks += [
            CalvinTask(f"lift_{color}_block_table", 4, (transition(lifted, **{block(color): "table", "grasped": 0}),)),
            # The door covers one side of the sliding cabinet; a block lifts from the side it leaves open.
            CalvinTask(f"lift_{color}_block_slider", 5, (
                transition(lifted, **{block(color): "slider_left", "slider": "right", "grasped": 0}),
                transition(lifted, **{block(color): "slider_right", "slider": "left", "grasped": 0}),
            )),
            CalvinTask(f"lift_{color}_block_drawer", 6, (
                transition(lifted, **{block(color): "drawer", "drawer": "open", "grasped": 0}),
            )),
        ]
    tasks.append(CalvinTask("place_in_slider", 7, tuple(
        transition({block(color): f"slider_{side}", "grasped": 0},
                   **{block(color): "grasped", "slider": side, "grasped": 1})
        for color in BLOCK_COLORS for side in SLIDER_SIDES
    )))
    tasks.append(CalvinTask("place_in_drawer", 7, tuple(
        transition({block(color): "drawer", "grasped": 0}, **{block(color): "grasped", "drawer": "open", "grasped": 1})
        for color in BLOCK_COLORS
    )))
    pairs = [(top, bottom) for top in BLOCK_COLORS for bottom in BLOCK_COLORS if top != bottom]
    tasks.append(CalvinTask("stack_block", 10, tuple(
        transition({block(top): "stacked_top", block(bottom): "stacked_bottom", "grasped": 0},
                   **{block(top): "grasped", block(bottom): "table", "grasped": 1})
        for top, bottom in pairs
    )))
    tasks.append(CalvinTask("unstack_block", 11, tuple(
        transition({block(top): "table", block(bottom): "table"},
                   **{block(top): "stacked_top", block(bottom): "stacked_bottom", "grasped": 0})
        for top, bottom in pairs
    )))
    for light, name in (("lightbulb", "lightbulb"), ("led", "led")):
        tasks += [
            CalvinTask(f"turn_on_{name}", 8, (transition({light: 1}, **{light: 0, "grasped": 0}),)),
            CalvinTask(f"turn_off_{name}", 8, (transition({light: 0}, **{light: 1, "grasped": 0}),)),
        ]
    in_slider = ("slider_right", "slider_left")
    tasks.append(CalvinTask("push_into_drawer", 9, tuple(
        transition({block(color): "drawer", "grasped": 0},
                   **{block(color): "table", "drawer": "open", "grasped": 0},
                   **{block(other): in_slider for other in BLOCK_COLORS if other != color})
        for color in BLOCK_COLORS
    )))
    return tuple(tasks)


CALVIN_TASKS: Mapping[str, CalvinTask] = {task.name: task for task in _build_tasks()}
"""The 34 tasks by name, in calvin's order."""

TASK_NAMES: tuple[str, ...] = tuple(CALVIN_TASKS)

INITIAL_CONDITION_VALUES: Mapping[str, tuple] = {
    "led": (0, 1),
    "lightbulb": (0, 1),
    "slider": ("right", "left"),
    "drawer": ("closed", "open"),
    **{block(color): ("table", "slider_right", "slider_left") for color in BLOCK_COLORS},
    "grasped": (0,),
}
"""The values each key takes in CALVIN's evaluation start states, in calvin's key and value order."""


@functools.cache
def initial_conditions() -> tuple[dict, ...]:
    """CALVIN's evaluation start states: every combination of ``INITIAL_CONDITION_VALUES`` with one or two
    blocks on the table and at most one block on each side of the sliding cabinet (192 states)."""
    states = []
    for values in itertools.product(*INITIAL_CONDITION_VALUES.values()):
        places = [values[index] for index, key in enumerate(INITIAL_CONDITION_VALUES) if key.endswith("_block")]
        if places.count("table") in (1, 2) and places.count("slider_right") < 2 and places.count("slider_left") < 2:
            states.append(dict(zip(INITIAL_CONDITION_VALUES, values)))
    return tuple(states)


def chain_is_possible(state: SymbolicState, chain: Sequence[str]) -> bool:
    """Whether ``chain`` plays from ``state`` with exactly one outcome per task and no two tasks of one
    category (the rule CALVIN's chains follow)."""
    for name in chain:
        outcomes = CALVIN_TASKS[name].next_states(state)
        if len(outcomes) != 1:
            return False
        state = outcomes[0]
    categories = [CALVIN_TASKS[name].category for name in chain]
    return len(set(categories)) == len(categories)


MAX_TASKS_BEFORE_START = 2
"""How many tasks away from CALVIN's start states a single-task episode may start (unstacking needs two)."""


def _key(state: SymbolicState) -> tuple:
    return tuple(sorted(state.items()))


@functools.cache
def start_states(task: str) -> tuple[dict, ...]:
    """The symbolic states a single-task episode of ``task`` starts from: CALVIN's evaluation start states
    that allow it, or, for tasks that none allows (placing and stacking need a block in the hand,
    unstacking a stack, lifting from the drawer a block inside it), the states the fewest other tasks lead
    to from them (one for a held block or a block in the drawer, two for a stack)."""
    frontier = list(initial_conditions())
    for _ in range(MAX_TASKS_BEFORE_START + 1):
        allowed = [state for state in frontier if CALVIN_TASKS[task].next_states(state)]
        if allowed:
            return tuple(allowed)
        reached = {_key(after): after for state in frontier for other in CALVIN_TASKS.values()
                   for after in other.next_states(state)}
        frontier = list(reached.values())
    raise ValueError(f"no CALVIN state within {MAX_TASKS_BEFORE_START} tasks of the start states allows {task!r}")
