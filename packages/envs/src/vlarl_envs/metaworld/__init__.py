"""MetaWorld v3 under the vlarl contract: every task, MT10, MT50 and ML45 train/test.

Importing this module does not import MetaWorld itself; building an env does.
"""

from vlarl_envs.metaworld.experts import scripted_expert
from vlarl_envs.metaworld.instructions import METAWORLD_INSTRUCTIONS
from vlarl_envs.metaworld.registration import METAWORLD_SUITES, METAWORLD_TASKS, make_metaworld_env, register_metaworld

__all__ = [
    "METAWORLD_INSTRUCTIONS",
    "METAWORLD_SUITES",
    "METAWORLD_TASKS",
    "make_metaworld_env",
    "register_metaworld",
    "scripted_expert",
]
