"""The robosuite side of a LIBERO env: building a task's simulator, rendering, proprioception, perturbing.

Kept apart from the gymnasium env so that the env reads as the contract (reset, step, observation)
and this module as what LIBERO and robosuite need to behave: cameras rendered on demand, fast
rendering settings, the state vector openpi's LIBERO policies read.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import Any

if sys.platform.startswith("linux"):
    # Off-screen rendering without a display; robosuite picks its GL context from these on import.
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

import numpy as np

from vlarl_envs.libero.suites import INSTALL_HINT, LiberoTask
from vlarl_envs.mujoco_frustum import frustum_applies, visible_geoms_only

MAIN_CAMERA = "agentview"
WRIST_CAMERA = "robot0_eye_in_hand"

SETTLE_ACTION = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0])
"""No motion, gripper open: what openpi steps after every reset while objects come to rest."""

FREE_JOINT = 0
"""MuJoCo's ``mjJNT_FREE``: the joint of every movable object (the robot has hinges and slides)."""


def load_simulator_modules() -> Any:
    """Import LIBERO's env classes (which patch robosuite 1.4 for this MuJoCo) and MuJoCo itself."""
    try:
        envs = importlib.import_module("libero.libero.envs")
        mujoco = importlib.import_module("mujoco")
    except ImportError as error:
        raise ImportError(f"LIBERO environments need the simulator: {INSTALL_HINT}; "
                          f"import failed with: {error}") from error
    return envs, mujoco


def build_simulator(task: LiberoTask, fast_render: bool) -> Any:
    """LIBERO's ``OffScreenRenderEnv`` of ``task`` (4-9 s), set up to reset and render cheaply.

    - ``hard_reset=False``: robosuite would otherwise rebuild the MuJoCo model on every reset;
      every reset here restores a full initial state, so the model is built once per task.
    - ``use_camera_obs=False``: robosuite would render both cameras on every step; the env renders
      them itself, only for the observations it returns (none inside an action chunk).
    - ``ignore_done=True``: the horizon is the env's, not robosuite's.
    """
    envs, mujoco = load_simulator_modules()
    simulator = envs.OffScreenRenderEnv(
        bddl_file_name=str(task.bddl_file),
        hard_reset=False,
        use_camera_obs=False,
        ignore_done=True,
    )
    if fast_render:
        disable_costly_rendering(simulator.sim, mujoco)
    return simulator


def close_simulator(simulator: Any) -> None:
    """Close a simulator built by ``build_simulator``, freeing its GL objects in its own GL context.

    robosuite frees a render context's MuJoCo objects (textures, buffers, framebuffers) in whatever
    GL context is current when the context is collected; with several simulators in one process that
    is another simulator's, whose objects of the same ids it deletes: that simulator then renders
    wrong images while its physics stays right (it happened when an env rebuilt its simulator for
    another task or split beside other envs). The objects are freed here with their own context
    current, so the later collection finds nothing left to free.
    """
    context = getattr(simulator.sim, "_render_context_offscreen", None)
    if context is not None:
        context.gl_ctx.make_current()
        context.con.free()
        context.gl_ctx.free()
    simulator.close()


def disable_costly_rendering(sim: Any, mujoco: Any) -> None:
    """No shadows, reflections or multisampling: 3-4x faster frames with Mesa on a CPU.

    Multisampling is a property of the GL framebuffer, so the render context's MuJoCo context
    is made again after ``offsamples`` changes.
    """
    context = sim._render_context_offscreen
    context.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
    context.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
    sim.model.vis.quality.offsamples = 0
    context.gl_ctx.make_current()
    context.con.free()
    context._set_mujoco_context_and_buffers()


def reset_seeded(simulator: Any, seed: int) -> None:
    """Reset the simulator as a freshly built one starts, with LIBERO's samplers drawing from ``seed``.

    robosuite's Panda gripper accumulates its commands in ``current_action``, which only building
    the model zeroes (LIBERO's default hard reset rebuilds it every time); it is zeroed here, or an
    episode's first steps would depend on how the previous one left the gripper. LIBERO re-samples
    the poses of fixtures (cabinets, stoves: about 1 cm and 2 degrees) into the MuJoCo model at
    every reset, from numpy's global generator; its initial states hold only the joints. Seeding
    that generator for the reset, and restoring it after, makes the whole scene a function of the
    episode.
    """
    outer = np.random.get_state()
    np.random.seed(seed)
    try:
        simulator.reset()
    finally:
        np.random.set_state(outer)
    for robot in simulator.robots:
        robot.gripper.current_action = np.zeros_like(robot.gripper.current_action)


def render_camera(sim: Any, camera: str, height: int, width: int) -> np.ndarray:
    """One upright camera frame (H, W, 3) uint8.

    MuJoCo reads pixels bottom row first, so LIBERO's frames come upside down. They are rotated
    180 degrees, as openpi, OpenVLA and RLinf do and as the published LIBERO datasets store them;
    the result is upright and left-right mirrored against the camera's true view (in agentview,
    the world's +y is on the image's left), the picture LIBERO-trained policies know.
    """
    # Each simulator owns a GL context; several envs in one process must make theirs current.
    context = sim._render_context_offscreen
    context.gl_ctx.make_current()
    with unseen_geoms_hidden(sim, context, camera, height, width):
        frame = sim.render(width, height, camera_name=camera)
    return np.ascontiguousarray(frame[::-1, ::-1])


def unseen_geoms_hidden(sim: Any, context: Any, camera: str, height: int, width: int) -> Any:
    """The geoms outside the camera's view hidden while it renders, where that leaves the frame exact
    (``vlarl_envs.mujoco_frustum``): the wrist camera sees little of the arm and the pedestal it would draw."""
    import mujoco

    model, camera_id = sim.model._model, sim.model.camera_name2id(camera)
    flags = mujoco.mjtRndFlag
    if not frustum_applies(model, camera_id, context.scn.flags, flags.mjRND_SHADOW, flags.mjRND_REFLECTION):
        return contextlib.nullcontext()
    return visible_geoms_only(model, sim.data._data, camera_id, width, height, context.vopt.geomgroup)


def axis_angle(quaternion_xyzw: np.ndarray) -> np.ndarray:
    """The rotation of a unit quaternion (robosuite's x, y, z, w order) as axis times angle (3,)."""
    w = float(np.clip(quaternion_xyzw[3], -1.0, 1.0))
    sine = np.sqrt(1.0 - w * w)
    if sine < 1e-8:
        return np.zeros(3)
    return np.asarray(quaternion_xyzw[:3]) / sine * 2.0 * np.arccos(w)


def proprioception(robot_obs: dict[str, np.ndarray]) -> np.ndarray:
    """End-effector position (3), its axis-angle (3) and the two finger joints (2), float32 (8,):
    the state openpi's LIBERO example gives its policies."""
    return np.concatenate(
        [robot_obs["robot0_eef_pos"], axis_angle(robot_obs["robot0_eef_quat"]), robot_obs["robot0_gripper_qpos"]]
    ).astype(np.float32)


def shift_objects(sim: Any, rng: np.random.Generator, half_width: float) -> None:
    """Move every free object's x and y by a uniform draw in [-half_width, half_width] metres.

    Only free-jointed objects move: the robot, the table and fixtures (cabinets, stoves) with
    their drawers and knobs keep LIBERO's state.
    """
    model, data = sim.model._model, sim.data._data
    for joint in range(model.njnt):
        if int(model.jnt_type[joint]) == FREE_JOINT:
            address = int(model.jnt_qposadr[joint])
            data.qpos[address:address + 2] += rng.uniform(-half_width, half_width, 2)
    sim.forward()
