"""PutCubeOnPlate as a ManiSkill3 task: the physics behind ``vlarl/GSEnv-PutCubeOnPlate-v0``.

Importing this module imports ManiSkill; ``vlarl_envs.gsenv`` does so only when an env is built.
"""

from __future__ import annotations

import numpy as np
import sapien
import torch
from mani_skill.agents.robots import Panda
from mani_skill.envs.sapien_env import BaseEnv
from mani_skill.sensors.camera import CameraConfig
from mani_skill.utils import sapien_utils
from mani_skill.utils.structs.pose import Pose
from mani_skill.utils.structs.types import SimConfig

from vlarl_envs.gsenv.layout import (
    CAMERA_EYE,
    CAMERA_TARGET,
    CUBE_HALF_SIZE,
    CUBE_X_RANGE,
    CUBE_Y_RANGE,
    PLATE_HALF_THICKNESS,
    PLATE_RADIUS,
    PLATE_X_RANGE,
    PLATE_Y_RANGE,
    REFERENCE_IMAGE_SIZE,
    SUCCESS_HEIGHT_RANGE,
    SUCCESS_XY_DISTANCE,
    TABLE_CENTRE,
    TABLE_HALF_SIZE,
    Layout,
    camera_intrinsics,
)

CAMERA_NAME = "third_view_camera"
CUBE_COLOUR = (0.85, 0.12, 0.1)
PLATE_COLOUR = (0.93, 0.93, 0.9)
TABLE_COLOUR = (0.62, 0.47, 0.33)
SIM_FREQUENCY = 100
CONTROL_FREQUENCY = 10
MAX_DENSE_REWARD = 5.0
DROP_OFFSET = (0.0, 0.0, 0.06)
"""Where the dense reward wants the held cube: this far above the plate's centre (m)."""


class PutCubeOnPlateTask(BaseEnv):
    """**Task Description:**
    A Franka Panda arm (ManiSkill 3.0.1 has no FR3) picks up a 4 cm cube and puts it on a
    plate. Actions are end-effector target delta poses plus the gripper: 7-D, 10 Hz control
    over 100 Hz physics.

    **Randomizations:**
    - the cube's xy in [0.40, 0.58] x [0.08, 0.22] m and its yaw in [-45, 45] degrees;
    - the plate's xy in [0.42, 0.58] x [-0.18, -0.06] m;
    both from ``options["layout"]`` (a ``vlarl_envs.gsenv.layout.Layout``), or from the
    episode RNG without it.

    **Success Conditions:**
    - the cube's centre is within 7 cm of the plate's centre in xy;
    - and 0 to 7 cm above it;
    - and the gripper has released it (not grasping).
    """

    SUPPORTED_ROBOTS = ["panda"]
    agent: Panda

    def __init__(self, *args, camera_size: tuple[int, int] = REFERENCE_IMAGE_SIZE, robot_uids="panda", **kwargs):
        """``camera_size`` is the (H, W) of the third-person camera."""
        self.camera_size = tuple(int(v) for v in camera_size)
        super().__init__(*args, robot_uids=robot_uids, **kwargs)

    @property
    def _default_sim_config(self):
        return SimConfig(sim_freq=SIM_FREQUENCY, control_freq=CONTROL_FREQUENCY)

    @property
    def _default_sensor_configs(self):
        height, width = self.camera_size
        pose = sapien_utils.look_at(eye=CAMERA_EYE, target=CAMERA_TARGET)
        return [
            CameraConfig(
                CAMERA_NAME, pose, width, height, intrinsic=camera_intrinsics(height, width), near=0.01, far=10.0
            )
        ]

    @property
    def _default_human_render_camera_configs(self):
        return self._default_sensor_configs[0]

    def _load_agent(self, options: dict):
        super()._load_agent(options, sapien.Pose())

    def _load_scene(self, options: dict):
        table = self.scene.create_actor_builder()
        table.add_box_collision(half_size=TABLE_HALF_SIZE)
        table.add_box_visual(half_size=TABLE_HALF_SIZE,
                             material=sapien.render.RenderMaterial(base_color=[*TABLE_COLOUR, 1]))
        table.initial_pose = sapien.Pose(p=list(TABLE_CENTRE))
        self.table = table.build_kinematic(name="table")

        cube = self.scene.create_actor_builder()
        half = [CUBE_HALF_SIZE] * 3
        cube.add_box_collision(half_size=half)
        cube.add_box_visual(half_size=half, material=sapien.render.RenderMaterial(base_color=[*CUBE_COLOUR, 1]))
        cube.initial_pose = sapien.Pose(p=[0.5, 0.15, CUBE_HALF_SIZE])
        self.cube = cube.build(name="cube")

        # A flat disc: sapien cylinders run along x, so turn the axis up.
        plate = self.scene.create_actor_builder()
        upright = sapien.Pose(q=[np.sqrt(0.5), 0, np.sqrt(0.5), 0])
        plate.add_cylinder_collision(upright, radius=PLATE_RADIUS, half_length=PLATE_HALF_THICKNESS)
        plate.add_cylinder_visual(
            upright,
            radius=PLATE_RADIUS,
            half_length=PLATE_HALF_THICKNESS,
            material=sapien.render.RenderMaterial(base_color=[*PLATE_COLOUR, 1]),
        )
        plate.initial_pose = sapien.Pose(p=[0.5, -0.12, PLATE_HALF_THICKNESS])
        self.plate = plate.build_kinematic(name="plate")

    def _initialize_episode(self, env_idx: torch.Tensor, options: dict):
        with torch.device(self.device):
            count = len(env_idx)
            layout: Layout | None = options.get("layout")
            if layout is not None:
                cube_xy = torch.tensor([layout.cube_xy] * count)
                cube_yaw = torch.full((count,), layout.cube_yaw)
                plate_xy = torch.tensor([layout.plate_xy] * count)
            else:
                cube_xy = _uniform(count, CUBE_X_RANGE, CUBE_Y_RANGE)
                cube_yaw = (torch.rand(count) - 0.5) * (torch.pi / 2)
                plate_xy = _uniform(count, PLATE_X_RANGE, PLATE_Y_RANGE)
            self.agent.reset(torch.tensor(self.agent.keyframes["rest"].qpos, dtype=torch.float32).repeat(count, 1))
            self.agent.robot.set_pose(sapien.Pose())
            cube_position = torch.cat([cube_xy, torch.full((count, 1), CUBE_HALF_SIZE)], dim=1)
            yaw_quat = torch.stack(
                [torch.cos(cube_yaw / 2), torch.zeros(count), torch.zeros(count), torch.sin(cube_yaw / 2)], dim=1
            )
            self.cube.set_pose(Pose.create_from_pq(cube_position, yaw_quat))
            self.cube.set_linear_velocity(torch.zeros((count, 3)))
            self.cube.set_angular_velocity(torch.zeros((count, 3)))
            plate_position = torch.cat([plate_xy, torch.full((count, 1), PLATE_HALF_THICKNESS)], dim=1)
            self.plate.set_pose(Pose.create_from_pq(plate_position))

    def evaluate(self):
        offset = self.cube.pose.p - self.plate.pose.p
        near = torch.linalg.norm(offset[:, :2], dim=1) <= SUCCESS_XY_DISTANCE
        above = (offset[:, 2] >= SUCCESS_HEIGHT_RANGE[0]) & (offset[:, 2] <= SUCCESS_HEIGHT_RANGE[1])
        is_grasped = self.agent.is_grasping(self.cube)
        return {"success": near & above & ~is_grasped, "is_cube_over_plate": near & above, "is_grasped": is_grasped}

    def _get_obs_extra(self, info: dict):
        """The privileged state scripted experts read: gripper (TCP) pose, cube pose, plate position."""
        return dict(
            tcp_pose=self.agent.tcp_pose.raw_pose,
            cube_pose=self.cube.pose.raw_pose,
            plate_position=self.plate.pose.p,
            is_grasped=info["is_grasped"].float()[:, None],
        )

    def compute_dense_reward(self, obs, action: torch.Tensor, info: dict):
        """Staged, each stage in [0, 1]: TCP near the cube, cube held, held cube near its drop
        point above the plate, cube on the plate and let go. Success scores MAX_DENSE_REWARD."""
        cube = self.cube.pose.p
        held = info["is_grasped"].float()
        drop_point = self.plate.pose.p + torch.tensor(DROP_OFFSET, device=self.device)
        stages = (
            1 - torch.tanh(5 * torch.linalg.norm(cube - self.agent.tcp_pose.p, dim=1)),
            held,
            held * (1 - torch.tanh(5 * torch.linalg.norm(drop_point - cube, dim=1))),
            info["is_cube_over_plate"].float() * (1 - held),
        )
        return torch.where(info["success"], MAX_DENSE_REWARD, torch.stack(stages).sum(dim=0))

    def compute_normalized_dense_reward(self, obs, action: torch.Tensor, info: dict):
        return self.compute_dense_reward(obs, action, info) / MAX_DENSE_REWARD


def _uniform(count: int, x_range: tuple[float, float], y_range: tuple[float, float]) -> torch.Tensor:
    """(count, 2) points drawn uniformly from the box x_range x y_range."""
    low = torch.tensor([x_range[0], y_range[0]])
    high = torch.tensor([x_range[1], y_range[1]])
    return low + torch.rand(count, 2) * (high - low)
