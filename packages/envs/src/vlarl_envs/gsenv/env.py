"""GSEnv PutCubeOnPlate under the vlarl contract: ManiSkill physics, Gaussian-splat images.

Task Description:
    A Franka Panda picks up a cube and puts it on a plate ("pick up the cube and put it on
    the plate"), physics by ManiSkill 3 (``vlarl_envs.gsenv.task``). Images come from 3D
    Gaussian splats bound to the robot's links and the objects and moved every step from
    the simulator's poses, over a cached table splat and a backdrop photo. The splats are a
    real capture in the published GSEnv layout (``capture=<dir>``) or, by default, assets
    built from the simulator's own meshes and cached on first use.

Randomizations:
    The cube's position and yaw and the plate's position, drawn from ``(split stream,
    episode_id)`` by ``vlarl_envs.gsenv.layout.sample_layout``: the same ``episode_id``
    replays the same initial state, and ``train`` and ``test`` never share one. The
    ``robustness`` split replays ``test``'s initial states with the images varied
    (``vlarl_envs.gsenv.robustness``): the camera pose, the splats' colours, or the table and
    backdrop, by ``episode_id % 3``; ``info["variation"]`` names it ("none" in ``train`` and ``test``).

Success Conditions:
    The cube's centre is within 7 cm of the plate's centre in xy, 0 to 7 cm above it, and
    the gripper has let go. The episode terminates on success unless
    ``terminate_on_success=False`` and truncates after ``horizon`` (100) steps at 10 Hz.

Observations: ``main_images`` from the third-person camera (640x480 by default, like the
real camera), ``states`` = 7 arm joints + gripper opening (8,), ``privileged_state`` =
gripper TCP pose (7), cube pose (7), plate position (3) and whether the cube is grasped (1),
and ``task_description``. Actions are 7-D: end-effector target delta position and rotation
(normalized; 1 = 10 cm or 0.1 rad) and the gripper (-1 closed, +1 open).

Images can be deferred (``DefersImages``): within an action chunk only the last sub-step renders,
and ``vlarl_envs.gsenv.vector.SplatEpisodeEnvs`` renders many envs' images in one call.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from vlarl_envs.contract import validate_choice
from vlarl_envs.contract_env import ContractEnv
from vlarl_envs.gsenv.layout import INSTRUCTION, SPLIT_STREAMS, TASK_NAME, sample_layout
from vlarl_envs.gsenv.robustness import ROBUSTNESS_SPLIT, sample_look
from vlarl_envs.maniskill.tasks import step_without_cameras

if TYPE_CHECKING:
    from vlarl_envs.gsenv.restyle import LookRenderers

RENDERERS = ("gaussian", "maniskill")
"""``gaussian``: splat images (the point of GSEnv); ``maniskill``: ManiSkill's own rasterizer
of the same scene and camera, for comparisons."""
ARM_JOINTS = 7
PRIVILEGED_STATE_DIM = 18
JOINT_LIMIT_SLACK = 0.05
"""The PD controller can overshoot a joint limit by a little; the bounds allow for that."""


class GSEnv(ContractEnv):
    """PutCubeOnPlate with Gaussian-splat rendering and replayable episodes."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
    tasks = (TASK_NAME,)
    splits = tuple(SPLIT_STREAMS)

    def __init__(
        self,
        env_id: str = "vlarl/GSEnv-PutCubeOnPlate-v0",
        image_size: int | tuple[int, int] = (480, 640),
        horizon: int = 100,
        renderer: str = "gaussian",
        splat_backend: str = "auto",
        capture: str | os.PathLike | None = None,
        asset_settings: dict | None = None,
        splat_decimation: int | None = None,
        splat_renderers: LookRenderers | None = None,
        sim_backend: str = "auto",
        **settings: Any,
    ) -> None:
        """
        Args:
            env_id: the registered id, used in error messages.
            image_size: camera resolution, int or (H, W); default 480x640.
            horizon: steps before truncation.
            renderer: "gaussian" (splats) or "maniskill" (ManiSkill's rasterizer).
            splat_backend: "auto", "torch" (CPU) or "gsplat" (CUDA).
            capture: a capture directory in the published GSEnv layout; None builds (once)
                and uses assets made from the simulator's meshes.
            asset_settings: ``vlarl_envs.gsenv.assets.BuildSettings`` fields for those assets.
            splat_decimation: render 1 in this many body Gaussians (widened); None picks
                ``vlarl_envs.gsenv.bodies.auto_decimation`` of the image height.
            splat_renderers: another GSEnv's ``look_renderers`` (same image size) to share rather
                than build: envs of one process then hold one copy of the splats (GSEnv's episode
                vector env does this); splat_backend, capture, asset_settings and
                splat_decimation are then those it was built with.
            sim_backend: "auto" or "cpu" (ManiSkill's CPU physics: each GSEnv simulates one scene, and
                the GPU renders the splats), or "gpu" (ManiSkill's GPU physics for this one scene).
            **settings: ``ContractEnv``'s obs_mode, terminate_on_success, split ("train", "test" or
                "robustness": test's episodes with varied images, which needs renderer="gaussian") and
                render_mode (the camera image).
        """
        from vlarl_envs.gsenv.simulator import build_task
        from vlarl_envs.maniskill.backend import resolve_sim_backend
        from vlarl_envs.splats.backends import BACKENDS

        validate_choice(env_id, "renderer", renderer, RENDERERS)
        validate_choice(env_id, "splat_backend", splat_backend, BACKENDS)
        if splat_decimation is not None and splat_decimation < 1:
            raise ValueError(f"{env_id}: splat_decimation must be None or >= 1, got {splat_decimation}")
        if splat_renderers is not None and renderer != "gaussian":
            raise ValueError(f"{env_id}: splat_renderers need renderer='gaussian', got renderer={renderer!r}")
        self.renderer = renderer
        super().__init__(env_id, image_size=image_size, horizon=horizon, **settings)
        self.task = build_task("rgb" if renderer == "maniskill" and self._renders() else "state", self.image_size,
                               resolve_sim_backend(env_id, sim_backend, batched=False))
        self.splat_renderer = None
        self._look_renderers = None
        if renderer == "gaussian" and self._renders():
            if splat_renderers is None:
                from vlarl_envs.gsenv.restyle import LookRenderers

                nominal = self._make_splat_renderer(splat_backend, capture, asset_settings, splat_decimation)
                splat_renderers = LookRenderers(nominal)
            self._look_renderers = self._bind(splat_renderers)
            self.splat_renderer = splat_renderers.nominal

        limits = self.task.agent.robot.get_qlimits()[0].cpu().numpy()
        low = np.append(limits[:ARM_JOINTS, 0] - JOINT_LIMIT_SLACK, 0.0)
        high = np.append(limits[:ARM_JOINTS, 1] + JOINT_LIMIT_SLACK, limits[ARM_JOINTS:, 1].sum() + 0.01)
        self._declare_spaces(7, low, high, PRIVILEGED_STATE_DIM)
        self._raw_observation: Any = None

    def check_split(self, split: str) -> str:
        """``split``, or a ValueError naming the splits; ``robustness`` varies the splat render, so it needs the
        splat renderer where the env makes images."""
        split = super().check_split(split)
        if split == ROBUSTNESS_SPLIT and self.renderer != "gaussian" and self._renders():
            raise ValueError(
                f"{self.env_id}: split {split!r} varies the splat render; it needs renderer='gaussian', "
                f"got renderer={self.renderer!r}"
            )
        return split

    @property
    def look_renderers(self) -> LookRenderers | None:
        """The splat renderer of each robustness look (None without splat images), shareable with
        other GSEnvs of this image size through ``splat_renderers``."""
        return self._look_renderers

    def _bind(self, renderers: LookRenderers) -> LookRenderers:
        """Track this env's bodies for ``renderers``, which must render this env's image size."""
        from vlarl_envs.gsenv.bodies import BodyTracker

        camera = renderers.nominal.camera
        if (camera.height, camera.width) != self.image_size:
            raise ValueError(f"{self.env_id}: splat_renderers render {camera.height}x{camera.width} images, "
                             f"this env's image_size is {self.image_size[0]}x{self.image_size[1]}")
        self._bodies = BodyTracker(self.task, renderers.nominal.scene)
        return renderers

    def _make_splat_renderer(self, backend: str, capture, asset_settings: dict | None, decimation: int | None):
        from vlarl_envs.gsenv.assets import BuildSettings, ensure_assets
        from vlarl_envs.gsenv.bodies import auto_decimation, splat_scene
        from vlarl_envs.gsenv.capture import load_capture
        from vlarl_envs.gsenv.task import CAMERA_NAME
        from vlarl_envs.splats.backends import make_rasterizer
        from vlarl_envs.splats.camera import PinholeCamera
        from vlarl_envs.splats.scene import SceneRenderer

        if capture is None:
            with torch.no_grad():
                capture = ensure_assets(self.task, BuildSettings(**(asset_settings or {})))
        elif asset_settings:
            raise ValueError(f"{self.env_id}: asset_settings apply to built assets, not to capture={capture!r}")
        height, width = self.image_size
        scene = splat_scene(self.task, load_capture(capture), decimation or auto_decimation(height))
        params = self.task._sensors[CAMERA_NAME].get_params()
        camera = PinholeCamera.from_extrinsic(width, height, params["intrinsic_cv"][0], params["extrinsic_cv"][0])
        return SceneRenderer(scene, camera, make_rasterizer(backend))

    def _reset_to_episode(self, split: str, episode_id: int, task: str | None) -> dict[str, Any]:
        look = sample_look(split, episode_id)
        if self._look_renderers is not None:
            self.splat_renderer = self._look_renderers(look)
        layout = sample_layout(split, episode_id)
        self._raw_observation, _ = self.task.reset(seed=episode_id, options={"layout": layout})
        return {"task": TASK_NAME, "variation": look.variation}

    def _step_simulator(self, action: np.ndarray) -> tuple[float, dict[str, Any]]:
        self._raw_observation, reward, _, _, task_info = self._step_task(action[None])
        success = bool(task_info["success"][0])
        return float(reward[0]), {"success": success, "is_grasped": bool(task_info["is_grasped"][0])}

    def _step_task(self, actions):
        """The task's step; when no image is due now, with ManiSkill's camera left unrendered (its
        observation taken in "state" mode: ``_render_images`` renders it later if asked)."""
        if self.task._obs_mode == "state" or self._images_due():
            return self.task.step(actions)
        return step_without_cameras(self.task, actions)

    def attach_image(self, observation: dict[str, Any], image: np.ndarray) -> dict[str, Any]:
        """``observation`` with ``image``, the current state's camera image rendered elsewhere (with
        other envs' in one call, ``splat_inputs``), as its ``main_images``; ``render()`` returns it."""
        self._last_image = image
        return {"main_images": image, **observation}

    def splat_inputs(self):
        """What a splat image of the current state needs: the renderer of this episode's look and
        the bodies' world poses (1, G, 4, 4), for ``vlarl_envs.splats.scene.render_together``."""
        if self.splat_renderer is None:
            raise RuntimeError(f"{self.env_id}: splat_inputs needs renderer='gaussian' and images")
        return self.splat_renderer, self._bodies.poses()

    def privileged_state(self) -> np.ndarray:
        """float32 (18,): TCP pose, cube pose, plate position, cube grasped (0/1)."""
        task = self.task
        parts = [
            task.agent.tcp_pose.raw_pose[0],
            task.cube.pose.raw_pose[0],
            task.plate.pose.p[0],
            task.agent.is_grasping(task.cube).float(),
        ]
        return torch.cat([part.reshape(-1).cpu() for part in parts]).numpy().astype(np.float32)

    def _observe(self) -> dict[str, Any]:
        qpos = self.task.agent.robot.get_qpos()[0].cpu().numpy()
        states = np.append(qpos[:ARM_JOINTS], qpos[ARM_JOINTS:].sum()).astype(np.float32)
        return {"states": states, "task_description": INSTRUCTION, "privileged_state": self.privileged_state()}

    def _render_images(self) -> dict[str, np.ndarray]:
        if self.splat_renderer is not None:
            image = self.splat_renderer.render(self._bodies.poses())[0]
        else:  # ManiSkill rendered its camera into the observation of the last reset or step
            from vlarl_envs.gsenv.task import CAMERA_NAME

            if not isinstance(self._raw_observation, dict):  # stepped without the camera
                self._raw_observation = self.task.get_obs()
            image = self._raw_observation["sensor_data"][CAMERA_NAME]["rgb"][0]
        return {"main_images": image.cpu().numpy()}

    def alignment_masks(self, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Where the named bodies ("cube", "plate", link names) show through the camera:
        bool (H, W) masks from the splat render and from ManiSkill's own segmentation.

        For checking that a capture lines up with the simulation; renders with SAPIEN once.
        """
        from vlarl_envs.gsenv.task import CAMERA_NAME

        if self.splat_renderer is None:
            raise RuntimeError(f"{self.env_id}: alignment_masks needs renderer='gaussian' and images")
        splat = self.splat_renderer.body_masks(self._bodies.poses(), names)[0].cpu().numpy()
        sensor = self.task._sensors[CAMERA_NAME]
        self.task.scene.update_render(update_sensors=True, update_human_render_cameras=False)
        sensor.capture()
        segmentation = sensor.get_obs(rgb=False, depth=False, position=False, segmentation=True)["segmentation"]
        ids = [index for index, body in self.task.segmentation_id_map.items() if body.name in names]
        return splat, np.isin(segmentation[0, ..., 0].cpu().numpy(), ids)

    def close(self):
        self.task.close()
        super().close()
