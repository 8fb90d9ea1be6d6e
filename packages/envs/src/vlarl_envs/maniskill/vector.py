"""Batched ManiSkill: GPU simulation of many sub-scenes in one process, or one subprocess per env.

``make_maniskill_vec`` (``gym.make_vec``'s entry point for these ids) picks by ``sim_backend``, by default
by machine: with CUDA, ``ManiSkillBatchedEnv`` runs all sub-scenes in one ManiSkill env (``physx_cuda``)
and returns torch tensors on the GPU, so images never leave the device before the policy sees them;
without CUDA (ManiSkill's CPU backend simulates one env per process) a subprocess ``AsyncVectorEnv`` of
single envs, in the same autoreset mode.

``ManiSkillBatchedEnv`` has gymnasium's two autoreset modes that suit a batched simulator:

- ``SAME_STEP`` (the default): a finished sub-env restarts inside the step that ends its episode; its
  last observation and info sit in ``info["final_obs"]`` and ``info["final_info"]``.
- ``DISABLED``: a finished sub-env is held. It earns nothing, keeps the observation its episode ended
  with and plays again after a reset (``options["reset_mask"]`` restarts some). The trainer's env workers
  step it so, through ``vlarl_envs.maniskill.episode_envs``.

Rewards are ``step_reward``'s and statistics ``episode_figures``'s, as the single env's wrappers compute
them (``episode_len`` counts chunks, ``success_once`` the success of each chunk's last executed sub-step).
A batched simulator cannot stop one sub-scene, so a sub-env that finishes inside a chunk goes on being
simulated with its remaining actions; its observation is taken at the sub-step it finished. Within a
chunk the cameras render only at sub-steps where some sub-env finishes and at the last.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
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
from vlarl_envs.maniskill.tasks import build_simulator, step_without_cameras
from vlarl_envs.wrappers.episode_statistics import episode_figures
from vlarl_envs.wrappers.reward_mode import resolve_reward_mode, step_reward

AUTORESET_MODES = (AutoresetMode.SAME_STEP, AutoresetMode.DISABLED)
PER_ENV_OPTIONS = ("task", "split", "episode_id")
"""Reset options that take one value for every sub-env or a sequence of one per sub-env."""


def make_maniskill_vec(
    task: str,
    env_id: str,
    num_envs: int = 1,
    sim_backend: str = "auto",
    autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    **env_kwargs: Any,
) -> VectorEnv:
    """``num_envs`` copies of a ManiSkill task (``gym.make_vec``'s entry point for these ids).

    Args:
        task, env_id: filled in from the registered id.
        num_envs: number of sub-environments.
        sim_backend: "gpu" (``ManiSkillBatchedEnv`` on ManiSkill's GPU backend), "cpu" (one
            process per env on its CPU backend) or "auto": "gpu" where torch sees CUDA.
        autoreset_mode: ``SAME_STEP`` or ``DISABLED`` (see ``ManiSkillBatchedEnv``), either way.
        **env_kwargs: the single env's arguments (obs_mode, image_size, control_mode, horizon,
            terminate_on_success, split, reward_mode, action_chunk).
    """
    autoreset_mode = _autoreset_mode(env_id, autoreset_mode)
    if resolve_sim_backend(env_id, sim_backend, batched=True) == "cpu":
        if num_envs < 1:
            raise ValueError(f"{env_id}: num_envs must be >= 1, got {num_envs}")
        # A module-level factory: the worker imports vlarl_envs by unpickling it, so the
        # ids need no registration in the (forkserver) worker process.
        factory = functools.partial(make_maniskill_env, task=task, env_id=env_id, sim_backend="cpu", **env_kwargs)
        return AsyncVectorEnv([factory] * num_envs, autoreset_mode=autoreset_mode, context="forkserver")
    return ManiSkillBatchedEnv(task, env_id, num_envs, sim_backend="gpu", autoreset_mode=autoreset_mode,
                               **env_kwargs)


class ManiSkillBatchedEnv(VectorEnv):
    """All sub-environments in one ManiSkill env: no Python loop over envs.

    Observations, rewards, terminations and truncations are torch tensors on the simulator's
    device (``task_description`` a tuple of str). Reset options: ``split``, ``task`` and ``episode_id``,
    each one value for every sub-env (e.g. a GRPO group's episode) or a sequence of ``num_envs``
    (``None`` entries draw an episode); ``reset_mask``, a numpy bool array restarting only those sub-envs;
    and, in ``DISABLED`` mode, ``idle``, a bool mask of sub-envs that restart but start held (the last
    round of an evaluation leaves envs over).

    Args:
        task, env_id: the task (a key of ``MANISKILL_TASKS``) and the id, for error messages.
        num_envs: sub-scenes; on ManiSkill's CPU backend (``sim_backend="cpu"``) only 1 runs, which keeps
            the logic testable without a GPU.
        obs_mode, image_size, control_mode, horizon, terminate_on_success, split, reward_mode,
        action_chunk: as the single env and the contract's wrappers take them.
        sim_backend: "gpu", "cpu" or "auto" (the GPU where torch sees CUDA).
        seed: seeds the draws of episodes that no option names.
        autoreset_mode: ``AutoresetMode.SAME_STEP`` or ``AutoresetMode.DISABLED`` (or their values,
            "SameStep" and "Disabled").
        wrist_camera: only True, as for the single env (ManiSkill renders the hand camera with every
            observation); False raises ValueError.
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
        seed: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        wrist_camera: bool = True,
    ) -> None:
        import torch

        if num_envs < 1:
            raise ValueError(f"{env_id}: num_envs must be >= 1, got {num_envs}")
        if action_chunk is not None and action_chunk < 1:
            raise ValueError(f"{env_id}: action chunk must be >= 1, got {action_chunk}")
        self.autoreset_mode = _autoreset_mode(env_id, autoreset_mode)
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": []}
        self.env_id = env_id
        self.setup = TaskSetup.create(env_id, task, obs_mode, control_mode, split, horizon, wrist_camera)
        self.num_envs = num_envs
        self.obs_mode = obs_mode
        self.reward_mode = resolve_reward_mode(reward_mode)
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
        """Sub-steps of each episode, against the horizon."""
        self._length = zeros.long()
        """Steps (chunks) of each episode: ``episode_len``."""
        self._return = zeros.clone()
        self._potential = zeros.clone()
        self._succeeded = zeros.bool()
        """Success at any sub-step: what ``step_reward`` pays once."""
        self._success_now = zeros.bool()
        self._success_once = zeros.bool()
        self._held = zeros.bool()
        """``DISABLED`` mode: the sub-envs whose episode has ended since their reset."""
        self._instructions: tuple[str, ...] = ("",) * num_envs
        self._observation: dict[str, Any] | None = None
        self.episode_infos: list[dict[str, Any]] = [{} for _ in range(num_envs)]
        """Each sub-env's episode as its reset info names it (``episode_id``, ``split``, ``task``, ...)."""

    @property
    def episode_over(self) -> np.ndarray:
        """``DISABLED`` mode: which sub-envs' episodes have ended since their reset (all false in ``SAME_STEP``)."""
        return self._held.cpu().numpy().copy()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._np_random, self._np_random_seed = np.random.default_rng(seed), seed
        options = dict(options or {})
        restart = self._mask_option(options.pop("reset_mask", None), "reset_mask", fill=True)
        idle = self._mask_option(options.pop("idle", None), "idle", fill=False)
        if idle.any() and self.autoreset_mode != AutoresetMode.DISABLED:
            raise ValueError(f"{self.env_id}: reset option 'idle' needs autoreset_mode DISABLED, "
                             f"got {self.autoreset_mode.value}")
        if not restart.any():
            raise ValueError(f"{self.env_id}: reset_mask restarts no sub-env")
        per_env = {key: self._per_env_option(key, options.pop(key)) for key in PER_ENV_OPTIONS if key in options}
        validate_options(self.env_id, options)
        envs = np.flatnonzero(restart)
        self._restart(envs, [{key: values[env] for key, values in per_env.items() if values[env] is not None}
                             for env in envs])
        self._held[self._tensor(envs)] = self._tensor(idle[envs])
        success = self._succeeded.clone()
        return self._observation_batch(), {"success": success, "episode_id": self._episode_ids()}

    def step(self, actions):
        import torch

        if self._observation is None:
            raise RuntimeError(f"{self.env_id}: call reset() before step()")
        actions = self._validate_actions(actions)
        running = ~self._held
        stepping = running.clone()
        chunk_rewards = torch.zeros((self.num_envs, self.chunk), device=self.device)
        chunk_dones = torch.zeros((self.num_envs, self.chunk), dtype=torch.bool, device=self.device)
        chunk_steps = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        truncated = terminated.clone()
        success_now = self._success_now.clone()
        observation = self._observation
        for index in range(self.chunk):
            flat, sim_reward, _, _, sim_info = step_without_cameras(self.simulator, actions[:, index])
            success = sim_info["success"].bool()
            failed = sim_info["fail"].bool() if "fail" in sim_info else torch.zeros_like(success)
            self._elapsed += stepping.long()
            step_terminated = stepping & (failed | (success & self.terminate_on_success))
            step_truncated = stepping & (self._elapsed >= self.setup.horizon) & ~step_terminated
            done_now = step_terminated | step_truncated
            reward, potential = step_reward(self.reward_mode, success, self._succeeded, sim_reward.float(), done_now,
                                            self._potential)
            chunk_rewards[:, index] = torch.where(stepping, reward, 0.0)
            self._potential = torch.where(stepping, potential, self._potential)
            self._succeeded |= success & stepping
            chunk_dones[:, index] = done_now
            chunk_steps += stepping.long()
            success_now = torch.where(stepping, success, success_now)
            terminated |= step_terminated
            truncated |= step_truncated
            observed = done_now | (stepping & (index == self.chunk - 1))
            if bool(observed.any()):
                current = self.simulator.get_obs() if self.obs_mode == "rgb" else flat
                observation = _merge_rows(observed, self.adapter.batched(current, self._instructions), observation)
            stepping &= ~done_now
        rewards = chunk_rewards.sum(dim=1)
        self._return += rewards
        self._length += running.long()
        self._success_now = torch.where(running, success_now, self._success_now)
        self._success_once |= self._success_now & running
        self._observation = observation
        info: dict[str, Any] = {"success": self._success_now.clone()}
        if self.chunked:
            info.update(chunk_rewards=chunk_rewards, chunk_dones=chunk_dones, chunk_steps=chunk_steps)
        finished = terminated | truncated
        if bool(finished.any()):
            if self.autoreset_mode == AutoresetMode.DISABLED:
                self._held |= finished
                info["episode"], info["_episode"] = self._figures(), finished.cpu().numpy()
            else:
                self._autoreset(finished, info)
        return self._observation_batch(), rewards, terminated, truncated, info

    def episode_statistics(self) -> list[dict[str, Any]]:
        """Each sub-env's ``info["episode"]`` figures as Python values, for its episode so far (finished or not)."""
        return per_env_figures(self._figures())

    def close_extras(self, **kwargs):
        self.simulator.close()

    def _restart(self, envs: np.ndarray, options: Sequence[dict[str, Any]]) -> None:
        """Reset the sub-envs ``envs``, sub-env ``envs[i]`` to the episode ``options[i]`` names (drawn where
        it names none); the other sub-envs keep their state and observation."""
        starts = []
        for env_options in options:
            env_options = validate_options(self.env_id, env_options)
            split = self.setup.split_of(env_options)
            episode_id = env_options.get("episode_id")
            if episode_id is None:
                episode_id = self.setup.episodes.draw_episode_id(split, self._np_random)
            starts.append(self.setup.episodes.start(split, int(episode_id)))
        arguments = reset_arguments(starts)
        if len(envs) < self.num_envs:
            arguments["options"]["env_idx"] = self._tensor(envs)
        raw, _ = self.simulator.reset(**arguments)
        instructions = list(self._instructions)
        for env, start in zip(envs, starts):
            instructions[env] = start.instruction
            self.episode_infos[env] = dict(start.info)
        self._instructions = tuple(instructions)
        index = self._tensor(envs)
        for counter in (self._elapsed, self._length, self._return, self._potential, self._succeeded,
                        self._success_now, self._success_once, self._held):
            counter[index] = 0
        restarted = self._tensor(np.isin(np.arange(self.num_envs), envs))
        self._observation = _merge_rows(restarted, self.adapter.batched(raw, self._instructions), self._observation)

    def _autoreset(self, finished, info: dict[str, Any]) -> None:
        """SAME_STEP: record the finished sub-envs' last observation and info, then restart them on episodes
        drawn from their splits."""
        mask = finished.cpu().numpy()
        final_obs = np.full(self.num_envs, None, dtype=object)
        for env in np.flatnonzero(mask):
            final_obs[env] = {key: value[env] for key, value in self._observation.items()}
            final_obs[env]["task_description"] = self._instructions[env]
        info["final_obs"], info["_final_obs"] = final_obs, mask
        episode = self._figures()
        info["final_info"] = {"success": info["success"], "_success": mask, "episode": episode, "_episode": mask}
        info["_final_info"] = mask
        envs = np.flatnonzero(mask)
        self._restart(envs, [{"split": self.episode_infos[env]["split"]} for env in envs])
        info["episode_id"] = self._episode_ids()

    def _figures(self) -> dict[str, Any]:
        return episode_figures(self._return.clone(), self._length.clone(), self._success_once.clone(),
                               self._success_now.clone())

    def _observation_batch(self) -> dict[str, Any]:
        return {**{key: value for key, value in self._observation.items() if key != "task_description"},
                "task_description": self._instructions}

    def _episode_ids(self) -> np.ndarray:
        return np.array([info["episode_id"] for info in self.episode_infos], np.int64)

    def _tensor(self, values):
        import torch

        return torch.as_tensor(values, device=self.device)

    def _mask_option(self, mask, name: str, fill: bool) -> np.ndarray:
        if mask is None:
            return np.full(self.num_envs, fill)
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
            raise ValueError(f"{self.env_id}: reset option {name!r} must be a bool array of shape ({self.num_envs},), "
                             f"got dtype {mask.dtype} with shape {mask.shape}")
        return mask

    def _per_env_option(self, key: str, value) -> list:
        if isinstance(value, (str, int, np.integer)) or value is None:
            return [value] * self.num_envs
        values = list(value)
        if len(values) != self.num_envs:
            noun = "episode ids" if key == "episode_id" else f"{key} values"
            raise ValueError(f"{self.env_id}: expected {self.num_envs} {noun}, got {len(values)}")
        return values

    def _validate_actions(self, actions):
        import torch

        actions = torch.as_tensor(actions, device=self.device)
        shape = self.action_space.shape
        if not actions.is_floating_point():
            raise ValueError(f"{self.env_id}: expected float actions of shape {shape}, "
                             f"got dtype {actions.dtype} with shape {tuple(actions.shape)}")
        if tuple(actions.shape) != shape:
            raise ValueError(f"{self.env_id}: expected actions of shape {shape}, got shape {tuple(actions.shape)}")
        if not bool(torch.isfinite(actions).all()):
            raise ValueError(f"{self.env_id}: expected finite actions, got non-finite values")
        return actions.float().clamp(-1.0, 1.0).reshape(self.num_envs, self.chunk, -1)


def _autoreset_mode(env_id: str, mode: AutoresetMode | str) -> AutoresetMode:
    allowed = [allowed_mode.value for allowed_mode in AUTORESET_MODES]
    if not any(mode in (allowed_mode, allowed_mode.value) for allowed_mode in AUTORESET_MODES):
        raise ValueError(f"{env_id}: autoreset_mode must be one of {allowed}, got {mode!r}")
    return AutoresetMode(mode)


def _merge_rows(mask, observation: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    """Rows of ``observation`` where ``mask`` holds, ``previous``'s elsewhere (new tensors either way, so that
    no row follows the simulator's buffers); instructions are left out."""
    import torch

    merged = {}
    for key, value in observation.items():
        if key == "task_description":
            continue
        if previous is None:
            merged[key] = value.clone()
            continue
        shape = (-1,) + (1,) * (value.dim() - 1)
        merged[key] = torch.where(mask.reshape(shape), value, previous[key])
    return merged


def per_env_figures(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Batched ``info["episode"]`` figures (a tensor per key) as one dict of Python values per sub-env."""
    columns = {key: value.tolist() for key, value in figures.items()}
    return [dict(zip(columns, row)) for row in zip(*columns.values())]
