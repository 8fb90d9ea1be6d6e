"""Gymnasium ids of the ManiSkill family and the factories behind them."""

from __future__ import annotations

import gymnasium as gym

from vlarl_envs.maniskill.tasks import MANISKILL_TASKS
from vlarl_envs.stack import make_contract_env, register_contract_env


def make_maniskill_env(task: str, env_id: str = "vlarl/ManiSkill", **kwargs) -> gym.Env:
    """Build one ManiSkill env with the contract's wrappers (the entry point of every id).

    Args:
        task: a key of ``MANISKILL_TASKS``.
        env_id: the registered id, for error messages.
        **kwargs: ``ManiSkillEnv`` arguments (obs_mode, image_size, control_mode, horizon, terminate_on_success,
            split, render_mode, sim_backend) and the wrappers' (reward_mode, action_chunk, video_dir; see
            ``vlarl_envs.stack.make_contract_env``).
    """
    from vlarl_envs.maniskill.env import ManiSkillEnv

    return make_contract_env(ManiSkillEnv, task=task, env_id=env_id, **kwargs)


def register_maniskill() -> None:
    """Register ``vlarl/ManiSkill-<Task>-v1`` for each wrapped task and ``vlarl/ManiSkill-PutOnPlate-v0``.

    ``gym.make_vec`` on these ids goes to ``make_maniskill_vec``: ManiSkill's GPU simulation
    where CUDA is present, a subprocess per env otherwise.
    """
    for task in MANISKILL_TASKS.values():
        register_contract_env(task.env_id, "vlarl_envs.maniskill.registration:make_maniskill_env",
                              vector_entry_point="vlarl_envs.maniskill.vector:make_maniskill_vec", task=task.name)
