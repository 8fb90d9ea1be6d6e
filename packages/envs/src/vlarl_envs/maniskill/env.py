"""One ManiSkill3 task under the vlarl contract (a single env; ManiSkill's batch of one).

Task Description:
    A ManiSkill3 table-top task (``MANISKILL_TASKS``) with a Panda arm, or PutOnPlate. The
    instruction comes from ``MANISKILL_INSTRUCTIONS`` or the PutOnPlate episode.

Randomizations:
    ManiSkill's own (object poses, goals, robot joint noise), seeded per episode from
    ``(split stream, episode_id)``; PutOnPlate's from its episode records. The same
    ``episode_id`` replays the same initial state.

Success Conditions:
    ManiSkill's ``info["success"]`` (its ``evaluate()``). The episode terminates on success
    (or on the task's ``fail``) unless ``terminate_on_success=False``, and truncates after
    ``horizon`` steps.

Observations: ``main_images`` from the task's third-person camera, ``wrist_images`` from the
hand camera (robots with one), ``states`` = 7 arm joints + gripper opening,
``privileged_state`` = ManiSkill's flat state vector, ``task_description``. Actions are
ManiSkill's normalized controller actions: by default ``pd_ee_delta_pose``, 7-D (xyz delta,
rotation delta, gripper with -1 closed and +1 open); ``control_mode="pd_joint_delta_pos"``
gives 8-D joint deltas + gripper.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from vlarl_envs.contract import check_obs_mode, validate_action, validate_choice, validate_options
from vlarl_envs.maniskill.backend import resolve_sim_backend
from vlarl_envs.maniskill.episodes import PutOnPlateEpisodes, SeededEpisodes, reset_arguments
from vlarl_envs.maniskill.instructions import MANISKILL_INSTRUCTIONS
from vlarl_envs.maniskill.observations import ObservationAdapter
from vlarl_envs.maniskill.tasks import (
    CONTROL_MODES,
    MANISKILL_TASKS,
    ManiSkillTask,
    build_simulator,
    registered_horizon,
    step_without_cameras,
)


@dataclass(frozen=True)
class TaskSetup:
    """What the single and the batched env share: the task, its episodes, horizon and split.

    ``TaskSetup.create`` validates the constructor arguments both envs take.
    """

    env_id: str
    task: ManiSkillTask
    episodes: SeededEpisodes | PutOnPlateEpisodes
    horizon: int
    default_split: str

    @classmethod
    def create(
        cls, env_id: str, task: str, obs_mode: str, control_mode: str, split: str, horizon: int | None
    ) -> TaskSetup:
        spec = MANISKILL_TASKS[validate_choice(env_id, "ManiSkill task", task, MANISKILL_TASKS)]
        check_obs_mode(obs_mode)
        validate_choice(env_id, "control_mode", control_mode, CONTROL_MODES)
        if spec.maniskill_id is None:
            episodes = PutOnPlateEpisodes(env_id)
        else:
            episodes = SeededEpisodes(spec.name, MANISKILL_INSTRUCTIONS, env_id)
        validate_choice(env_id, "split", split, episodes.splits)
        if horizon is not None and horizon <= 0:
            raise ValueError(f"{env_id}: horizon must be positive, got {horizon}")
        return cls(env_id, spec, episodes, int(horizon) if horizon is not None else registered_horizon(spec), split)

    def split_of(self, options: dict[str, Any]) -> str:
        """The split of validated reset options; ``options["task"]`` may only name this task."""
        if "task" in options:
            validate_choice(self.env_id, "task", options["task"], (self.task.name,))
        return validate_choice(self.env_id, "split", options.get("split", self.default_split), self.episodes.splits)


class ManiSkillEnv(gym.Env):
    """A ManiSkill3 task with instructions, the contract's observations and replayable episodes.

    It defers images (``vlarl_envs.wrappers.action_chunk.DefersImages``): within an action chunk only
    the last sub-step's cameras are rendered. A ManiSkill CPU render goes through lavapipe and costs
    many physics steps, so a chunk of 5 renders once instead of five times.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        task: str,
        env_id: str = "vlarl/ManiSkill",
        obs_mode: str = "rgb",
        image_size: int | tuple[int, int] = 128,
        control_mode: str = "pd_ee_delta_pose",
        horizon: int | None = None,
        terminate_on_success: bool = True,
        split: str = "train",
        render_mode: str | None = None,
        sim_backend: str = "auto",
    ) -> None:
        """
        Args:
            task: a key of ``MANISKILL_TASKS`` ("PickCube", "PutOnPlate", ...).
            env_id: the registered id, used in error messages.
            obs_mode: "rgb" (images + state) or "state".
            image_size: resolution of every camera, int or (H, W); default 128x128.
            control_mode: one of ``CONTROL_MODES``; actions are always normalized to [-1, 1].
            horizon: steps before truncation; None is the task's own limit.
            terminate_on_success: end the episode on the first success step.
            split: default split for resets without ``options["split"]``.
            render_mode: None or "rgb_array" (the main camera image in rgb mode, ManiSkill's
                render camera at ``image_size`` in state mode).
            sim_backend: "auto" or "cpu" (ManiSkill's CPU physics), or "gpu" to simulate this one env
                on ManiSkill's GPU backend; "auto" is the CPU, where one scene runs faster.
        """
        self.env_id = env_id
        self.setup = TaskSetup.create(env_id, task, obs_mode, control_mode, split, horizon)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"{env_id}: render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.obs_mode = obs_mode
        self.render_mode = render_mode
        self.terminate_on_success = terminate_on_success
        render_size = image_size if render_mode == "rgb_array" and obs_mode == "state" else None
        self.simulator = build_simulator(
            self.setup.task, obs_mode, image_size, control_mode,
            sim_backend=resolve_sim_backend(env_id, sim_backend, batched=False), render_size=render_size,
        )
        self.adapter = ObservationAdapter(self.simulator, self.setup.task, obs_mode, image_size)
        self.observation_space = self.adapter.space
        self.action_space = spaces.Box(-1.0, 1.0, self.simulator.single_action_space.shape, np.float32)
        self._instruction = ""
        self._elapsed = 0
        self._started = False
        self._last_observation: dict[str, Any] | None = None
        self.defer_images = False

    @property
    def task(self) -> str:
        return self.setup.task.name

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = validate_options(self.env_id, options)
        split = self.setup.split_of(options)
        episode_id = options.get("episode_id")
        if episode_id is None:
            episode_id = self.setup.episodes.draw_episode_id(split, self.np_random)
        start = self.setup.episodes.start(split, int(episode_id))
        raw, _ = self.simulator.reset(**reset_arguments([start]))
        self._instruction = start.instruction
        self._elapsed = 0
        self._started = True
        observation = self.adapter.single(raw, self._instruction)
        self._last_observation = observation
        return observation, {"success": False, "is_success": False, **start.info}

    def step(self, action):
        if not self._started:
            raise RuntimeError(f"{self.env_id}: call reset() before step()")
        action = validate_action(self.env_id, action, self.action_space)
        deferred = self.defer_images and self.obs_mode == "rgb"
        if deferred:
            raw, reward, sim_terminated, _, sim_info = step_without_cameras(self.simulator, action)
        else:
            raw, reward, sim_terminated, _, sim_info = self.simulator.step(action)
        self._elapsed += 1
        success = bool(sim_info["success"])
        failed = bool(sim_info["fail"]) if "fail" in sim_info else False
        terminated = failed or (success and self.terminate_on_success)
        truncated = self._elapsed >= self.setup.horizon and not terminated
        if deferred:
            return self.adapter.without_images(raw, self._instruction), float(reward), terminated, truncated, {
                "success": success, "is_success": success}
        observation = self.adapter.single(raw, self._instruction)
        self._last_observation = observation
        return observation, float(reward), terminated, truncated, {"success": success, "is_success": success}

    def complete_observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        """The observation of the current state with its images: what a step without deferral returns."""
        if "main_images" in observation or self.obs_mode != "rgb":
            return observation
        completed = self.adapter.single(self.simulator.get_obs(), self._instruction)
        self._last_observation = completed
        return completed

    def render(self):
        if self.render_mode != "rgb_array" or not self._started:
            return None
        if self.obs_mode == "rgb":
            return self._last_observation["main_images"]
        return self.simulator.render()[0].cpu().numpy()

    def close(self):
        self.simulator.close()
        super().close()
