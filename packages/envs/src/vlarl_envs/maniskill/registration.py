"""Gymnasium ids of the ManiSkill family and the factories behind them."""

from __future__ import annotations

import os

import gymnasium as gym

from vlarl_envs.maniskill.tasks import MANISKILL_TASKS
from vlarl_envs.stack import CONTRACT_SPEC, wrap_contract


def make_maniskill_env(
    task: str,
    env_id: str = "vlarl/ManiSkill",
    reward_mode: str = "sparse",
    action_chunk: int | None = None,
    video_dir: str | os.PathLike | None = None,
    **env_kwargs,
) -> gym.Env:
    """Build one ManiSkill env with the contract's wrappers (the entry point of every id).

    Args:
        task: a key of ``MANISKILL_TASKS``.
        env_id: the registered id, for error messages.
        reward_mode, action_chunk, video_dir: see ``vlarl_envs.stack.wrap_contract``.
        **env_kwargs: ``ManiSkillEnv`` arguments (obs_mode, image_size, control_mode, horizon,
            terminate_on_success, split, render_mode, sim_backend).
    """
    from vlarl_envs.maniskill.env import ManiSkillEnv

    env = ManiSkillEnv(task=task, env_id=env_id, **env_kwargs)
    return wrap_contract(env, reward_mode=reward_mode, action_chunk=action_chunk, video_dir=video_dir)


def register_maniskill() -> None:
    """Register ``vlarl/ManiSkill-<Task>-v1`` for each wrapped task and ``vlarl/ManiSkill-PutOnPlate-v0``.

    ``gym.make_vec`` on these ids goes to ``make_maniskill_vec``: ManiSkill's GPU simulation
    where CUDA is present, a subprocess per env otherwise.
    """
    for task in MANISKILL_TASKS.values():
        gym.register(
            id=task.env_id,
            entry_point="vlarl_envs.maniskill.registration:make_maniskill_env",
            vector_entry_point="vlarl_envs.maniskill.vector:make_maniskill_vec",
            kwargs={"task": task.name, "env_id": task.env_id},
            **CONTRACT_SPEC,
        )
