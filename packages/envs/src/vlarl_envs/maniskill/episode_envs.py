"""ManiSkill envs for RL rollouts: every sub-scene in one simulator, each playing one episode per reset.

``make_maniskill_episode_envs`` is the ManiSkill family's ``make_episode_envs``, what the trainer's env
workers step. With CUDA, ``ManiSkillEpisodeEnvs`` steps all of a worker's envs as one
``ManiSkillBatchedEnv`` on ``physx_cuda`` (one physics step and one camera render for the whole batch) in
its ``DISABLED`` autoreset mode. Without CUDA (ManiSkill's CPU backend holds one env per simulator) it is
the default ``EpisodeEnvs`` of single envs.

``ManiSkillEpisodeEnvs`` returns what the ``EpisodeEnvs`` of the same single envs returns for
the same reset options and actions: per-env reset options (episode id, split), no autoreset, envs whose
episode ended hold their last observation and earn nothing, numpy batches, per-env infos, and each env's
statistics as the contract's ``EpisodeStatistics`` counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from vlarl_envs.contract import validate_options
from vlarl_envs.maniskill.backend import resolve_sim_backend
from vlarl_envs.maniskill.vector import PER_ENV_OPTIONS, ManiSkillBatchedEnv, per_env_figures
from vlarl_envs.vector import idle_mask, make_episode_envs


def make_maniskill_episode_envs(env_id: str, num_envs: int, sim_backend: str = "auto", **env_kwargs: Any):
    """``num_envs`` envs of a ManiSkill id: one batched simulator on the GPU (``sim_backend="gpu"``, or
    "auto" where torch sees CUDA), else single envs on ManiSkill's CPU backend in this process
    (``vlarl_envs.vector.make_episode_envs``)."""
    from vlarl_envs.families import registered_kwargs

    if resolve_sim_backend(env_id, sim_backend, batched=True) == "cpu":
        return make_episode_envs(env_id, num_envs, sim_backend="cpu", **env_kwargs)
    return ManiSkillEpisodeEnvs(registered_kwargs(env_id)["task"], env_id, num_envs, sim_backend="gpu",
                                **env_kwargs)


class ManiSkillEpisodeEnvs:
    """The ``EpisodeEnvs`` interface over a ``ManiSkillBatchedEnv`` without autoreset.

    Args:
        task, env_id, num_envs: as ``ManiSkillBatchedEnv`` takes them.
        **env_kwargs: the batched env's other arguments (obs_mode, image_size, control_mode, horizon,
            terminate_on_success, split, reward_mode, action_chunk, sim_backend).
    """

    def __init__(self, task: str, env_id: str, num_envs: int, **env_kwargs: Any) -> None:
        self.env = ManiSkillBatchedEnv(task, env_id, num_envs, autoreset_mode=AutoresetMode.DISABLED, **env_kwargs)
        self.env_id = env_id
        self.num_envs = num_envs

    def reset(self, options: Sequence[dict[str, Any]], idle: Sequence[bool] | None = None
              ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Start one episode per sub-scene, sub-scene ``i`` with ``options[i]`` (episode id, split); an
        ``idle`` sub-scene starts done, as in ``EpisodeEnvs.reset``."""
        if len(options) != self.num_envs:
            raise ValueError(f"expected reset options for each of {self.num_envs} envs, got {len(options)}")
        options = [validate_options(self.env_id, env_options) for env_options in options]
        per_env = {key: [env_options.get(key) for env_options in options] for key in PER_ENV_OPTIONS
                   if any(key in env_options for env_options in options)}
        batch, _ = self.env.reset(options={**per_env, "idle": idle_mask(idle, self.num_envs)})
        infos = [{"success": False, "is_success": False, **info} for info in self.env.episode_infos]
        return _numpy_batch(batch), infos

    def step(self, actions: np.ndarray) -> tuple[dict[str, Any], np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step every sub-scene still in its episode with its row of ``actions`` ([N, C, A] with chunks,
        [N, A] without); the others' rows are ignored."""
        running = ~self.env.episode_over
        batch, rewards, terminated, truncated, info = self.env.step(actions)
        ended = _numpy(terminated | truncated)
        success = _numpy(info["success"])
        chunks = {key: _numpy(info[key]) for key in ("chunk_rewards", "chunk_dones", "chunk_steps") if key in info}
        statistics = per_env_figures(info["episode"]) if "episode" in info else None
        infos: list[dict[str, Any]] = []
        for env in range(self.num_envs):
            if not running[env]:
                infos.append({})
                continue
            env_info: dict[str, Any] = {"success": bool(success[env]), "is_success": bool(success[env])}
            env_info.update({key: values[env] for key, values in chunks.items()})
            if "chunk_steps" in env_info:
                env_info["chunk_steps"] = int(env_info["chunk_steps"])
            if ended[env]:
                env_info["episode"] = statistics[env]
            infos.append(env_info)
        return _numpy_batch(batch), _numpy(rewards).astype(np.float32), self.env.episode_over, infos

    def episode_statistics(self) -> list[dict[str, Any]]:
        """Each env's statistics as ``EpisodeStatistics`` counts them, finished or not."""
        return self.env.episode_statistics()

    def close(self) -> None:
        self.env.close()


def _numpy(value) -> np.ndarray:
    """A copy on the host: the batched env's tensors may share memory with the simulator's."""
    return value.detach().cpu().numpy().copy()


def _numpy_batch(batch: dict[str, Any]) -> dict[str, Any]:
    return {key: list(value) if key == "task_description" else _numpy(value) for key, value in batch.items()}
