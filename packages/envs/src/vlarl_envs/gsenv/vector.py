"""Many GSEnvs, rendered together: physics in the sub-envs, every image in one rasterizer call.

The sub-envs run state-only (``obs_mode="state"``), in subprocesses or in this process. This
process keeps one more PutCubeOnPlate scene that never steps, only to bind the splats to
the robot's links and to run its forward kinematics: from each sub-env's joints (``states``)
and object poses (``privileged_state``) it rebuilds every body pose, then renders the whole
batch with one rasterizer call (on a GPU with gsplat, batched in one kernel launch; on a CPU
with the PyTorch rasterizer, batched in one sort and one compositing pass).

``gym.make_vec("vlarl/GSEnv-PutCubeOnPlate-v0", num_envs=N)`` comes here (an explicit
``vectorization_mode="sync"`` or ``"async"`` gives gymnasium's own vector env instead, where
each sub-env renders its own images).

Episodes of the ``robustness`` split look different (``vlarl_envs.gsenv.robustness``): the
renderer reads each sub-env's split and episode id from its reset info and renders the sub-envs
that share a look together, so ``train`` and ``test`` batches stay one call.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from vlarl_envs.contract import check_obs_mode, image_shape
from vlarl_envs.gsenv.env import ARM_JOINTS
from vlarl_envs.gsenv.registration import GSENV_ID
from vlarl_envs.gsenv.robustness import NOMINAL, Look, sample_look
from vlarl_envs.splats.gaussians import pose_matrix
from vlarl_envs.vector import make_vec


def make_gsenv_vec(
    num_envs: int = 1,
    env_id: str = GSENV_ID,
    physics: str = "async",
    obs_mode: str = "rgb",
    image_size: int | tuple[int, int] = (480, 640),
    splat_backend: str = "auto",
    capture: str | os.PathLike | None = None,
    asset_settings: dict | None = None,
    splat_decimation: int | None = None,
    **env_kwargs: Any,
) -> VectorEnv:
    """``num_envs`` GSEnvs whose images are rendered in one batch (the id's vector entry point).

    Args:
        num_envs: number of sub-environments.
        env_id: the registered id.
        physics: where the sub-envs step, "async" (a subprocess each) or "sync" (this process).
        obs_mode, image_size, splat_backend, capture, asset_settings, splat_decimation: as for
            one GSEnv.
        **env_kwargs: the other single-env arguments (horizon, terminate_on_success, split,
            reward_mode, action_chunk).
    """
    check_obs_mode(obs_mode)
    states = make_vec(env_id, num_envs, vectorization_mode=physics, obs_mode="state", **env_kwargs)
    if obs_mode == "state":
        return states
    return BatchedSplatRendering(states, image_size, splat_backend, capture, asset_settings, splat_decimation)


class BatchedSplatRendering(VectorWrapper):
    """Adds ``main_images`` to a state-only GSEnv vector env, all sub-envs in one render.

    Args:
        env: a vector env of GSEnvs with ``obs_mode="state"``.
        image_size: camera resolution, int or (H, W).
        splat_backend: "auto", "torch" or "gsplat".
        capture: a capture directory, or None for the built assets.
        asset_settings: ``BuildSettings`` fields for the built assets.
        splat_decimation: 1 in this many body Gaussians, or None for ``auto_decimation``.
    """

    def __init__(
        self,
        env: VectorEnv,
        image_size: int | tuple[int, int],
        splat_backend: str = "auto",
        capture: str | os.PathLike | None = None,
        asset_settings: dict | None = None,
        splat_decimation: int | None = None,
    ) -> None:
        super().__init__(env)
        from vlarl_envs.gsenv.assets import BuildSettings, ensure_assets
        from vlarl_envs.gsenv.bodies import auto_decimation, splat_scene
        from vlarl_envs.gsenv.capture import load_capture
        from vlarl_envs.gsenv.restyle import LookRenderers
        from vlarl_envs.gsenv.simulator import build_task
        from vlarl_envs.gsenv.task import CAMERA_NAME
        from vlarl_envs.splats.backends import make_rasterizer
        from vlarl_envs.splats.camera import PinholeCamera
        from vlarl_envs.splats.scene import SceneRenderer

        shape = image_shape(image_size)
        self._task = build_task("state", shape[:2])
        with torch.no_grad():
            root = capture if capture is not None else ensure_assets(self._task, BuildSettings(**(asset_settings or {})))
        scene = splat_scene(self._task, load_capture(root), splat_decimation or auto_decimation(shape[0]))
        params = self._task._sensors[CAMERA_NAME].get_params()
        camera = PinholeCamera.from_extrinsic(shape[1], shape[0], params["intrinsic_cv"][0], params["extrinsic_cv"][0])
        self.renderer = SceneRenderer(scene, camera, make_rasterizer(splat_backend))
        self._renderers = LookRenderers(self.renderer, keep=self.num_envs)
        self._looks: list[Look] = [NOMINAL] * self.num_envs
        links = [link.name for link in self._task.agent.robot.get_links()]
        self._body_sources = [links.index(name) if name in links else name for name in scene.body_names]
        self._kinematics = self._task.agent.robot._objs[0].create_pinocchio_model()
        single = env.single_observation_space
        self.single_observation_space = spaces.Dict({"main_images": spaces.Box(0, 255, shape, np.uint8), **single.spaces})
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)

    def body_poses(self, states: np.ndarray, privileged: np.ndarray) -> torch.Tensor:
        """(B, G, 4, 4) poses of the scene's bodies (links, cube, plate) from the sub-envs'
        ``states`` (B, 8) and ``privileged_state`` (B, 18)."""
        batch = []
        for joints, extra in zip(states, privileged):
            qpos = np.concatenate([joints[:ARM_JOINTS], [joints[ARM_JOINTS] / 2] * 2]).astype(float)  # mimic fingers
            self._kinematics.compute_forward_kinematics(qpos)
            objects = {
                "cube": pose_matrix(torch.tensor(extra[7:10]), torch.tensor(extra[10:14])),
                "plate": pose_matrix(torch.tensor(extra[14:17]), torch.tensor([1.0, 0.0, 0.0, 0.0])),  # never turns
            }
            batch.append(
                torch.stack(
                    [
                        objects[source] if isinstance(source, str)
                        else torch.tensor(self._kinematics.get_link_pose(source).to_transformation_matrix())
                        for source in self._body_sources
                    ]  # fmt: skip
                ).float()
            )
        return torch.stack(batch)

    def _with_images(self, observations: dict[str, Any], looks: list[Look]) -> dict[str, Any]:
        """``observations`` with ``main_images``, row ``i`` rendered under ``looks[i]``: one
        render call per distinct look."""
        poses = self.body_poses(observations["states"], observations["privileged_state"])
        images = None
        for look in dict.fromkeys(looks):
            rows = [index for index, other in enumerate(looks) if other == look]
            rendered = self._renderers(look).render(poses[rows]).cpu().numpy()
            if len(rows) == len(looks):
                images = rendered
                break
            if images is None:
                images = np.empty((len(looks), *rendered.shape[1:]), rendered.dtype)
            images[rows] = rendered
        return {"main_images": images, **observations}

    def _note_resets(self, infos: dict[str, Any]) -> None:
        """Take the look of every sub-env whose reset info is in ``infos``."""
        started = infos.get("_episode_id", np.zeros(self.num_envs, bool))
        for index in np.flatnonzero(started):
            self._looks[index] = sample_look(str(infos["split"][index]), int(infos["episode_id"][index]))

    def reset(self, *, seed=None, options=None):
        observations, infos = self.env.reset(seed=seed, options=options)
        self._note_resets(infos)
        return self._with_images(observations, self._looks), infos

    def step(self, actions):
        observations, rewards, terminated, truncated, infos = self.env.step(actions)
        if "final_obs" in infos and infos["_final_obs"].any():
            finished = np.flatnonzero(infos["_final_obs"])
            final = [infos["final_obs"][i] for i in finished]
            images = self._with_images(
                {key: np.stack([o[key] for o in final]) for key in ("states", "privileged_state")},
                [self._looks[i] for i in finished],
            )["main_images"]
            for index, image in zip(finished, images):
                infos["final_obs"][index] = {"main_images": image, **infos["final_obs"][index]}
        self._note_resets(infos)
        return self._with_images(observations, self._looks), rewards, terminated, truncated, infos

    def close(self, **kwargs):
        self._task.close()
        return self.env.close(**kwargs)
