"""PutOnPlate instructions: "put the {object} on the plate", phrasings training never sees, and
"put the {object} on the {receptacle}" for the receptacles training never shows."""

from vlarl_envs.instructions import InstructionSet
from vlarl_envs.maniskill.put_on_plate.objects import ALL_OBJECTS, TRAIN_OBJECTS
from vlarl_envs.maniskill.put_on_plate.receptacles import TRAIN_RECEPTACLE, UNSEEN_RECEPTACLES

CANONICAL_TEMPLATE = "put the {object} on the plate"
UNSEEN_TEMPLATES = (
    "place the {object} onto the plate",
    "move the {object} to the plate",
    "pick up the {object} and set it down on the plate",
    "the {object} belongs on the plate, put it there",
    "grab the {object} and drop it on the plate",
    "could you set the {object} on the plate?",
)
RECEPTACLE_TEMPLATE = "put the {object} on the {receptacle}"
"""The canonical sentence with the receptacle named: the ``plate`` and ``multi_plate``
variations, whose only unseen factor is the receptacle (RL4VLA keeps its template too)."""


def instruction_task(object_name: str, receptacle: str = TRAIN_RECEPTACLE.name) -> str:
    """The key of ``PUT_ON_PLATE_INSTRUCTIONS`` for putting ``object_name`` on ``receptacle``:
    the object's name on the plate, "{object} on the {receptacle}" on another receptacle."""
    if receptacle == TRAIN_RECEPTACLE.name:
        return object_name
    return f"{object_name} on the {receptacle}"


PUT_ON_PLATE_INSTRUCTIONS = InstructionSet(
    {
        spec.name: tuple(template.format(object=spec.name) for template in (CANONICAL_TEMPLATE, *UNSEEN_TEMPLATES))
        for spec in ALL_OBJECTS
    }
    | {
        instruction_task(spec.name, receptacle.name): (
            RECEPTACLE_TEMPLATE.format(object=spec.name, receptacle=receptacle.name),
        )
        for spec in TRAIN_OBJECTS
        for receptacle in UNSEEN_RECEPTACLES
    }
)
"""Object name -> (canonical, unseen paraphrases...), and "{object} on the {receptacle}" ->
(its one sentence,) for the training objects on each unseen receptacle; every sentence is
checked against the instruction charset when the module loads, and together they are every
sentence the env can give (a new policy's tokenizer is built from them)."""
