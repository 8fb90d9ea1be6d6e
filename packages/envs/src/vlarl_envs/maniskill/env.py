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

import numpy as np
from gymnasium import spaces

from vlarl_envs.contract import check_obs_mode, validate_choice
from vlarl_envs.contract_env import ContractEnv
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
        cls, env_id: str, task: str, obs_mode: str, control_mode: str, split: str, horizon: int | None,
        wrist_camera: bool = True,
    ) -> TaskSetup:
        """Raises ValueError on a bad argument; ``wrist_camera=False`` among them for a task whose robot has a
        hand camera, which ManiSkill renders with every observation."""
        spec = MANISKILL_TASKS[validate_choice(env_id, "ManiSkill task", task, MANISKILL_TASKS)]
        if not wrist_camera and spec.wrist_camera is not None:
            raise ValueError(f"{env_id}: wrist_camera=False is not supported: ManiSkill renders the hand camera of "
                             f"its {spec.robot_uids!r} robot with every observation")
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


class ManiSkillEnv(ContractEnv):
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
        image_size: int | tuple[int, int] = 128,
        horizon: int | None = None,
        control_mode: str = "pd_ee_delta_pose",
        obs_mode: str = "rgb",
        split: str = "train",
        sim_backend: str = "auto",
        wrist_camera: bool = True,
        **settings: Any,
    ) -> None:
        """
        Args:
            task: a key of ``MANISKILL_TASKS`` ("PickCube", "PutOnPlate", ...).
            env_id: the registered id, used in error messages.
            image_size: resolution of every camera, int or (H, W); default 128x128.
            horizon: steps before truncation; None is the task's own limit.
            control_mode: one of ``CONTROL_MODES``; actions are always normalized to [-1, 1].
            obs_mode: "rgb" (images + state) or "state".
            split: default split for resets without ``options["split"]``.
            sim_backend: "auto" or "cpu" (ManiSkill's CPU physics), or "gpu" to simulate this one env
                on ManiSkill's GPU backend; "auto" is the CPU, where one scene runs faster.
            wrist_camera: only True (ManiSkill renders the hand camera with every observation); False
                raises ValueError.
            **settings: ``ContractEnv``'s terminate_on_success and render_mode (the main camera image in rgb
                mode, ManiSkill's render camera at ``image_size`` in state mode).
        """
        self.setup = TaskSetup.create(env_id, task, obs_mode, control_mode, split, horizon, wrist_camera)
        self.tasks = (self.setup.task.name,)
        self.splits = self.setup.episodes.splits
        super().__init__(env_id, image_size=image_size, horizon=self.setup.horizon, obs_mode=obs_mode, split=split,
                         wrist_camera=wrist_camera, **settings)
        render_size = image_size if self.render_mode == "rgb_array" and obs_mode == "state" else None
        self.simulator = build_simulator(
            self.setup.task, obs_mode, image_size, control_mode,
            sim_backend=resolve_sim_backend(env_id, sim_backend, batched=False), render_size=render_size,
        )
        self.adapter = ObservationAdapter(self.simulator, self.setup.task, obs_mode, image_size)
        self.observation_space = self.adapter.space
        self.action_space = spaces.Box(-1.0, 1.0, self.simulator.single_action_space.shape, np.float32)
        self._raw: Any = None
        """ManiSkill's observation of the last reset or step: a dict with the cameras' images, or the flat
        state vector of a step that left the cameras unrendered."""
        self._instruction = ""
        self._failed = False

    @property
    def task(self) -> str:
        return self.setup.task.name

    def _draw_episode_id(self, split: str) -> int:
        return self.setup.episodes.draw_episode_id(split, self.np_random)

    def _reset_to_episode(self, split: str, episode_id: int, task: str | None) -> dict[str, Any]:
        start = self.setup.episodes.start(split, episode_id)
        self._raw, _ = self.simulator.reset(**reset_arguments([start]))
        self._instruction = start.instruction
        return dict(start.info)

    def _step_simulator(self, action: np.ndarray) -> tuple[float, dict[str, Any]]:
        if self._images_due():
            self._raw, reward, _, _, sim_info = self.simulator.step(action)
        else:
            self._raw, reward, _, _, sim_info = step_without_cameras(self.simulator, action)
        self._failed = bool(sim_info["fail"]) if "fail" in sim_info else False
        return float(reward), {"success": bool(sim_info["success"])}

    def _terminated(self, info: dict[str, Any]) -> bool:
        """The task's ``fail`` ends the episode too."""
        return self._failed or super()._terminated(info)

    def _observe(self) -> dict[str, Any]:
        flat = self._raw["state"] if isinstance(self._raw, dict) else self._raw
        return self.adapter.without_images(flat, self._instruction)

    def _render_images(self) -> dict[str, np.ndarray]:
        if not isinstance(self._raw, dict):  # stepped without the cameras
            self._raw = self.simulator.get_obs()
        return self.adapter.images(self._raw)

    def _render_main_image(self) -> np.ndarray:
        if self.obs_mode == "state":
            return self.simulator.render()[0].cpu().numpy()
        return super()._render_main_image()

    def close(self):
        self.simulator.close()
        super().close()
