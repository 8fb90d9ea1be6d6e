"""GSEnv PutCubeOnPlate: ManiSkill physics rendered with 3D Gaussian splats.

Importing this package imports neither ManiSkill nor torch; building an env does.
"""

from vlarl_envs.gsenv.registration import GSENV_ID, make_gsenv, register_gsenv

__all__ = ["GSENV_ID", "make_gsenv", "register_gsenv"]
