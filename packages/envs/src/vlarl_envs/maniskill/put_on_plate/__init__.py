"""PutOnPlate: a Panda, a plate and a named target among distractors, with out-of-distribution splits.

``episodes`` defines the fixed, seeded episode lists of the splits, ``objects`` the 34 named
objects, ``appearance`` the tables, lights and camera poses, ``task`` the ManiSkill task
(it imports ManiSkill; the other modules do not).
"""

from vlarl_envs.maniskill.put_on_plate.episodes import SPLIT_SIZES, VARIATIONS, PutOnPlateEpisode, make_episode, split_episodes
from vlarl_envs.maniskill.put_on_plate.instructions import PUT_ON_PLATE_INSTRUCTIONS
from vlarl_envs.maniskill.put_on_plate.objects import ALL_OBJECTS, TRAIN_OBJECTS, UNSEEN_OBJECTS

__all__ = [
    "ALL_OBJECTS",
    "PUT_ON_PLATE_INSTRUCTIONS",
    "SPLIT_SIZES",
    "TRAIN_OBJECTS",
    "UNSEEN_OBJECTS",
    "VARIATIONS",
    "PutOnPlateEpisode",
    "make_episode",
    "split_episodes",
]
