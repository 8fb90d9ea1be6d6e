"""Many GSEnvs, rendered together: physics in each env, every image of a step in one rasterizer call.

``make_gsenv_episode_envs`` (the family's ``make_episode_envs``, what the trainer's env workers step)
gives a ``SplatEpisodeEnvs``: single GSEnvs in this process that share one set of splat
renderers and defer their images (``DefersImages``). Each env steps its physics (a whole action
chunk, no image at any sub-step); then the images of all envs that were reset or stepped are
rendered in one rasterizer call, whatever their robustness looks (``render_together``). Rewards,
dones, infos and statistics are the single envs' own, so they equal the
default ``EpisodeEnvs``' outputs; the images equal its per-env renders up to float rounding.

``make_gsenv_vec`` is gymnasium's kind of vector env (SAME_STEP autoreset). Its sub-envs run
state-only (``obs_mode="state"``), in subprocesses or in this process. This process keeps one
more PutCubeOnPlate scene that never steps, only to bind the splats to the robot's links and to
run its forward kinematics: from each sub-env's joints (``states``) and object poses
(``privileged_state``) it rebuilds every body pose, then renders the whole batch with one
rasterizer call (on a GPU with gsplat, batched in one kernel launch; on a CPU with the PyTorch
rasterizer, in passes of ``PIXELS_PER_PASS`` pixels).

``gym.make_vec("vlarl/GSEnv-PutCubeOnPlate-v0", num_envs=N)`` comes here (an explicit
``vectorization_mode="sync"`` or ``"async"`` gives gymnasium's own vector env instead, where
each sub-env renders its own images).

Episodes of the ``robustness`` split look different (``vlarl_envs.gsenv.robustness``): the
renderer reads each sub-env's split and episode id from its reset info and renders each sub-env
under its own look, still in one call.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
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
from vlarl_envs.splats.scene import render_together
from vlarl_envs.vector import EpisodeEnvs, make_episode_envs, make_vec


def make_gsenv_episode_envs(env_id: str, num_envs: int, **env_kwargs: Any) -> EpisodeEnvs:
    """``num_envs`` GSEnvs as ``EpisodeEnvs``, their splat images rendered in one call per step.

    Splat rgb envs become a ``SplatEpisodeEnvs`` sharing the first env's renderers; state
    envs, ``renderer="maniskill"`` (one SAPIEN scene per env) and ``video_dir`` (each env records
    its own video) get the default ``vlarl_envs.vector.make_episode_envs``.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if (env_kwargs.get("obs_mode", "rgb") != "rgb" or env_kwargs.get("renderer", "gaussian") != "gaussian"
            or env_kwargs.get("video_dir") is not None):  # fmt: skip
        return make_episode_envs(env_id, num_envs, **env_kwargs)
    first = gym.make(env_id, **env_kwargs)
    renderers = first.unwrapped.look_renderers
    renderers.keep = max(renderers.keep, num_envs)  # a look for every env (robustness episodes each have one)
    others = [gym.make(env_id, splat_renderers=renderers, **env_kwargs) for _ in range(num_envs - 1)]
    return SplatEpisodeEnvs([first, *others])


class SplatEpisodeEnvs(EpisodeEnvs):
    """GSEnvs (splat rgb) that play one episode per reset, all images of a step in one render call.

    The envs defer their images for good (``defer_images``; their ``ActionChunk`` then leaves the
    chunk's observation without them); after each reset and step the envs just reset or stepped
    are rendered together, each under its episode's look, and ``render()`` of each env returns its
    image. Envs sharing one ``LookRenderers`` (``make_gsenv_episode_envs``) share the splats and the
    cached backgrounds; any GSEnvs of one image size and backend work.
    """

    def __init__(self, envs) -> None:
        super().__init__(envs)
        self.simulators = [env.unwrapped for env in self.envs]
        for simulator in self.simulators:
            if getattr(simulator, "splat_renderer", None) is None or simulator.obs_mode != "rgb":
                raise ValueError(f"SplatEpisodeEnvs needs GSEnvs with obs_mode='rgb' and renderer='gaussian', "
                                 f"got {simulator}")
            simulator.defer_images = True

    def _complete(self, indices: list[int]) -> None:
        if not indices:
            return
        renderers, poses = zip(*(self.simulators[index].splat_inputs() for index in indices))
        images = render_together(renderers, torch.cat(poses)).cpu().numpy()
        for index, image in zip(indices, images):
            self._observations[index] = self.simulators[index].attach_image(self._observations[index], image)


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
            reward_mode, action_chunk, sim_backend).
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
            root = (capture if capture is not None
                    else ensure_assets(self._task, BuildSettings(**(asset_settings or {}))))
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
        self.single_observation_space = spaces.Dict(
            {"main_images": spaces.Box(0, 255, shape, np.uint8), **single.spaces}
        )
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
        """``observations`` with ``main_images``, row ``i`` rendered under ``looks[i]``, all in one call."""
        poses = self.body_poses(observations["states"], observations["privileged_state"])
        images = render_together([self._renderers(look) for look in looks], poses).cpu().numpy()
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
