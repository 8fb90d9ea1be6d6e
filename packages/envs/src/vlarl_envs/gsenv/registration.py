"""The Gymnasium id of GSEnv and the factory behind it."""

from __future__ import annotations

import os

import gymnasium as gym

from vlarl_envs.stack import CONTRACT_SPEC, wrap_contract

GSENV_ID = "vlarl/GSEnv-PutCubeOnPlate-v0"


def make_gsenv(
    env_id: str = GSENV_ID,
    reward_mode: str = "sparse",
    action_chunk: int | None = None,
    video_dir: str | os.PathLike | None = None,
    **env_kwargs,
) -> gym.Env:
    """Build GSEnv PutCubeOnPlate with the contract's wrappers (the id's entry point).

    Args:
        env_id: the registered id, for error messages.
        reward_mode, action_chunk, video_dir: see ``vlarl_envs.stack.wrap_contract``.
        **env_kwargs: ``vlarl_envs.gsenv.env.GSEnv`` arguments (obs_mode, image_size, horizon,
            terminate_on_success, split, render_mode, renderer, splat_backend, capture,
            asset_settings, splat_decimation, sim_backend).
    """
    from vlarl_envs.gsenv.env import GSEnv

    return wrap_contract(
        GSEnv(env_id=env_id, **env_kwargs), reward_mode=reward_mode, action_chunk=action_chunk, video_dir=video_dir
    )


def register_gsenv() -> None:
    """Register ``vlarl/GSEnv-PutCubeOnPlate-v0``; ``gym.make_vec`` on it renders all
    sub-envs in one batch (``vlarl_envs.gsenv.vector.make_gsenv_vec``)."""
    gym.register(
        id=GSENV_ID,
        entry_point="vlarl_envs.gsenv.registration:make_gsenv",
        vector_entry_point="vlarl_envs.gsenv.vector:make_gsenv_vec",
        kwargs={"env_id": GSENV_ID},
        **CONTRACT_SPEC,
    )
