"""Scripted LIBERO experts read off ``privileged_state``: the source of LIBERO demonstrations.

Each is a small state machine over robosuite's OSC_POSE deltas that re-reads the goal's entities
every step (``vlarl_envs.libero.privileged``): move above the grasp with the fingers across the
object, descend, close, lift, carry the object above its destination, lower, open, back off. A
missed or dropped object sends it back to the approach. Objects narrow enough for the open gripper
(LIBERO-Object's groceries) are grasped across their narrow side at their centre; wider ones (the
black bowl) by the rim, one finger inside the bowl and one outside. LIBERO-Goal's other tasks
have their own: the stove's knob is pinched and twisted, the middle drawer is pulled open by its
handle from the front, and the plate is slid along by its rim with the closed fingers inside it.
Every task of LIBERO-Spatial and LIBERO-Object has an expert, and every LIBERO-Goal task but
``open_the_top_drawer_and_put_the_bowl_inside``; LIBERO-10 and LIBERO-90 have none
(``scripted_expert`` answers None for a task without one).

The experts live in ``pick_and_place_expert`` and ``goal_experts``, on the state machine of ``phased_expert``
and the hand and grasp geometry of ``expert_geometry``; this module maps each task to its expert.

>>> expert = scripted_expert("pick_up_the_milk_and_place_it_in_the_basket")   # doctest: +SKIP
>>> obs, *_ = env.step(expert(obs))                                            # doctest: +SKIP
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from vlarl_envs.families import Expert
from vlarl_envs.libero.goal_experts import DragExpert, OpenDrawerExpert, TurnKnobExpert
from vlarl_envs.libero.pick_and_place_expert import PickAndPlaceExpert, Placement, place_in, place_on
from vlarl_envs.libero.privileged import Entity

GOAL_EXPERTS: dict[str, Callable[[], Expert]] = {
    "turn_on_the_stove": TurnKnobExpert,
    "open_the_middle_drawer_of_the_cabinet": OpenDrawerExpert,
    "push_the_plate_to_the_front_of_the_stove": DragExpert,
}
"""LIBERO-Goal's tasks that are no pick-and-place, with their experts."""


@functools.cache
def suite_task_names(suite_name: str) -> frozenset[str]:
    """The task names of a LIBERO suite (its benchmark tables only, no simulator)."""
    from vlarl_envs.libero.suites import suite_tasks

    return frozenset(task.name for task in suite_tasks(suite_name))


GOAL_PICK_AND_PLACE: dict[str, Callable[[Entity], Placement]] = {
    "put_the_bowl_on_the_stove": place_on,
    "put_the_wine_bottle_on_top_of_the_cabinet": place_on,
    "put_the_bowl_on_top_of_the_cabinet": place_on,
    "put_the_cream_cheese_in_the_bowl": place_on,
    "put_the_bowl_on_the_plate": place_on,
    "put_the_wine_bottle_on_the_rack": place_on,
}
"""LIBERO-Goal's pick-and-place tasks: goal entity 0 goes on goal entity 1."""


def scripted_expert(task: str) -> Expert | None:
    """A fresh expert for a LIBERO task, or None where there is none (it may keep state: build
    one per episode)."""
    if task in suite_task_names("libero_spatial"):
        return PickAndPlaceExpert(place_on)
    if task in suite_task_names("libero_object"):
        return PickAndPlaceExpert(place_in)
    if task in GOAL_PICK_AND_PLACE:
        return PickAndPlaceExpert(GOAL_PICK_AND_PLACE[task])
    if task in GOAL_EXPERTS:
        return GOAL_EXPERTS[task]()
    return None
