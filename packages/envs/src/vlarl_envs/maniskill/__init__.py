"""ManiSkill3 under the vlarl contract: ManiSkill's offline table-top tasks and PutOnPlate.

Importing this package does not import ManiSkill; building an env does.
"""

from vlarl_envs.maniskill.experts import pick_cube_expert, put_on_plate_expert
from vlarl_envs.maniskill.instructions import MANISKILL_INSTRUCTIONS
from vlarl_envs.maniskill.registration import make_maniskill_env, register_maniskill
from vlarl_envs.maniskill.tasks import CONTROL_MODES, MANISKILL_TASKS
from vlarl_envs.maniskill.vector import ManiSkillBatchedEnv, make_maniskill_vec

__all__ = [
    "CONTROL_MODES",
    "MANISKILL_INSTRUCTIONS",
    "MANISKILL_TASKS",
    "ManiSkillBatchedEnv",
    "make_maniskill_env",
    "make_maniskill_vec",
    "pick_cube_expert",
    "put_on_plate_expert",
    "register_maniskill",
]
