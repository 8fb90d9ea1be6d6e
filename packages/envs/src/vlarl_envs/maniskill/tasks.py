"""The ManiSkill3 tasks vlarl wraps, and how to build one simulator instance of them.

Only tasks that run offline are listed (no YCB, PartNet or scene downloads). Importing this
module does not import ManiSkill; ``build_simulator`` does.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from vlarl_envs.contract import image_shape
from vlarl_envs.maniskill.backend import PHYSX_NAMES, prepare_physx_gpu, vulkan_hint


@dataclass(frozen=True)
class ManiSkillTask:
    """A task under ``vlarl/ManiSkill-<name>-<version>``.

    Attributes:
        name: the task name in ids and ``options["task"]`` ("PickCube").
        version: the id's version suffix.
        maniskill_id: ManiSkill's own id, or None for a task defined here.
        robot_uids: the ManiSkill robot; ``panda_wristcam`` carries the hand camera.
        main_camera: the third-person sensor that gives ``main_images``.
        wrist_camera: the sensor that gives ``wrist_images``; None without one.
        gripper: whether the robot has a gripper (its opening is the last ``states`` entry).
        horizon: default steps before truncation; None uses ManiSkill's registered limit.
    """

    name: str
    version: str = "v1"
    maniskill_id: str | None = None
    robot_uids: str = "panda_wristcam"
    main_camera: str = "base_camera"
    wrist_camera: str | None = "hand_camera"
    gripper: bool = True
    horizon: int | None = None

    @property
    def env_id(self) -> str:
        return f"vlarl/ManiSkill-{self.name}-{self.version}"


def _builtin(name: str, **overrides: Any) -> ManiSkillTask:
    return ManiSkillTask(name=name, maniskill_id=f"{name}-v1", **overrides)


MANISKILL_TASKS: dict[str, ManiSkillTask] = {
    task.name: task
    for task in (
        _builtin("PickCube"),
        _builtin("PushCube"),
        _builtin("PullCube"),
        _builtin("StackCube"),
        _builtin("PegInsertionSide"),
        _builtin("PlugCharger"),
        _builtin("PushT", robot_uids="panda_stick", wrist_camera=None, gripper=False),
        _builtin("PokeCube"),
        _builtin("LiftPegUpright"),
        _builtin("PlaceSphere"),
        _builtin("RollBall"),
        _builtin("PullCubeTool"),
        _builtin("StackPyramid"),
        ManiSkillTask(name="PutOnPlate", version="v0", main_camera="main_camera", horizon=100),
    )
}
"""Task name -> task; PushT's robot is a Panda with a stick and no gripper or hand camera."""

CONTROL_MODES = ("pd_ee_delta_pose", "pd_ee_target_delta_pose", "pd_joint_delta_pos", "pd_joint_target_delta_pos")
"""Controllers whose actions are normalized to [-1, 1]: end-effector delta pose (the
default; 6-D + gripper) or joint deltas (7-D + gripper)."""


def load_maniskill() -> ModuleType:
    """Import ManiSkill's task registry on first use, with the install command when missing."""
    try:
        return importlib.import_module("mani_skill.envs")
    except ImportError as error:
        raise ImportError(
            "ManiSkill environments need the simulator: pip install 'vlarl-envs[maniskill]' (mani-skill==3.0.1), "
            "plus a Vulkan driver (scripts/install_system_deps.sh installs Mesa 25 lavapipe on a machine "
            "without a GPU); "
            f"import failed with: {error}"
        ) from error


def build_simulator(
    task: ManiSkillTask,
    obs_mode: str,
    image_size: int | tuple[int, int],
    control_mode: str,
    num_envs: int = 1,
    sim_backend: str = "cpu",
    render_size: int | tuple[int, int] | None = None,
):
    """The raw ManiSkill env (``BaseEnv``) behind a vlarl env, batched over ``num_envs``.

    ``sim_backend`` is "cpu" or "gpu" (``vlarl_envs.maniskill.backend.resolve_sim_backend``); on
    "gpu" PhysX's GPU library is put in place first (``prepare_physx_gpu``).

    Observations come as ManiSkill's flat ``state`` vector (obs_mode "state") or that vector
    plus camera images ("rgb+state"); every camera renders at ``image_size`` with the
    "minimal" shader and no shadows. The reward is ManiSkill's normalized dense reward
    where the task has one, else its sparse success reward.
    """
    load_maniskill()
    if sim_backend == "gpu":
        prepare_physx_gpu()
    height, width, _ = image_shape(image_size)
    kwargs: dict[str, Any] = dict(
        num_envs=num_envs,
        obs_mode="rgb+state" if obs_mode == "rgb" else "state",
        control_mode=control_mode,
        robot_uids=task.robot_uids,
        sensor_configs=dict(width=width, height=height, shader_pack="minimal"),
        sim_backend=PHYSX_NAMES[sim_backend],
    )
    if render_size is not None:
        render_height, render_width, _ = image_shape(render_size)
        kwargs.update(
            render_mode="rgb_array",
            human_render_camera_configs=dict(width=render_width, height=render_height, shader_pack="minimal"),
        )
    env_class = simulator_class(task)
    supported = env_class.SUPPORTED_REWARD_MODES
    kwargs["reward_mode"] = "normalized_dense" if "normalized_dense" in supported else "sparse"
    try:
        return env_class(**kwargs)
    except RuntimeError as error:
        if "vk::" in str(error) or "Vulkan" in str(error) or "physical device" in str(error):
            raise RuntimeError(
                f"ManiSkill needs a Vulkan device even for state observations ({error}); {vulkan_hint()}"
            ) from error
        raise


def step_without_cameras(simulator: Any, actions: Any) -> tuple:
    """ManiSkill's ``step`` with its observation taken in "state" mode: no camera renders, and the flat
    state vector in place of the observation dict (the same vector as the dict's ``state``). What an env
    that defers images steps within an action chunk; ``simulator.get_obs()`` renders the cameras later."""
    env = simulator.unwrapped
    obs_mode = env._obs_mode
    env._obs_mode = "state"
    try:
        return simulator.step(actions)
    finally:
        env._obs_mode = obs_mode


def simulator_class(task: ManiSkillTask) -> type:
    """ManiSkill's env class of ``task`` (PutOnPlate's is defined in this package)."""
    if task.maniskill_id is None:
        from vlarl_envs.maniskill.put_on_plate.task import PutOnPlateTask

        return PutOnPlateTask
    from mani_skill.utils.registration import REGISTERED_ENVS

    return REGISTERED_ENVS[task.maniskill_id].cls


def registered_horizon(task: ManiSkillTask) -> int:
    """The task's default episode length: ours, or ManiSkill's ``max_episode_steps``."""
    if task.horizon is not None:
        return task.horizon
    load_maniskill()
    from mani_skill.utils.registration import REGISTERED_ENVS

    return int(REGISTERED_ENVS[task.maniskill_id].max_episode_steps)
