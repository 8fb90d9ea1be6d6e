"""PutOnPlate instructions: "put the {object} on the plate" and phrasings training never sees."""

from vlarl_envs.instructions import InstructionSet
from vlarl_envs.maniskill.put_on_plate.objects import ALL_OBJECTS

CANONICAL_TEMPLATE = "put the {object} on the plate"
UNSEEN_TEMPLATES = (
    "place the {object} onto the plate",
    "move the {object} to the plate",
    "pick up the {object} and set it down on the plate",
    "the {object} belongs on the plate, put it there",
    "grab the {object} and drop it on the plate",
    "could you set the {object} on the plate?",
)

PUT_ON_PLATE_INSTRUCTIONS = InstructionSet(
    {
        spec.name: tuple(template.format(object=spec.name) for template in (CANONICAL_TEMPLATE, *UNSEEN_TEMPLATES))
        for spec in ALL_OBJECTS
    }
)
"""Object name -> (canonical, unseen paraphrases...); every sentence is checked against the
instruction charset when the module loads."""
