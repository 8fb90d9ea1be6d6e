"""vlarl_envs: robot-manipulation environments with natural-language instructions.

Importing the package registers every env id in gymnasium's ``vlarl`` namespace;
``gym.make("vlarl_envs:vlarl/MetaWorld-reach-v3")`` works without an import of your own.
"""

from importlib.metadata import version as _installed_version

from vlarl_envs.calvin.family import CALVIN_FAMILY
from vlarl_envs.calvin.registration import register_calvin
from vlarl_envs.families import FAMILIES, EnvFamily, family_of, register_family
from vlarl_envs.gsenv.family import GSENV_FAMILY
from vlarl_envs.gsenv.registration import register_gsenv
from vlarl_envs.libero.family import LIBERO_FAMILY
from vlarl_envs.libero.registration import register_libero
from vlarl_envs.maniskill.family import MANISKILL_FAMILY
from vlarl_envs.maniskill.registration import register_maniskill
from vlarl_envs.metaworld.family import METAWORLD_FAMILY
from vlarl_envs.metaworld.registration import register_metaworld
from vlarl_envs.stack import wrap_contract
from vlarl_envs.vector import make_vec

__version__ = _installed_version("vlarl-envs")

register_metaworld()
register_maniskill()
register_gsenv()
register_libero()
register_calvin()
for _family in (METAWORLD_FAMILY, MANISKILL_FAMILY, GSENV_FAMILY, LIBERO_FAMILY, CALVIN_FAMILY):
    register_family(_family)

__all__ = ["FAMILIES", "EnvFamily", "__version__", "family_of", "make_vec", "register_family", "wrap_contract"]
