"""PutOnPlate: a Panda, a receptacle and a named target object, with out-of-distribution splits.

``episodes`` defines the fixed, seeded episode lists of the splits, ``objects`` the 34 named
objects, ``receptacles`` the training plate and 8 unseen receptacles, ``appearance`` the
tables, lights, camera poses and image overlays, ``overlay`` the blending of overlays into
images (torch), ``task`` the ManiSkill task (it imports ManiSkill; the other modules do not).
"""

from vlarl_envs.maniskill.put_on_plate.episodes import (
    SPLIT_SIZES,
    VARIATIONS,
    PutOnPlateEpisode,
    make_episode,
    split_episodes,
)
from vlarl_envs.maniskill.put_on_plate.instructions import PUT_ON_PLATE_INSTRUCTIONS
from vlarl_envs.maniskill.put_on_plate.objects import ALL_OBJECTS, TRAIN_OBJECTS, UNSEEN_OBJECTS
from vlarl_envs.maniskill.put_on_plate.receptacles import ALL_RECEPTACLES, TRAIN_RECEPTACLE, UNSEEN_RECEPTACLES

__all__ = [
    "ALL_OBJECTS",
    "ALL_RECEPTACLES",
    "PUT_ON_PLATE_INSTRUCTIONS",
    "SPLIT_SIZES",
    "TRAIN_OBJECTS",
    "TRAIN_RECEPTACLE",
    "UNSEEN_OBJECTS",
    "UNSEEN_RECEPTACLES",
    "VARIATIONS",
    "PutOnPlateEpisode",
    "make_episode",
    "split_episodes",
]
