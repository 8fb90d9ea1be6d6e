"""PutOnPlate as a ManiSkill3 task: the simulator side of ``vlarl/ManiSkill-PutOnPlate-v0``.

Importing this module imports ManiSkill; ``vlarl_envs.maniskill`` does so only when an env
is built.
"""

from __future__ import annotations

import math

import numpy as np
import sapien
import torch
from mani_skill.agents.robots.panda.panda_wristcam import PandaWristCam
from mani_skill.envs.sapien_env import BaseEnv
from mani_skill.sensors.camera import CameraConfig
from mani_skill.utils import sapien_utils
from mani_skill.utils.building.ground import build_ground
from mani_skill.utils.structs.actor import Actor
from mani_skill.utils.structs.pose import Pose

from vlarl_envs.maniskill.put_on_plate.appearance import ALL_TABLES, CAMERA_EYE, CAMERA_TARGET
from vlarl_envs.maniskill.put_on_plate.episodes import SPLIT_SIZES, PutOnPlateEpisode, make_episode
from vlarl_envs.maniskill.put_on_plate.objects import ALL_OBJECTS, ObjectSpec, build_object
from vlarl_envs.maniskill.put_on_plate.overlay import blend_overlays, texture_bank
from vlarl_envs.maniskill.put_on_plate.receptacles import (
    ALL_RECEPTACLES,
    RECEPTACLES_BY_NAME,
    RIM_MARGIN,
    ReceptacleSpec,
    build_receptacle,
)

TABLE_HEIGHT = 0.9
TABLE_TOP_HALF_SIZE = (0.6, 0.8)
TABLE_CENTRE_X = -0.2
ROBOT_BASE = (-0.615, 0.0, 0.0)
MAIN_CAMERA_FOV = 0.95
FLOOR_Z = -TABLE_HEIGHT
"""Unused objects wait on the floor under the table, where no camera sees them."""
OBJECT_INDEX = {spec.name: index for index, spec in enumerate(ALL_OBJECTS)}
RECEPTACLE_INDEX = {spec.name: index for index, spec in enumerate(ALL_RECEPTACLES)}
MAIN_CAMERA = "main_camera"
MAX_DENSE_REWARD = 6.0
RESTING_SPEED = 0.05


class PutOnPlateTask(BaseEnv):
    """**Task Description:**
    A Panda arm (wrist camera) must put the named target object on the named receptacle. The
    target is one of 34 named objects built from primitives (cubes, blocks, bars, balls, cans,
    rollers, pills, pillars, a dumbbell, L- and T-blocks, ...); it stands alone, or, in the
    ``semantic`` split's ``multi_object`` episodes, among 4-5 distractors. The receptacle is the
    white plate, or in the ``semantic`` split one of 8 unseen ones (bowls, trays, a mat, a dish,
    a saucer, a board), alone or beside another receptacle. The instruction is "put the {object}
    on the plate", in the ``semantic`` split also an unseen phrasing or "put the {object} on the
    {receptacle}".

    **Randomizations:**
    Everything comes from a ``PutOnPlateEpisode`` (``episodes.make_episode``) passed per
    sub-scene in ``reset(options={"episodes": [...]})``: which objects, their positions and
    yaws, which receptacles stand where, the table look, the lighting, the main camera pose,
    an overlay blended into the main camera's images, the robot's start joints and an
    optional mid-episode teleport of the target. Without that option, ``train`` episodes are
    drawn with the episode RNG.

    **Success Conditions:**
    - the target's centre is over the episode's target receptacle (at least ``RIM_MARGIN``
      inside its rim: a circle or, for square ones, a square) and no higher above its base
      than half the target's height plus 2 cm (it rests on it); another receptacle does not
      count;
    - the gripper does not grasp it;
    - it is at rest (speed below 5 cm/s).
    """

    SUPPORTED_ROBOTS = ["panda_wristcam"]
    agent: PandaWristCam

    def __init__(self, *args, robot_uids="panda_wristcam", **kwargs):
        super().__init__(*args, robot_uids=robot_uids, **kwargs)

    @property
    def _default_sensor_configs(self):
        return [CameraConfig("main_camera", sapien.Pose(), 128, 128, MAIN_CAMERA_FOV, 0.01, 10, mount=self.camera_rig)]

    @property
    def _default_human_render_camera_configs(self):
        pose = sapien_utils.look_at(CAMERA_EYE, CAMERA_TARGET)
        return CameraConfig("render_camera", pose, 256, 256, MAIN_CAMERA_FOV, 0.01, 10)

    def _load_agent(self, options: dict):
        super()._load_agent(options, sapien.Pose(p=list(ROBOT_BASE)))

    def _load_scene(self, options: dict):
        build_ground(self.scene, altitude=-TABLE_HEIGHT)
        self._build_table()
        self.table_looks = [self._build_table_look(index, look) for index, look in enumerate(ALL_TABLES)]
        self.receptacles = [self._build_receptacle(index, spec) for index, spec in enumerate(ALL_RECEPTACLES)]
        friction = sapien.physx.PhysxMaterial(static_friction=1.0, dynamic_friction=1.0, restitution=0.0)
        self.objects = [self._build_object(spec, friction) for spec in ALL_OBJECTS]
        rig = self.scene.create_actor_builder()
        rig.initial_pose = sapien_utils.look_at(CAMERA_EYE, CAMERA_TARGET).sp
        self.camera_rig = rig.build_kinematic("camera_rig")
        with torch.device(self.device):
            self._target_index = torch.zeros(self.num_envs, dtype=torch.long)
            self._move_step = torch.full((self.num_envs,), -1, dtype=torch.long)
            self._move_pose = torch.zeros((self.num_envs, 7))
            self._grasp_offset = torch.zeros((self.num_envs, 3))
            self._grasp_yaw = torch.zeros(self.num_envs)
            self._grasp_height = torch.zeros(self.num_envs)
            self._half_height = torch.zeros(self.num_envs)
            self._receptacle_index = torch.zeros(self.num_envs, dtype=torch.long)
            self._receptacle_inner = torch.zeros(self.num_envs)
            self._receptacle_top = torch.zeros(self.num_envs)
            self._receptacle_square = torch.zeros(self.num_envs, dtype=torch.bool)
            self._overlay_strength = torch.zeros(self.num_envs)
            self._overlay_whole = torch.zeros(self.num_envs, dtype=torch.bool)
            self._overlay_texture = torch.zeros(self.num_envs, dtype=torch.long)
        self._texture_bank: torch.Tensor | None = None

    def _after_reconfigure(self, options: dict):
        """Remember the segmentation ids of what overlays treat as foreground: the robot's
        links, the objects and the receptacles (RL4VLA's arm and its scene objects)."""
        super()._after_reconfigure(options)
        ids = [actor.per_scene_id for actor in (*self.objects, *self.receptacles)]
        ids += [link.per_scene_id for link in self.agent.robot.links]
        self._foreground_ids = torch.unique(torch.cat([torch.as_tensor(i).flatten() for i in ids])).long()

    def _build_table(self) -> None:
        builder = self.scene.create_actor_builder()
        half_size = (*TABLE_TOP_HALF_SIZE, 0.025)
        builder.add_box_collision(sapien.Pose(p=[0, 0, -0.025]), half_size=half_size)
        builder.add_box_visual(sapien.Pose(p=[0, 0, -0.026]), half_size=half_size, material=(0.3, 0.3, 0.3))
        builder.initial_pose = sapien.Pose(p=[TABLE_CENTRE_X, 0, 0])
        builder.build_kinematic("table")

    def _build_table_look(self, index: int, look) -> Actor:
        """A textured quad over the table top; the episode's look is put in place, the others
        wait under the floor."""
        material = sapien.render.RenderMaterial(base_color=[1, 1, 1, 1])
        material.base_color_texture = sapien.render.RenderTexture2D(look.texture(), "R8G8B8A8Unorm")
        half_x, half_y = TABLE_TOP_HALF_SIZE
        vertices = np.array([[-half_x, -half_y, 0], [half_x, -half_y, 0], [half_x, half_y, 0], [-half_x, half_y, 0]])
        shape = sapien.render.RenderShapeTriangleMesh(
            vertices=vertices,
            triangles=np.array([[0, 1, 2], [0, 2, 3]]),
            normals=np.tile([0.0, 0.0, 1.0], (4, 1)),
            uvs=np.array([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=float) * [1, half_y / half_x],
            material=material,
        )
        builder = self.scene.create_actor_builder()
        builder.initial_pose = sapien.Pose(p=[TABLE_CENTRE_X, 0, -2 * TABLE_HEIGHT - index])
        actor = builder.build_kinematic(f"table_look_{index}")
        if self.scene.can_render():
            for entity in actor._objs:
                body = sapien.render.RenderBodyComponent()
                body.attach(shape)
                entity.add_component(body)
        return actor

    def _build_receptacle(self, index: int, spec: ReceptacleSpec) -> Actor:
        """A receptacle; an episode puts its own on the table, the others wait under the floor."""
        builder = self.scene.create_actor_builder()
        build_receptacle(builder, spec, lambda rgb: sapien.render.RenderMaterial(base_color=[*rgb, 1.0]))
        builder.initial_pose = sapien.Pose(p=list(self._receptacle_parking_spot(index)))
        return builder.build_kinematic(spec.name.replace(" ", "_"))

    @staticmethod
    def _receptacle_parking_spot(index: int) -> tuple[float, float, float]:
        return (TABLE_CENTRE_X + 1.0 + 0.3 * index, 0.0, -2 * TABLE_HEIGHT)

    def _build_object(self, spec: ObjectSpec, friction) -> Actor:
        builder = self.scene.create_actor_builder()
        build_object(builder, spec, friction, lambda rgb: sapien.render.RenderMaterial(base_color=[*rgb, 1.0]))
        builder.initial_pose = sapien.Pose(p=list(self._parking_spot(OBJECT_INDEX[spec.name])))
        return builder.build(spec.name.replace(" ", "_"))

    @staticmethod
    def _parking_spot(index: int) -> tuple[float, float, float]:
        spec = ALL_OBJECTS[index]
        column, row = index % 6, index // 6
        return (TABLE_CENTRE_X - 0.5 + 0.2 * column, -0.6 + 0.2 * row, FLOOR_Z + spec.height / 2)

    def _load_lighting(self, options: dict):
        """Per sub-scene: the ambient light and a key light, which each episode sets, and a
        dim fill light from above."""
        self._key_lights = []
        for sub_scene in self.scene.sub_scenes:
            entity = sapien.Entity()
            light = sapien.render.RenderDirectionalLightComponent()
            light.shadow = False
            entity.add_component(light)
            sub_scene.add_entity(entity)
            self._key_lights.append(light)
            fill = sapien.Entity()
            fill_light = sapien.render.RenderDirectionalLightComponent()
            fill_light.color = [0.4, 0.4, 0.4]
            fill.add_component(fill_light)
            fill_light.pose = sapien.Pose(q=sapien.math.shortest_rotation([1, 0, 0], [0, 0, -1]))
            sub_scene.add_entity(fill)

    def _initialize_episode(self, env_idx: torch.Tensor, options: dict):
        env_idx_list = env_idx.tolist()
        episodes = options.get("episodes")
        if episodes is None:
            ids = self._batched_episode_rng.randint(SPLIT_SIZES["train"])
            ids = np.atleast_1d(ids)[: len(env_idx_list)]
            episodes = [make_episode("train", int(episode_id)) for episode_id in ids]
        if len(episodes) != len(env_idx_list):
            raise ValueError(f"PutOnPlate: {len(env_idx_list)} sub-scenes to reset but {len(episodes)} episodes given")
        with torch.device(self.device):
            self._place_robot(episodes)
            self._place_table_looks(episodes)
            self._place_receptacles(env_idx_list, episodes)
            self._place_objects(env_idx_list, episodes)
            self._set_overlays(env_idx_list, episodes)
            eyes = torch.tensor([e.camera_eye for e in episodes], dtype=torch.float32)
            targets = torch.tensor([e.camera_target for e in episodes], dtype=torch.float32)
            self.camera_rig.set_pose(sapien_utils.look_at(eyes, targets))
        self._apply_lighting(env_idx_list, episodes)

    def _place_robot(self, episodes: list[PutOnPlateEpisode]) -> None:
        qpos = torch.tensor([e.robot_qpos for e in episodes], dtype=torch.float32)
        self.agent.reset(qpos)
        self.agent.robot.set_pose(sapien.Pose(p=list(ROBOT_BASE)))

    def _place_table_looks(self, episodes: list[PutOnPlateEpisode]) -> None:
        for index, (actor, look) in enumerate(zip(self.table_looks, ALL_TABLES)):
            in_use = torch.tensor([e.table == look.name for e in episodes])
            z = torch.where(in_use, 0.0, -2 * TABLE_HEIGHT - index)
            positions = torch.stack([torch.full_like(z, TABLE_CENTRE_X), torch.zeros_like(z), z], dim=1)
            actor.set_pose(Pose.create_from_pq(positions))

    def _place_receptacles(self, env_idx_list: list[int], episodes: list[PutOnPlateEpisode]) -> None:
        """Put each episode's receptacles on the table and park the rest; remember the target one."""
        count = len(episodes)
        for index, (actor, spec) in enumerate(zip(self.receptacles, ALL_RECEPTACLES)):
            positions = np.tile(self._receptacle_parking_spot(index), (count, 1))
            for row, episode in enumerate(episodes):
                for placement in episode.receptacles:
                    if placement.name == spec.name:
                        positions[row] = (placement.x, placement.y, 0.0)
            actor.set_pose(Pose.create_from_pq(torch.tensor(positions, dtype=torch.float32)))
        for env, episode in zip(env_idx_list, episodes):
            spec = RECEPTACLES_BY_NAME[episode.receptacle]
            self._receptacle_index[env] = RECEPTACLE_INDEX[spec.name]
            self._receptacle_inner[env] = spec.half_size - RIM_MARGIN
            self._receptacle_top[env] = spec.thickness
            self._receptacle_square[env] = spec.square
        entities = [self.receptacles[index]._objs[env] for env, index in enumerate(self._receptacle_index.tolist())]
        self.target_receptacle = Actor.create_from_entities(
            entities, self.scene, torch.arange(self.num_envs), shared_name="target_receptacle"
        )

    def _set_overlays(self, env_idx_list: list[int], episodes: list[PutOnPlateEpisode]) -> None:
        for env, episode in zip(env_idx_list, episodes):
            overlay = episode.overlay
            self._overlay_strength[env] = 0.0 if overlay is None else overlay.strength
            self._overlay_whole[env] = overlay is not None and overlay.kind == "noise"
            self._overlay_texture[env] = 0 if overlay is None else overlay.texture

    def _place_objects(self, env_idx_list: list[int], episodes: list[PutOnPlateEpisode]) -> None:
        """Put each episode's objects on the table and park the rest; remember the target."""
        count = len(episodes)
        poses = {
            index: np.tile([*self._parking_spot(index), 1.0, 0.0, 0.0, 0.0], (count, 1))
            for index in range(len(ALL_OBJECTS))
        }
        for row, episode in enumerate(episodes):
            for placement in episode.placements:
                index = OBJECT_INDEX[placement.name]
                poses[index][row] = _table_pose(ALL_OBJECTS[index], placement.x, placement.y, placement.yaw)
        for index, actor in enumerate(self.objects):
            actor.set_pose(Pose.create(torch.tensor(poses[index], dtype=torch.float32)))
            actor.set_linear_velocity(torch.zeros((count, 3)))
            actor.set_angular_velocity(torch.zeros((count, 3)))
        for env, episode in zip(env_idx_list, episodes):
            self._target_index[env] = OBJECT_INDEX[episode.target]
            spec = ALL_OBJECTS[OBJECT_INDEX[episode.target]]
            self._grasp_offset[env] = torch.tensor(spec.grasp_point) - torch.tensor([0.0, 0.0, spec.height / 2])
            self._grasp_yaw[env] = spec.grasp_yaw
            self._grasp_height[env] = spec.grasp_point[2]
            self._half_height[env] = spec.height / 2
            move = episode.move
            self._move_step[env] = -1 if move is None else move.step
            if move is not None:
                self._move_pose[env] = torch.tensor(_table_pose(spec, move.x, move.y, move.yaw))
        entities = [self.objects[index]._objs[env] for env, index in enumerate(self._target_index.tolist())]
        self.target = Actor.create_from_entities(entities, self.scene, torch.arange(self.num_envs),
                                                 shared_name="target")

    def _apply_lighting(self, env_idx_list: list[int], episodes: list[PutOnPlateEpisode]) -> None:
        if not self.scene.can_render():
            return
        for env, episode in zip(env_idx_list, episodes):
            lighting = episode.lighting
            self.scene.sub_scenes[env].render_system.ambient_light = list(lighting.ambient)
            light = self._key_lights[env]
            light.color = list(lighting.key_colour)
            light.pose = sapien.Pose(q=sapien.math.shortest_rotation([1, 0, 0], list(lighting.key_direction)))

    def _before_control_step(self):
        """The ``moved_object`` variation: teleport the target once, unless it is held."""
        due = (self._move_step == self.elapsed_steps) & (self._move_step >= 0)
        if not bool(due.any()):
            return
        due &= ~self.agent.is_grasping(self.target)
        if not bool(due.any()):
            return
        keep = ~due[:, None]
        self.target.set_pose(Pose.create(torch.where(keep, self.target.pose.raw_pose, self._move_pose)))
        self.target.set_linear_velocity(self.target.linear_velocity * keep)
        self.target.set_angular_velocity(self.target.angular_velocity * keep)
        if self.gpu_sim_enabled:
            self.scene._gpu_apply_all()

    def _get_obs_sensor_data(self, apply_texture_transforms: bool = True) -> dict:
        """The cameras' images, with each episode's overlay blended into the main camera's
        (``appearance.ImageOverlay``); the wrist camera's stay as rendered. The segmentation
        that finds the foreground is read only while some sub-scene has an overlay."""
        sensor_obs = super()._get_obs_sensor_data(apply_texture_transforms)
        images = sensor_obs.get(MAIN_CAMERA, {})
        active = (self._overlay_strength > 0).nonzero().flatten()
        if "rgb" not in images or len(active) == 0:
            return sensor_obs
        rgb = images["rgb"]
        device = rgb.device
        camera = self.scene.sensors[MAIN_CAMERA]
        segmentation = camera.get_obs(rgb=False, depth=False, position=False, segmentation=True)["segmentation"]
        active = active.to(device)
        foreground = torch.isin(segmentation[..., 0].to(device).long()[active], self._foreground_ids.to(device))
        if self._texture_bank is None or self._texture_bank.device != device:
            self._texture_bank = texture_bank(device=device)
        textures = self._texture_bank[self._overlay_texture.to(device)[active]]
        strength, whole_image = self._overlay_strength.to(device)[active], self._overlay_whole.to(device)[active]
        blended = blend_overlays(rgb[active], foreground, textures, strength, whole_image)
        rgb = rgb.clone()
        rgb[active] = blended
        images["rgb"] = rgb
        return sensor_obs

    def _target_receptacle_top(self) -> torch.Tensor:
        """(N, 3) centre of the top of each episode's target receptacle's base."""
        top = self.target_receptacle.pose.p.clone()
        top[:, 2] += self._receptacle_top
        return top

    def evaluate(self):
        target_position = self.target.pose.p
        receptacle_top = self._target_receptacle_top()
        offset = target_position[:, :2] - receptacle_top[:, :2]
        horizontal = torch.linalg.norm(offset, dim=1)
        # Distance from the centre as the rim's shape measures it: a circle's or a square's.
        from_centre = torch.where(self._receptacle_square, offset.abs().max(dim=1).values, horizontal)
        height = target_position[:, 2] - receptacle_top[:, 2]
        half_height = self._half_height
        over_plate = from_centre <= self._receptacle_inner
        on_plate = over_plate & (height > 0.0) & (height <= half_height + 0.02)
        is_grasped = self.agent.is_grasping(self.target)
        resting = torch.linalg.norm(self.target.linear_velocity, dim=1) <= RESTING_SPEED
        return {
            "success": on_plate & ~is_grasped & resting,
            "on_plate": on_plate,
            "is_grasped": is_grasped,
            "target_to_plate": horizontal,
        }

    def _get_obs_extra(self, info: dict):
        """The privileged state the scripted expert reads, in the order of ``experts.PUT_ON_PLATE_LAYOUT``."""
        target_pose = self.target.pose
        grasp_point = target_pose.p + _rotate(target_pose.q, self._grasp_offset)
        grasp_yaw = _yaw(target_pose.q) + self._grasp_yaw
        return dict(
            tcp_pose=self.agent.tcp_pose.raw_pose,
            target_pose=target_pose.raw_pose,
            grasp_point=grasp_point,
            grasp_yaw=grasp_yaw[:, None],
            grasp_height=self._grasp_height[:, None],
            plate_position=self._target_receptacle_top(),
            is_grasped=info["is_grasped"].float()[:, None],
        )

    def compute_dense_reward(self, obs, action: torch.Tensor, info: dict):
        """Reach the target, grasp it, carry it over the plate, let go: up to MAX_DENSE_REWARD."""
        tcp = self.agent.tcp_pose.p
        target = self.target.pose.p
        reach = 1 - torch.tanh(5 * torch.linalg.norm(target - tcp, dim=1))
        grasped = info["is_grasped"].float()
        plate_above = self.target_receptacle.pose.p + torch.tensor([0.0, 0.0, 0.08], device=self.device)
        carry = 1 - torch.tanh(5 * torch.linalg.norm(plate_above[:, :2] - target[:, :2], dim=1))
        on_plate = info["on_plate"].float()
        reward = reach + grasped + (grasped + on_plate) * carry + on_plate * (1 - grasped)
        reward[info["success"]] = MAX_DENSE_REWARD
        return reward

    def compute_normalized_dense_reward(self, obs, action: torch.Tensor, info: dict):
        return self.compute_dense_reward(obs, action, info) / MAX_DENSE_REWARD


def _table_pose(spec: ObjectSpec, x: float, y: float, yaw: float) -> list[float]:
    """[x, y, z, qw, qx, qy, qz] of an object standing on the table top at yaw."""
    return [x, y, spec.height / 2, math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]


def _rotate(quaternion: torch.Tensor, vector: torch.Tensor) -> torch.Tensor:
    """Rotate (N, 3) vectors by (N, 4) wxyz quaternions."""
    w, xyz = quaternion[:, :1], quaternion[:, 1:]
    twice_cross = 2 * torch.linalg.cross(xyz, vector, dim=1)
    return vector + w * twice_cross + torch.linalg.cross(xyz, twice_cross, dim=1)


def _yaw(quaternion: torch.Tensor) -> torch.Tensor:
    """Heading (rotation about z) of (N, 4) wxyz quaternions."""
    w, x, y, z = quaternion.unbind(dim=1)
    return torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
