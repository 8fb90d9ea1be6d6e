"""Scripted CALVIN experts read off ``privileged_state`` (``vlarl_envs.calvin.privileged``): the source of
CALVIN demonstrations.

Each is a small state machine over calvin's relative actions. calvin's robot integrates those actions
into a target pose that its inverse kinematics tracks (``use_target_pose``), so an expert keeps its own
copy of that target, starting from the hand's pose at the episode's first observation, and steps it
towards each waypoint by at most the action's bound: a hand held back by a handle or a block never
winds the target up beyond where the expert wants it.

- Fixtures (drawer, sliding door, switch): the hand goes to the fixture point of ``privileged_state``,
  closes on the handle (or, for the switch, pushes its bar with the closed fingers from in front of the
  switch's slanted panel) and moves it along its joint; the button is pressed from above.
- Blocks: the hand comes down over the block with the fingers across its narrow side, closes and
  lifts; then, by task, it holds the block up (lifting, unstacking), carries it into the sliding
  cabinet's open side, into the drawer or onto another block and lets go (placing, stacking, pushing
  into the drawer), turns it by 75 degrees on the table (rotating) or slides it 13 cm along the table
  (pushing). Far from the robot, the hand tilts outwards, which reaches further than pointing down; in
  the sliding cabinet it leans away from the door, the wall and the cabinet's top. A grasp that holds
  nothing, a block that slips out and a hand stopped on its way start the grasp over.

The experts live in ``fixture_experts`` and ``block_experts``, on the state machine of ``phased_expert`` and
the rotations and table geometry of ``expert_geometry``; this module maps each task to its expert.

``scripted_expert`` answers None for a task without an expert (``EXPERT_TASKS`` lists those with one).

>>> expert = scripted_expert("open_drawer")        # doctest: +SKIP
>>> obs, *_ = env.step(expert(obs))                 # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from vlarl_envs.calvin.block_experts import (
    PUSH_DISTANCE,
    ROTATION,
    BlockExpert,
    PlaceExpert,
    PushExpert,
    RotateExpert,
    block_on_table,
    into_drawer,
    into_slider,
    onto_block,
    the_block,
    top_block,
)
from vlarl_envs.calvin.fixture_experts import DrawerExpert, PressExpert, slider_expert, switch_expert
from vlarl_envs.calvin.tasks import BLOCK_COLORS, TASK_NAMES
from vlarl_envs.families import Expert


def expert_factories() -> dict[str, Callable[[], Expert]]:
    """Every task with an expert -> a function building a fresh one."""
    factories: dict[str, Callable[[], Expert]] = {
        "open_drawer": lambda: DrawerExpert(opening=True),
        "close_drawer": lambda: DrawerExpert(opening=False),
        "move_slider_left": lambda: slider_expert(leftwards=True),
        "move_slider_right": lambda: slider_expert(leftwards=False),
        "turn_on_lightbulb": lambda: switch_expert(up=True),
        "turn_off_lightbulb": lambda: switch_expert(up=False),
        "turn_on_led": PressExpert,
        "turn_off_led": PressExpert,
        "place_in_slider": lambda: PlaceExpert(into_slider),
        "place_in_drawer": lambda: PlaceExpert(into_drawer),
        "stack_block": lambda: PlaceExpert(onto_block),
        "push_into_drawer": lambda: PlaceExpert(into_drawer, choose=block_on_table),
        "unstack_block": lambda: BlockExpert(top_block),
    }
    for color in BLOCK_COLORS:
        for source in ("table", "slider", "drawer"):
            factories[f"lift_{color}_block_{source}"] = functools.partial(BlockExpert, the_block(color))
        for side, sign in (("left", 1.0), ("right", -1.0)):  # left: counter-clockwise, and towards -x
            factories[f"rotate_{color}_block_{side}"] = functools.partial(RotateExpert, color, sign * ROTATION)
            factories[f"push_{color}_block_{side}"] = functools.partial(PushExpert, color, -sign * PUSH_DISTANCE)
    return factories


EXPERT_FACTORIES = expert_factories()
EXPERT_TASKS = tuple(task for task in TASK_NAMES if task in EXPERT_FACTORIES)
"""The tasks with an expert, in calvin's order."""


def scripted_expert(task: str) -> Expert | None:
    """A fresh expert for a CALVIN task, or None where there is none (it keeps state: build one per episode)."""
    factory = EXPERT_FACTORIES.get(task)
    return factory() if factory else None
