"""Batched ManiSkill: GPU simulation of many sub-scenes in one process, or one subprocess per env.

``make_maniskill_vec`` picks by ``sim_backend``, by default by machine: with CUDA, ``ManiSkillBatchedEnv`` runs all
sub-scenes in one ManiSkill env (``physx_cuda``) and returns torch tensors on the GPU, so
images never leave the device before the policy sees them; without CUDA (ManiSkill's CPU
backend simulates one env per process) a subprocess ``AsyncVectorEnv`` of single envs.
Both are gymnasium ``VectorEnv``s with SAME_STEP autoreset and the contract's reward
modes, action chunks and episode statistics.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from vlarl_envs.contract import validate_options
from vlarl_envs.maniskill.backend import resolve_sim_backend
from vlarl_envs.maniskill.env import TaskSetup
from vlarl_envs.maniskill.episodes import reset_arguments
from vlarl_envs.maniskill.observations import ObservationAdapter
from vlarl_envs.maniskill.registration import make_maniskill_env
from vlarl_envs.maniskill.tasks import build_simulator
from vlarl_envs.wrappers.reward_mode import resolve_reward_mode, step_reward


def make_maniskill_vec(
    task: str, env_id: str, num_envs: int = 1, sim_backend: str = "auto", **env_kwargs: Any
) -> VectorEnv:
    """``num_envs`` copies of a ManiSkill task (``gym.make_vec``'s entry point for these ids).

    Args:
        task, env_id: filled in from the registered id.
        num_envs: number of sub-environments.
        sim_backend: "gpu" (``ManiSkillBatchedEnv`` on ManiSkill's GPU backend), "cpu" (one
            process per env on its CPU backend) or "auto": "gpu" where torch sees CUDA.
        **env_kwargs: the single env's arguments (obs_mode, image_size, control_mode, horizon,
            terminate_on_success, split, reward_mode, action_chunk).
    """
    if resolve_sim_backend(env_id, sim_backend, batched=True) == "cpu":
        if num_envs < 1:
            raise ValueError(f"{env_id}: num_envs must be >= 1, got {num_envs}")
        # A module-level factory: the worker imports vlarl_envs by unpickling it, so the
        # ids need no registration in the (forkserver) worker process.
        factory = functools.partial(make_maniskill_env, task=task, env_id=env_id, sim_backend="cpu", **env_kwargs)
        return AsyncVectorEnv([factory] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP, context="forkserver")
    return ManiSkillBatchedEnv(task, env_id, num_envs, sim_backend="gpu", **env_kwargs)


class ManiSkillBatchedEnv(VectorEnv):
    """All sub-environments in one ManiSkill env: no Python loop over envs.

    Observations, rewards, terminations and truncations are torch tensors on the simulator's
    device (``task_description`` a tuple of str). Reset options: ``split``, ``task`` and
    ``episode_id`` (one int for every sub-env, e.g. a GRPO group, or a sequence of
    ``num_envs``). A finished sub-env is reset in the same step, its last observation in
    ``info["final_obs"]`` (an object array of per-env dicts, as gymnasium's vector envs) and
    its last info, with ``info["episode"]`` statistics, in ``info["final_info"]``.

    On ManiSkill's CPU backend (``sim_backend="cpu"``) only ``num_envs=1`` runs; that configuration
    exists so the logic is testable without a GPU.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

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
        seed: int | None = None,
    ) -> None:
        import torch

        if num_envs < 1:
            raise ValueError(f"{env_id}: num_envs must be >= 1, got {num_envs}")
        reward_mode = resolve_reward_mode(reward_mode)
        if action_chunk is not None and action_chunk < 1:
            raise ValueError(f"{env_id}: action chunk must be >= 1, got {action_chunk}")
        self.env_id = env_id
        self.setup = TaskSetup.create(env_id, task, obs_mode, control_mode, split, horizon)
        self.num_envs = num_envs
        self.reward_mode = reward_mode
        self.chunked = action_chunk is not None
        self.chunk = action_chunk or 1
        self.terminate_on_success = terminate_on_success
        self.simulator = build_simulator(self.setup.task, obs_mode, image_size, control_mode, num_envs,
                                         resolve_sim_backend(env_id, sim_backend, batched=True))
        self.device = self.simulator.device
        self.adapter = ObservationAdapter(self.simulator, self.setup.task, obs_mode, image_size)
        self.single_observation_space = self.adapter.space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        action_dim = self.simulator.single_action_space.shape[0]
        action_shape = (self.chunk, action_dim) if self.chunked else (action_dim,)
        self.single_action_space = spaces.Box(-1.0, 1.0, action_shape, np.float32)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._np_random, self._np_random_seed = np.random.default_rng(seed), seed
        zeros = torch.zeros(num_envs, device=self.device)
        self._elapsed = zeros.long()
        self._return = zeros.clone()
        self._length = zeros.long()
        self._succeeded = zeros.bool()
        self._potential = zeros.clone()
        self._instructions = ("",) * num_envs
        self._episode_ids = np.zeros(num_envs, dtype=np.int64)
        self._splits = [split] * num_envs
        self._observation: dict[str, Any] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._np_random, self._np_random_seed = np.random.default_rng(seed), seed
        options = dict(options or {})
        episode_ids = options.pop("episode_id", None)
        options = validate_options(self.env_id, options)
        split = self.setup.split_of(options)
        ids = self._requested_episode_ids(split, episode_ids)
        self._splits = [split] * self.num_envs
        starts = [self.setup.episodes.start(split, episode_id) for episode_id in ids]
        raw, _ = self.simulator.reset(**reset_arguments(starts))
        self._instructions = tuple(start.instruction for start in starts)
        for counter in (self._elapsed, self._return, self._length, self._succeeded, self._potential):
            counter.zero_()
        self._episode_ids[:] = ids
        self._observation = self.adapter.batched(raw, self._instructions)
        return self._observation, {"success": self._succeeded.clone(), "episode_id": self._episode_ids.copy()}

    def _requested_episode_ids(self, split: str, episode_ids) -> list[int]:
        if episode_ids is None:
            return [self.setup.episodes.draw_episode_id(split, self._np_random) for _ in range(self.num_envs)]
        if isinstance(episode_ids, (int, np.integer)):
            episode_ids = [int(episode_ids)] * self.num_envs
        episode_ids = list(episode_ids)
        if len(episode_ids) != self.num_envs:
            raise ValueError(f"{self.env_id}: expected {self.num_envs} episode ids, got {len(episode_ids)}")
        for episode_id in episode_ids:
            validate_options(self.env_id, {"episode_id": episode_id})
        return [int(episode_id) for episode_id in episode_ids]

    def step(self, actions):
        import torch

        if self._observation is None:
            raise RuntimeError(f"{self.env_id}: call reset() before step()")
        actions = self._validate_actions(actions)
        chunk_rewards = torch.zeros((self.num_envs, self.chunk), device=self.device)
        chunk_dones = torch.zeros((self.num_envs, self.chunk), dtype=torch.bool, device=self.device)
        finished = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        terminated = finished.clone()
        truncated = finished.clone()
        final_success = finished.clone()
        final_observation: dict[str, Any] | None = None
        chunk_steps = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        for index in range(self.chunk):
            raw, sim_reward, _, _, sim_info = self.simulator.step(actions[:, index])
            running = ~finished
            success = sim_info["success"]
            failed = sim_info.get("fail", torch.zeros_like(success))
            self._elapsed += running.long()
            step_terminated = running & (failed | (success & self.terminate_on_success))
            step_truncated = running & (self._elapsed >= self.setup.horizon) & ~step_terminated
            done_now = step_terminated | step_truncated
            reward = self._reward(sim_reward, success, done_now, running) * running
            self._succeeded |= success & running
            chunk_rewards[:, index] = reward
            chunk_dones[:, index] = done_now
            chunk_steps += running.long()
            terminated |= step_terminated
            truncated |= step_truncated
            observation = self.adapter.batched(raw, self._instructions)
            final_success = torch.where(running, success, final_success)
            if bool(done_now.any()):
                final_observation = _select(done_now, observation, final_observation)
            finished |= done_now
        rewards = chunk_rewards.sum(dim=1)
        self._return += rewards
        self._length += 1
        info: dict[str, Any] = {"success": final_success}
        if self.chunked:
            info.update(chunk_rewards=chunk_rewards, chunk_dones=chunk_dones, chunk_steps=chunk_steps)
        if bool(finished.any()):
            observation = self._autoreset(finished, observation, final_observation, final_success, info)
        self._observation = observation
        return observation, rewards, terminated, truncated, info

    def _validate_actions(self, actions):
        import torch

        actions = torch.as_tensor(actions, device=self.device)
        if not actions.is_floating_point():
            raise ValueError(
                f"{self.env_id}: expected float actions of shape {self.action_space.shape}, "
                f"got dtype {actions.dtype} with shape {tuple(actions.shape)}"
            )
        if tuple(actions.shape) != self.action_space.shape:
            raise ValueError(
                f"{self.env_id}: expected actions of shape {self.action_space.shape}, got shape {tuple(actions.shape)}"
            )
        if not bool(torch.isfinite(actions).all()):
            raise ValueError(f"{self.env_id}: expected finite actions, got non-finite values")
        actions = actions.float().clamp(-1.0, 1.0)
        return actions.reshape(self.num_envs, self.chunk, -1)

    def _reward(self, sim_reward, success, done_now, running):
        """``step_reward`` of ``vlarl_envs.wrappers.reward_mode`` on the batch; ManiSkill's normalized dense
        reward already lies in [0, 1], so ``shaped`` and ``progress`` use it as the potential. Envs no
        longer running contribute nothing, and every episode starts from potential 0."""
        dense = sim_reward.float() * running
        reward, self._potential = step_reward(self.reward_mode, success, self._succeeded, dense, done_now,
                                              self._potential)
        return reward

    def _autoreset(self, finished, observation, final_observation, final_success, info):
        """Reset the finished sub-envs in place; record their last observation and info."""
        env_idx = finished.nonzero().flatten()
        mask = finished.cpu().numpy()
        final_obs = np.full(self.num_envs, None, dtype=object)
        for env in env_idx.tolist():
            final_obs[env] = {key: value[env] for key, value in final_observation.items() if key != "task_description"}
            final_obs[env]["task_description"] = self._instructions[env]
        info["final_obs"], info["_final_obs"] = final_obs, mask
        info["final_info"] = {
            "success": final_success,
            "_success": mask,
            "episode": {
                "success_once": self._succeeded.clone(),
                "success_at_end": final_success.clone(),
                "return": self._return.clone(),
                "episode_len": self._length.clone(),
                "reward": self._return / self._length.clamp(min=1),
            },
            "_episode": mask,
        }
        info["_final_info"] = mask
        envs = env_idx.tolist()
        episodes = self.setup.episodes
        starts = [
            episodes.start(self._splits[env], episodes.draw_episode_id(self._splits[env], self._np_random))
            for env in envs
        ]
        arguments = reset_arguments(starts)
        arguments["options"]["env_idx"] = env_idx
        raw, _ = self.simulator.reset(**arguments)
        instructions = list(self._instructions)
        for env, start in zip(envs, starts):
            instructions[env] = start.instruction
            self._episode_ids[env] = start.info["episode_id"]
        self._instructions = tuple(instructions)
        for counter in (self._elapsed, self._return, self._length, self._succeeded):
            counter[env_idx] = 0
        info["episode_id"] = self._episode_ids.copy()
        return self.adapter.batched(raw, self._instructions)

    def close_extras(self, **kwargs):
        self.simulator.close()


def _select(mask, observation: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    """Rows of ``observation`` where ``mask`` holds, ``previous`` (or the same) elsewhere."""
    import torch

    merged = {}
    for key, value in observation.items():
        if key == "task_description":
            continue
        base = value if previous is None else previous[key]
        shape = (-1,) + (1,) * (value.dim() - 1)
        merged[key] = torch.where(mask.reshape(shape), value, base)
    return merged
