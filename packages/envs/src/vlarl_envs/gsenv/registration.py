"""The Gymnasium id of GSEnv and the factory behind it."""

from __future__ import annotations

import gymnasium as gym

from vlarl_envs.stack import make_contract_env, register_contract_env

GSENV_ID = "vlarl/GSEnv-PutCubeOnPlate-v0"


def make_gsenv(env_id: str = GSENV_ID, **kwargs) -> gym.Env:
    """Build GSEnv PutCubeOnPlate with the contract's wrappers (the id's entry point).

    Args:
        env_id: the registered id, for error messages.
        **kwargs: ``vlarl_envs.gsenv.env.GSEnv`` arguments (obs_mode, image_size, horizon, terminate_on_success,
            split, render_mode, renderer, splat_backend, capture, asset_settings, splat_decimation, sim_backend)
            and the wrappers' (reward_mode, action_chunk, video_dir; see ``vlarl_envs.stack.make_contract_env``).
    """
    from vlarl_envs.gsenv.env import GSEnv

    return make_contract_env(GSEnv, env_id=env_id, **kwargs)


def register_gsenv() -> None:
    """Register ``vlarl/GSEnv-PutCubeOnPlate-v0``; ``gym.make_vec`` on it renders all
    sub-envs in one batch (``vlarl_envs.gsenv.vector.make_gsenv_vec``)."""
    register_contract_env(GSENV_ID, "vlarl_envs.gsenv.registration:make_gsenv",
                          vector_entry_point="vlarl_envs.gsenv.vector:make_gsenv_vec")
