"""ManiSkill observations -> the vlarl contract, for one env (numpy) or a batch (tensors).

ManiSkill returns batched torch tensors: the flat ``state`` vector (robot qpos, qvel, task
extras) and, in rgb mode, ``sensor_data[camera]["rgb"]`` as (N, H, W, 3) uint8, upright.
``states`` is the seven arm joints plus the gripper opening (the two finger joints summed,
metres); ``privileged_state`` is the whole flat vector, which holds the object poses the
scripted experts read.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from vlarl_envs.contract import observation_space
from vlarl_envs.maniskill.tasks import ManiSkillTask

ARM_JOINTS = 7
JOINT_LIMIT_SLACK = 0.05
"""The PD controller can overshoot a joint limit by a little; the bounds allow for that."""


class ObservationAdapter:
    """Builds contract observations from a ManiSkill env's raw ones.

    Args:
        simulator: the ManiSkill ``BaseEnv`` built by ``tasks.build_simulator``.
        task: the task, naming the cameras and whether there is a gripper.
        obs_mode: "state" or "rgb".
        image_size: camera resolution.
    """

    def __init__(self, simulator, task: ManiSkillTask, obs_mode: str, image_size) -> None:
        self.task = task
        self.obs_mode = obs_mode
        flat_space = simulator.single_observation_space
        state_dim = (flat_space["state"] if obs_mode == "rgb" else flat_space).shape[-1]
        limits = simulator.agent.robot.get_qlimits()[0].cpu().numpy()
        low, high = limits[:ARM_JOINTS, 0] - JOINT_LIMIT_SLACK, limits[:ARM_JOINTS, 1] + JOINT_LIMIT_SLACK
        if task.gripper:
            low = np.append(low, 0.0)
            high = np.append(high, limits[ARM_JOINTS:, 1].sum() + 0.01)
        self.space = observation_space(
            obs_mode,
            image_size,
            low,
            high,
            wrist_camera=task.wrist_camera is not None,
            extra={"privileged_state": spaces.Box(-np.inf, np.inf, (state_dim,), np.float32)},
        )

    def images(self, raw: Any) -> dict[str, np.ndarray]:
        """One env's camera images from an observation taken in ManiSkill's "rgb+state" mode."""
        sensors = raw["sensor_data"]
        images = {"main_images": sensors[self.task.main_camera]["rgb"][0].cpu().numpy().copy()}
        if self.task.wrist_camera is not None:
            images["wrist_images"] = sensors[self.task.wrist_camera]["rgb"][0].cpu().numpy().copy()
        return images

    def without_images(self, flat_raw: Any, instruction: str) -> dict[str, Any]:
        """One env's observation but its images, from ManiSkill's flat state vector (batch of one)."""
        flat = flat_raw[0].cpu().numpy()
        return {"states": self._states(flat), "task_description": instruction, "privileged_state": flat.copy()}

    def batched(self, raw: Any, instructions: tuple[str, ...]) -> dict[str, Any]:
        """A batch as tensors on the simulator's device; instructions as a tuple of str."""
        import torch

        flat = raw["state"] if self.obs_mode == "rgb" else raw
        observation: dict[str, Any] = {}
        if self.obs_mode == "rgb":
            sensors = raw["sensor_data"]
            observation["main_images"] = sensors[self.task.main_camera]["rgb"]
            if self.task.wrist_camera is not None:
                observation["wrist_images"] = sensors[self.task.wrist_camera]["rgb"]
        arm = flat[:, :ARM_JOINTS]
        if self.task.gripper:
            arm = torch.cat([arm, flat[:, ARM_JOINTS : ARM_JOINTS + 2].sum(dim=1, keepdim=True)], dim=1)
        observation["states"] = arm
        observation["task_description"] = instructions
        observation["privileged_state"] = flat
        return observation

    def _states(self, flat: np.ndarray) -> np.ndarray:
        if not self.task.gripper:
            return flat[:ARM_JOINTS].copy()
        states = np.empty(ARM_JOINTS + 1, np.float32)
        states[:ARM_JOINTS] = flat[:ARM_JOINTS]
        states[ARM_JOINTS] = flat[ARM_JOINTS] + flat[ARM_JOINTS + 1]
        return states
