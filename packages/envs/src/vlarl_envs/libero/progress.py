"""Goal progress of a LIBERO task, in [0, 1]: the dense reward LIBERO's tasks lack.

LIBERO pays only its sparse success. A pick-and-place goal (every predicate ``On`` or ``In``, as in
LIBERO-Spatial, -Object and LIBERO-10's placing tasks) has a natural progress, read from the privileged
state: for each predicate, how near the hand is to the object (``REACH_WEIGHT``) and how near the object
is to its target in the table's plane (``PLACE_WEIGHT``; body origins and region centres, what
LIBERO's predicates test), each ``1 - tanh(DISTANCE_SCALE * distance)``,
averaged over the predicates. It is the potential of the contract's ``shaped`` reward, which pays each
step for progress and leaves every episode's return its sparse return; ``dense`` pays it as it stands.
Other goals (opening a drawer, turning a knob) have no progress here: their dense reward is 0, and
``shaped`` equals ``sparse`` for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vlarl_envs.libero.privileged import read_privileged_state

PLACING_PREDICATES = ("on", "in")
REACH_WEIGHT = 0.3
PLACE_WEIGHT = 0.7
DISTANCE_SCALE = 10.0
"""Per metre: progress is 0.24 of its range 2.5 cm away, 0.76 at 10 cm, 0.96 at 20 cm."""


def placing_pairs(goal: Any, names: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """(object slot, target slot) in the privileged state for each predicate of a goal made only of
    ``On``/``In`` predicates over its named entities; () for any other goal.

    Args:
        goal: LIBERO's parsed bddl goal, a list of predicates such as ``[["on", "akita_black_bowl_1", "plate_1"]]``.
        names: the goal's entity names in their privileged-state slots (``PrivilegedStateReader.names``).
    """
    pairs = []
    for predicate in goal:
        if (isinstance(predicate, str) or len(predicate) != 3 or str(predicate[0]).lower() not in PLACING_PREDICATES
                or predicate[1] not in names or predicate[2] not in names):
            return ()
        pairs.append((names.index(predicate[1]), names.index(predicate[2])))
    return tuple(pairs)


def goal_progress(privileged_state: np.ndarray, pairs: tuple[tuple[int, int], ...]) -> float:
    """The progress of a pick-and-place goal in [0, 1] (0 for a goal without ``pairs``)."""
    if not pairs:
        return 0.0
    state = read_privileged_state(privileged_state)
    values = []
    for object_slot, target_slot in pairs:
        thing, target = state.entities[object_slot], state.entities[target_slot]
        reach = 1.0 - np.tanh(DISTANCE_SCALE * np.linalg.norm(state.hand_position - thing.box_world_center))
        place = 1.0 - np.tanh(DISTANCE_SCALE * np.linalg.norm(thing.position[:2] - target.position[:2]))
        values.append(REACH_WEIGHT * reach + PLACE_WEIGHT * place)
    return float(np.mean(values))
