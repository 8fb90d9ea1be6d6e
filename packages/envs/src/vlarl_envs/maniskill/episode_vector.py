"""ManiSkill envs for RL rollouts: every sub-scene in one simulator, each playing one episode per reset.

``make_maniskill_episode_vec`` is the ManiSkill family's ``make_episode_vec``, what the trainer's env
workers step. With CUDA, ``ManiSkillEpisodeVectorEnv`` simulates all of a worker's envs in one
ManiSkill env on ``physx_cuda``: one physics step and one camera render for the whole batch. Without
CUDA (ManiSkill's CPU backend holds one env per simulator) it is the default ``EpisodeVectorEnv`` of
single envs.

``ManiSkillEpisodeVectorEnv`` returns what the ``EpisodeVectorEnv`` of the same single envs returns for
the same reset options and actions: per-env reset options (episode id, split), no autoreset, envs whose
episode ended hold their last observation and earn nothing, and each env's statistics as the contract's
``EpisodeStatistics`` counts them (chunks, the success of a chunk's last executed sub-step). A batched
simulator cannot stop one sub-scene, so an env that finishes inside a chunk goes on being simulated
with its remaining actions; its observation is taken at the sub-step it finished, as the single env's
``ActionChunk`` returns it. Within a chunk the cameras render only at sub-steps where some env
finishes and at the last (``DefersImages``, batched).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vlarl_envs.contract import validate_options
from vlarl_envs.maniskill.backend import resolve_sim_backend
from vlarl_envs.maniskill.env import TaskSetup
from vlarl_envs.maniskill.episodes import reset_arguments
from vlarl_envs.maniskill.observations import ObservationAdapter
from vlarl_envs.maniskill.tasks import build_simulator, step_without_cameras
from vlarl_envs.vector import idle_mask, make_episode_vec
from vlarl_envs.wrappers.reward_mode import resolve_reward_mode, step_reward


def make_maniskill_episode_vec(env_id: str, num_envs: int, sim_backend: str = "auto", **env_kwargs: Any):
    """``num_envs`` envs of a ManiSkill id: one batched simulator on the GPU (``sim_backend="gpu"``, or
    "auto" where torch sees CUDA), else single envs on ManiSkill's CPU backend in this process
    (``vlarl_envs.vector.make_episode_vec``)."""
    from vlarl_envs.families import registered_kwargs

    if resolve_sim_backend(env_id, sim_backend, batched=True) == "cpu":
        return make_episode_vec(env_id, num_envs, sim_backend="cpu", **env_kwargs)
    return ManiSkillEpisodeVectorEnv(registered_kwargs(env_id)["task"], env_id, num_envs, sim_backend="gpu",
                                     **env_kwargs)


class ManiSkillEpisodeVectorEnv:
    """``num_envs`` sub-scenes of one ManiSkill task in one simulator, with ``EpisodeVectorEnv``'s interface.

    Args:
        task, env_id: the task (a key of ``MANISKILL_TASKS``) and the id, for error messages.
        num_envs: sub-scenes; on the CPU backend ManiSkill allows only 1, which keeps the logic testable
            without a GPU.
        obs_mode, image_size, control_mode, horizon, terminate_on_success, split, reward_mode,
        action_chunk: as the single env and the contract's wrappers take them.
        sim_backend: "gpu", "cpu" (ManiSkill holds one env there) or "auto" (the GPU where torch sees CUDA).
    """

    def __init__(
        self,
        task: str,
        env_id: str,
        num_envs: int,
        obs_mode: str = "rgb",
        image_size: int | tuple[int, int] = 128,
        control_mode: str = "pd_ee_delta_pose",
        horizon: int | None = None,
        terminate_on_success: bool = True,
        split: str = "train",
        reward_mode: str = "sparse",
        action_chunk: int | None = None,
        sim_backend: str = "auto",
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"{env_id}: num_envs must be >= 1, got {num_envs}")
        if action_chunk is not None and action_chunk < 1:
            raise ValueError(f"{env_id}: action chunk must be >= 1, got {action_chunk}")
        self.env_id = env_id
        self.setup = TaskSetup.create(env_id, task, obs_mode, control_mode, split, horizon)
        self.num_envs = num_envs
        self.obs_mode = obs_mode
        self.reward_mode = resolve_reward_mode(reward_mode)
        self.chunk = action_chunk or 1
        self.chunked = action_chunk is not None
        self.terminate_on_success = terminate_on_success
        self.simulator = build_simulator(self.setup.task, obs_mode, image_size, control_mode, num_envs,
                                         resolve_sim_backend(env_id, sim_backend, batched=True))
        self.adapter = ObservationAdapter(self.simulator, self.setup.task, obs_mode, image_size)
        self.action_dim = self.simulator.single_action_space.shape[0]
        self._episode_rng = np.random.default_rng()
        """Draws the episode of a reset without an ``episode_id`` (the trainer always names one)."""
        self._instructions: tuple[str, ...] = ()
        self._observation: dict[str, np.ndarray] | None = None
        self._done = np.zeros(num_envs, bool)
        self._elapsed = np.zeros(num_envs, np.int64)
        self._succeeded = np.zeros(num_envs, bool)
        self._potential = np.zeros(num_envs, np.float64)
        self._return = np.zeros(num_envs, np.float64)
        self._length = np.zeros(num_envs, np.int64)
        self._success_once = np.zeros(num_envs, bool)
        self._success_now = np.zeros(num_envs, bool)

    def reset(self, options: list[dict[str, Any]], idle: Sequence[bool] | None = None
              ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Start one episode per sub-scene, sub-scene ``i`` with ``options[i]`` (episode id, split); an
        ``idle`` sub-scene starts done, as in ``EpisodeVectorEnv.reset``."""
        if len(options) != self.num_envs:
            raise ValueError(f"expected reset options for each of {self.num_envs} envs, got {len(options)}")
        idle = idle_mask(idle, self.num_envs)
        starts = []
        for env_options in options:
            env_options = validate_options(self.env_id, env_options)
            split = self.setup.split_of(env_options)
            episode_id = env_options.get("episode_id")
            if episode_id is None:
                episode_id = self.setup.episodes.draw_episode_id(split, self._episode_rng)
            starts.append(self.setup.episodes.start(split, int(episode_id)))
        raw, _ = self.simulator.reset(**reset_arguments(starts))
        self._instructions = tuple(start.instruction for start in starts)
        for counter in (self._done, self._elapsed, self._succeeded, self._potential, self._return, self._length,
                        self._success_once, self._success_now):
            counter[:] = 0
        self._done[:] = idle
        self._observation = self._numpy(self.adapter.batched(raw, self._instructions))
        infos = [{"success": False, "is_success": False, **start.info} for start in starts]
        return self._batch(), infos

    def step(self, actions: np.ndarray) -> tuple[dict[str, Any], np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step every sub-scene still in its episode with its row of ``actions`` ([N, C, A] with chunks,
        [N, A] without); the others' rows are ignored."""
        if self._observation is None:
            raise RuntimeError(f"{self.env_id}: call reset() before step()")
        actions = self._validate_actions(actions)
        running = ~self._done
        stepping = running.copy()
        rewards = np.zeros(self.num_envs, np.float64)
        chunk_rewards = np.zeros((self.num_envs, self.chunk), np.float32)
        chunk_dones = np.zeros((self.num_envs, self.chunk), bool)
        chunk_steps = np.zeros(self.num_envs, np.int64)
        success_now = self._success_now.copy()
        terminated = np.zeros(self.num_envs, bool)
        truncated = np.zeros(self.num_envs, bool)
        for index in range(self.chunk):
            last = index == self.chunk - 1
            flat, sim_reward, sim_info = self._simulate(actions[:, index])
            success = _numpy(sim_info["success"]).astype(bool)
            failed = _numpy(sim_info["fail"]).astype(bool) if "fail" in sim_info else np.zeros(self.num_envs, bool)
            self._elapsed += stepping
            step_terminated = stepping & (failed | (success & self.terminate_on_success))
            step_truncated = stepping & (self._elapsed >= self.setup.horizon) & ~step_terminated
            done_now = step_terminated | step_truncated
            dense = _numpy(sim_reward).astype(np.float64)
            reward, potential = step_reward(self.reward_mode, success, self._succeeded, dense, done_now,
                                            self._potential)
            reward = np.where(stepping, reward, 0.0)
            self._potential = np.where(stepping, potential, self._potential)
            self._succeeded |= success & stepping
            rewards += reward
            chunk_rewards[:, index] = reward
            chunk_dones[:, index] = done_now
            chunk_steps += stepping
            success_now = np.where(stepping, success, success_now)
            terminated |= step_terminated
            truncated |= step_truncated
            observed = done_now | (stepping & last)
            if observed.any():
                self._observe(observed, flat)
            stepping &= ~done_now
        self._done |= terminated | truncated
        self._return += np.where(running, rewards, 0.0)
        self._length += running
        self._success_now = np.where(running, success_now, self._success_now)
        self._success_once |= self._success_now & running
        infos: list[dict[str, Any]] = []
        for env in range(self.num_envs):
            if not running[env]:
                infos.append({})
                continue
            info: dict[str, Any] = {"success": bool(success_now[env]), "is_success": bool(success_now[env])}
            if self.chunked:
                info.update(chunk_rewards=chunk_rewards[env], chunk_dones=chunk_dones[env],
                            chunk_steps=int(chunk_steps[env]))
            if terminated[env] or truncated[env]:
                info["episode"] = self._statistics(env)
            infos.append(info)
        return self._batch(), rewards.astype(np.float32), self._done.copy(), infos

    def episode_statistics(self) -> list[dict[str, Any]]:
        """Each env's statistics as ``EpisodeStatistics`` counts them, finished or not."""
        return [self._statistics(env) for env in range(self.num_envs)]

    def close(self) -> None:
        self.simulator.close()

    def _simulate(self, actions):
        """One physics step of every sub-scene, its observation taken in ManiSkill's "state" mode (no
        camera renders); returns the flat state, the simulator's reward and its info."""
        import torch

        actions = torch.as_tensor(actions, device=self.simulator.unwrapped.device)
        flat, reward, _, _, info = step_without_cameras(self.simulator, actions)
        return flat, reward, info

    def _observe(self, envs: np.ndarray, flat) -> None:
        """Take the current observation of the sub-scenes in ``envs``: rendered in rgb mode, else from the
        step's flat state."""
        if self.obs_mode == "rgb":
            current = self._numpy(self.adapter.batched(self.simulator.get_obs(), self._instructions))
        else:
            current = self._numpy(self.adapter.batched(flat, self._instructions))
        for key, value in current.items():
            if key != "task_description":
                self._observation[key][envs] = value[envs]

    def _statistics(self, env: int) -> dict[str, Any]:
        length = int(self._length[env])
        episode_return = float(self._return[env])
        return {"success_once": bool(self._success_once[env]), "success_at_end": bool(self._success_now[env]),
                "return": episode_return, "episode_len": length,
                "reward": episode_return / length if length else 0.0}

    def _validate_actions(self, actions) -> np.ndarray:
        actions = np.asarray(actions)
        shape = (self.num_envs, self.chunk, self.action_dim) if self.chunked else (self.num_envs, self.action_dim)
        if actions.shape != shape:
            raise ValueError(f"{self.env_id}: expected actions of shape {shape}, got shape {actions.shape}")
        if not np.issubdtype(actions.dtype, np.floating) or not np.isfinite(actions).all():
            raise ValueError(f"{self.env_id}: expected finite float actions, got dtype {actions.dtype}")
        return np.clip(actions, -1.0, 1.0).astype(np.float32).reshape(self.num_envs, self.chunk, self.action_dim)

    def _numpy(self, observation: dict[str, Any]) -> dict[str, Any]:
        return {key: value if key == "task_description" else _numpy(value).copy()
                for key, value in observation.items()}

    def _batch(self) -> dict[str, Any]:
        batch = {key: value.copy() for key, value in self._observation.items() if key != "task_description"}
        batch["task_description"] = list(self._instructions)
        return batch


def _numpy(value) -> np.ndarray:
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
