"""MetaWorld's task lists and the lazy import of the simulator itself."""

from __future__ import annotations

import importlib
from types import SimpleNamespace



def load_metaworld() -> SimpleNamespace:
    """Import metaworld on first use, with the install command in the error when it is missing."""
    try:
        env_dict = importlib.import_module("metaworld.env_dict")
        types = importlib.import_module("metaworld.types")
        policies = importlib.import_module("metaworld.policies")
        mujoco = importlib.import_module("mujoco")
    except ImportError as error:
        raise ImportError(
            "MetaWorld environments need the simulator: pip install 'vlarl-envs[metaworld]' "
            f"(metaworld==3.1.1, mujoco<3.10); import failed with: {error}"
        ) from error
    return SimpleNamespace(
        ALL_V3_ENVIRONMENTS=env_dict.ALL_V3_ENVIRONMENTS,
        MT10=tuple(env_dict.MT10_V3),
        ML45_TRAIN=tuple(env_dict.ML45_V3["train"]),
        ML45_TEST=tuple(env_dict.ML45_V3["test"]),
        Task=types.Task,
        EXPERTS=policies.ENV_POLICY_MAP,
        mj_forward=mujoco.mj_forward,
    )
