"""Building the ManiSkill task, with an install hint when ManiSkill is missing."""

from __future__ import annotations

import importlib.util

from vlarl_envs.gsenv.layout import REFERENCE_IMAGE_SIZE

CONTROL_MODE = "pd_ee_target_delta_pose"
"""End-effector target delta pose (xyz and rotation deltas, normalized to [-1, 1]) + gripper."""


def build_task(obs_mode: str = "state", camera_size: tuple[int, int] = REFERENCE_IMAGE_SIZE,
               sim_backend: str = "cpu"):
    """One ``PutCubeOnPlateTask`` (about 10 s on 2 cores on the CPU backend).

    Args:
        obs_mode: ManiSkill's observation mode; "state" renders nothing, "rgb" renders the
            third-person camera with ManiSkill's own rasterizer.
        camera_size: (H, W) of the third-person camera.
        sim_backend: "cpu" or "gpu" (ManiSkill's PhysX backends; ``vlarl_envs.maniskill.backend``).
    """
    if importlib.util.find_spec("mani_skill") is None:
        raise ImportError("GSEnv needs ManiSkill 3: pip install 'vlarl-envs[gsenv]'")
    from vlarl_envs.gsenv.task import PutCubeOnPlateTask
    from vlarl_envs.maniskill.backend import PHYSX_NAMES, prepare_physx_gpu

    if sim_backend == "gpu":
        prepare_physx_gpu()

    return PutCubeOnPlateTask(
        obs_mode=obs_mode,
        control_mode=CONTROL_MODE,
        reward_mode="normalized_dense",
        camera_size=camera_size,
        sim_backend=PHYSX_NAMES[sim_backend],
    )
