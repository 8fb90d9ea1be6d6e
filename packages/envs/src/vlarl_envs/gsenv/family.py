"""The GSEnv family: ManiSkill physics rendered with 3D Gaussian splats, all envs in one render call."""

from __future__ import annotations

from vlarl_envs.families import EnvFamily, deferred
from vlarl_envs.gsenv.layout import INSTRUCTION, SPLIT_STREAMS, TASK_NAME
from vlarl_envs.gsenv.robustness import variation
from vlarl_envs.instructions import InstructionSet
from vlarl_envs.maniskill.family import PANDA_FEATURE_NAMES

GSENV_INSTRUCTIONS = InstructionSet({TASK_NAME: (INSTRUCTION, "put the cube on the plate")})
"""GSEnv's one task speaks one sentence in every split; the paraphrase is listed for tokenizers."""


def gsenv_expert(task: str):
    from vlarl_envs.gsenv.expert import pick_and_place_action

    return pick_and_place_action if task == TASK_NAME else None


def gsenv_variation(task: str, split: str, episode_id: int) -> str | None:
    """The evaluation group of a ``robustness`` episode, its ``info["variation"]`` (``camera``,
    ``appearance`` or ``background``, each reported on its own); None in ``train`` and ``test``, whose
    split's own figure says it all."""
    if task != TASK_NAME or split != "robustness":
        return None
    return variation(split, episode_id)


GSENV_FAMILY = EnvFamily(
    name="GSEnv", tasks=lambda env_id, env_kwargs=None: (TASK_NAME,), splits=lambda env_id: tuple(SPLIT_STREAMS),
    instructions=lambda env_id: GSENV_INSTRUCTIONS,
    # single GSEnvs whose splat images of a step render in one call
    batched=True, make_episode_envs=deferred("vlarl_envs.gsenv.vector:make_gsenv_episode_envs"),
    expert=gsenv_expert, group=gsenv_variation,
    robot_type="panda", feature_names=PANDA_FEATURE_NAMES,
)
