"""The calvin_env side of a CALVIN env: building a scene's simulator, placing a symbolic state in it,
stepping, observing and rendering.

Kept apart from the gymnasium env so that the env reads as the contract and this module as what
calvin_env needs on today's stack:

- calvin_env logs the git commit of its own folder when a simulator is built, through gitpython, which
  raises outside a git checkout (a copied or unpacked calvin_env) and, inside another repository, reports
  that repository's commit and lists its modified files. The lookup says nothing about the simulation, so
  ``load_calvin`` replaces it in calvin_env's env module with one that looks nothing up.
- calvin_env subclasses gym 0.26's ``gym.Env``; vlarl never goes through gym's API (its wrappers, its
  checker, its 4-tuple ``step``): the env here steps calvin's robot and physics itself, so that an action
  chunk renders only its last frame. gym's import prints a notice that it is unmaintained; the import
  is quieted.
- calvin's robot, loading, makes a few pybullet calls that name no physics client (its white pedestal,
  its count of joints), which pybullet sends to client 0: in a process with several simulators (an ABC
  env's three scenes, several envs in one worker) every pedestal lands in the first simulator, and once
  client 0 is closed a load fails. ``load_calvin`` makes the robot load with its own client as the
  default of those calls.
- calvin_env's ``tacto`` submodule (tactile sensors) is never imported: the static and gripper cameras
  are the benchmark's.
- pybullet's C code prints ``argv[0]=`` on every connection, to file descriptor 1, where Python's
  ``redirect_stdout`` cannot reach; a simulator is built with that descriptor pointed at /dev/null, so
  a log does not gain a line whenever an env builds a scene's simulator.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import io
import os
import sys
import warnings
from types import SimpleNamespace
from typing import Any

import numpy as np

from vlarl_envs.calvin.assets import INSTALL_HINT, calvin_env_root, scene_config, task_oracle_config
from vlarl_envs.calvin.tasks import BLOCK_COLORS, SymbolicState, block

RENDERERS = ("tiny", "egl")
"""pybullet's CPU TinyRenderer (about 4x faster than EGL on Mesa's llvmpipe at 64 px), or EGL, through which
CALVIN rendered its datasets (a GPU's, or llvmpipe's on a CPU): shadows differ between the two."""

BULLET_HZ = 240.0
CONTROL_HZ = 30
"""calvin's benchmark settings: physics at 240 Hz, one action every 8 physics steps."""

SETTLE_STEPS = 15
"""Control steps (0.5 s) after every placement, holding the arm still: blocks dropped into the drawer or onto
another block come to rest and a held block is gripped before the first observation."""

MIN_BLOCK_DISTANCE = 0.09
"""Metres between the centres of two blocks on one surface: twice the half-diagonal of the largest block
(8 x 4 cm), so blocks never overlap whatever their yaw."""

BLOCK_YAW_BAND = np.pi / 8
"""Blocks lie within this of a quarter turn in yaw, where the gripper, square to the table, can take them."""

DRAWER_JITTER = np.array([0.05, 0.02])
"""Metres of uniform x and y offset of a block dropped into the drawer, around the drawer's centre."""

OPEN_GRIPPER, CLOSED_GRIPPER = 1.0, -1.0
"""calvin's gripper command: 1 opens, -1 closes."""

@functools.cache
def load_calvin() -> SimpleNamespace:
    """Import calvin_env's env and task oracle, with its git lookup and its robot's loading mended (see the
    module docstring); once per process."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            importlib.import_module("gym")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # hydra's version_base notice on calvin's @hydra.main
            play_table_env = importlib.import_module("calvin_env.envs.play_table_env")
        tasks = importlib.import_module("calvin_env.envs.tasks")
        robot = importlib.import_module("calvin_env.robot.robot")
        omegaconf = importlib.import_module("omegaconf")
    except ImportError as error:
        raise ImportError(
            f"CALVIN environments need the simulator: {INSTALL_HINT}; import failed with: {error}"
        ) from error
    play_table_env.get_git_commit_hash = lambda path: "(not looked up by vlarl)"
    robot.Robot.load = loading_in_own_client(robot, robot.Robot.load)
    return SimpleNamespace(PlayTableSimEnv=play_table_env.PlayTableSimEnv, Tasks=tasks.Tasks,
                           OmegaConf=omegaconf.OmegaConf)


class ClientBound:
    """pybullet with one physics client as the default of every call that names none."""

    def __init__(self, client: int) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        import pybullet

        attribute = getattr(pybullet, name)
        if inspect.isbuiltin(attribute):
            return functools.partial(attribute, physicsClientId=self.client)
        return attribute


def loading_in_own_client(module: Any, load: Any) -> Any:
    """``Robot.load`` with the robot module's pybullet bound to the robot's client while it runs."""

    def load_in_own_client(robot: Any) -> None:
        pybullet = module.p
        module.p = ClientBound(robot.cid)
        try:
            load(robot)
        finally:
            module.p = pybullet

    return load_in_own_client


def simulator_config(scene: str, height: int, width: int) -> Any:
    """calvin_env's configs for ``scene``: the Panda with the longer fingers CALVIN's data were recorded with,
    the scene, and the static and gripper cameras rendering ``height`` x ``width``."""
    OmegaConf = load_calvin().OmegaConf
    conf = calvin_env_root() / "conf"
    robot = OmegaConf.merge(OmegaConf.load(conf / "robot" / "panda.yaml"),
                            OmegaConf.load(conf / "robot" / "panda_longer_finger.yaml"))
    robot.pop("defaults")
    cameras = {name: OmegaConf.load(conf / "cameras" / "cameras" / f"{name}.yaml") for name in ("static", "gripper")}
    for camera in cameras.values():
        camera.height, camera.width, camera.aspect = height, width, width / height
    config = OmegaConf.create({"data_path": str(calvin_env_root() / "data"), "robot": robot,
                               "scene": OmegaConf.load(scene_config(scene)), "cameras": cameras})
    OmegaConf.resolve(config)
    return config


def build_simulator(scene: str, height: int, width: int, renderer: str) -> Any:
    """calvin's ``PlayTableSimEnv`` of scene A, B, C or D (about 0.5 s).

    pybullet's EGL renderer draws a client's very first frame differently from all later ones (a quarter
    of the pixels off by up to 56 levels); a frame rendered and dropped here keeps it out of episodes.
    """
    calvin = load_calvin()
    config = simulator_config(scene, height, width)
    with c_stdout_silenced():
        simulator = calvin.PlayTableSimEnv(
            robot_cfg=config.robot, seed=0, use_vr=False, bullet_time_step=BULLET_HZ, cameras=config.cameras,
            show_gui=False, scene_cfg=config.scene, use_scene_info=True, use_egl=renderer == "egl",
            control_freq=CONTROL_HZ,
        )
    render_cameras(simulator)
    return simulator


@contextlib.contextmanager
def c_stdout_silenced():
    """File descriptor 1 points at /dev/null while the block runs (C code's prints as well as Python's)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def close_simulator(simulator: Any) -> None:
    """Disconnect from pybullet. calvin's ``close`` prints, and its ``__del__`` closes (and prints) again:
    the instance's ``close`` becomes a no-op once it has run."""
    with contextlib.redirect_stdout(io.StringIO()):
        simulator.close()
    simulator.close = lambda: None


@functools.cache
def task_oracle() -> Any:
    """calvin's task checker over the benchmark's 34 task definitions; it holds no state."""
    calvin = load_calvin()
    return calvin.Tasks(calvin.OmegaConf.load(task_oracle_config()).tasks)


def task_done(task: str, start_info: dict, current_info: dict) -> bool:
    """Whether the oracle sees ``task`` done between the two infos (``get_info()`` of the simulator)."""
    return bool(task_oracle().get_task_info_for_set(start_info, current_info, {task}))


def by_name(objects: Any) -> dict[str, Any]:
    return {item.name: item for item in objects}


def step_physics(simulator: Any, action: np.ndarray) -> None:
    """One control step as calvin's ``step`` takes it (the robot's command, 8 physics steps, the buttons'
    and switches' logic), without rendering."""
    simulator.robot.apply_action(action)
    for _ in range(simulator.action_repeat):
        simulator.p.stepSimulation(physicsClientId=simulator.cid)
    simulator.scene.step()


def settle(simulator: Any, gripper: float) -> None:
    hold = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, gripper])
    for _ in range(SETTLE_STEPS):
        step_physics(simulator, hold)


def joint_limits(item: Any) -> tuple[float, float]:
    return item.p.getJointInfo(item.uid, item.joint_index, physicsClientId=item.cid)[8:10]


def aabb(simulator: Any, uid: int, link: int = -1) -> tuple[np.ndarray, np.ndarray]:
    low, high = simulator.p.getAABB(uid, link, physicsClientId=simulator.cid)
    return np.asarray(low), np.asarray(high)


def place_state(simulator: Any, state: SymbolicState, rng: np.random.Generator) -> None:
    """Put the scene in a physical state matching the symbolic ``state``, the robot in its start pose.

    Doors and the switch go to a joint limit (slider ``left`` and drawer ``open`` at the upper one, the
    switch up for a lit bulb), lights to their state, the button up. Blocks draw their poses from ``rng``:
    uniform over their surface of the scene's config (table, either side of the sliding cabinet) at least
    ``MIN_BLOCK_DISTANCE`` apart, yaw within ``BLOCK_YAW_BAND`` of a quarter turn; a block in the drawer
    drops in near its centre, a held block sits between the fingers, which then close on it, and a stacked
    block drops onto the one below. ``SETTLE_STEPS`` still steps follow.
    """
    reload_world(simulator)
    scene = simulator.scene
    doors, lights = by_name(scene.doors), by_name(scene.lights)
    for door, key, open_value in ((doors["base__slide"], "slider", "left"), (doors["base__drawer"], "drawer", "open")):
        low, high = joint_limits(door)
        door.reset(high if state[key] == open_value else low)
    for light in ("lightbulb", "led"):
        lights[light].reset(int(state[light]))
    for button in scene.buttons:
        button.reset(joint_limits(button)[0])
    for switch in scene.switches:
        low, high = joint_limits(switch)
        switch.reset(high if state["lightbulb"] else low)
    simulator.robot.gripper_action = CLOSED_GRIPPER if state["grasped"] else OPEN_GRIPPER
    place_blocks(simulator, state, rng)
    settle(simulator, simulator.robot.gripper_action)


def reload_world(simulator: Any) -> None:
    """Empty pybullet's world and load the robot and the scene again (about 75 ms), as calvin builds them.

    Bullet carries state that placing bodies does not reset: each contact keeps the impulse it last
    carried to warm-start the solver, and contacts are solved in an order that depends on which ones came
    and went before. A placement in a used world settles differently after different episodes; in a
    fresh one, an episode's start depends on its seed alone. The scene's sampler of initial block poses,
    which loading draws from, restarts from a fixed seed so that loading is the same every time."""
    simulator.scene.np_random = np.random.default_rng(0)
    simulator.load()


def place_blocks(simulator: Any, state: SymbolicState, rng: np.random.Generator) -> None:
    """The blocks' poses for ``state`` (see ``place_state``), in a freshly loaded world."""
    blocks = by_name(simulator.scene.movable_objects)
    surfaces = simulator.scene.surfaces
    placed: dict[str, list[np.ndarray]] = {}

    def on_surface(surface: str) -> np.ndarray:
        low, high = np.asarray(surfaces[surface], dtype=float)
        for _ in range(1000):
            position = rng.uniform(low, high)
            if all(np.linalg.norm(position[:2] - other[:2]) >= MIN_BLOCK_DISTANCE for other in placed.get(surface, [])):
                placed.setdefault(surface, []).append(position)
                return position
        raise RuntimeError(f"no room for another block on {surface!r}")

    def yaw() -> float:
        return float(np.pi / 2 + rng.uniform(-BLOCK_YAW_BAND, BLOCK_YAW_BAND))

    places = {color: state[block(color)] for color in BLOCK_COLORS}
    for color, place in places.items():
        item = blocks[f"block_{color}"]
        if place in ("table", "slider_left", "slider_right", "stacked_bottom"):
            item.reset(np.array([*on_surface("table" if place == "stacked_bottom" else place), 0.0, 0.0, yaw()]))
        elif place == "drawer":
            table = by_name(simulator.scene.fixed_objects)["table"]
            low, high = aabb(simulator, table.uid, table.get_info()["links"]["drawer_link"])
            centre = (low[:2] + high[:2]) / 2 + rng.uniform(-DRAWER_JITTER, DRAWER_JITTER)
            item.reset(np.array([*centre, high[2] + 0.01, 0.0, 0.0, yaw()]))
        elif place == "grasped":
            tcp = simulator.robot.get_observation()[0]
            item.reset(np.array([*tcp[:3], 0.0, 0.0, tcp[5]]))
    for top, place in places.items():
        if place == "stacked_top":
            bottom = blocks[f"block_{next(color for color in places if places[color] == 'stacked_bottom')}"]
            stack_on(simulator, blocks[f"block_{top}"], bottom)


def stack_on(simulator: Any, top: Any, bottom: Any) -> None:
    """Put ``top`` flat on ``bottom``, 5 mm above it, with its yaw; its height is measured flat, a metre up."""
    base = bottom.get_state()
    top.reset(np.array([base[0], base[1], base[2] + 1.0, 0.0, 0.0, base[5]]))
    _, bottom_high = aabb(simulator, bottom.uid)
    top_low, top_high = aabb(simulator, top.uid)
    top.reset(np.array([base[0], base[1], bottom_high[2] + (top_high[2] - top_low[2]) / 2 + 0.005,
                        0.0, 0.0, base[5]]))


def scene_state(simulator: Any) -> np.ndarray:
    """calvin's ``scene_obs`` (24,) in scene D's layout whatever the scene: sliding door, drawer, button,
    switch, lightbulb, LED, then position and Euler angles of the red, blue and pink blocks (the scene
    configs of A, B and C list their blocks in other orders)."""
    scene = simulator.scene
    doors, buttons, switches = by_name(scene.doors), by_name(scene.buttons), by_name(scene.switches)
    lights, blocks = by_name(scene.lights), by_name(scene.movable_objects)
    joints = [doors["base__slide"].get_state(), doors["base__drawer"].get_state(),
              buttons["base__button"].get_state(), switches["base__switch"].get_state(),
              lights["lightbulb"].get_state(), lights["led"].get_state()]
    poses = [blocks[f"block_{color}"].get_state() for color in BLOCK_COLORS]
    return np.concatenate([joints, *poses]).astype(np.float32)


FIXTURE_POINTS = (
    ("drawer_link", (0.0, 0.0495, 0.312)),
    ("slide_link", (0.175, 0.0, 0.085)),
    ("button_link", (0.0, 0.03, 0.0)),
    ("switch_link", (0.0, 0.0635, -0.01)),
)
"""What an expert reaches for on the table's moving parts, each a point in its link's URDF frame, unscaled: the
middle of the drawer handle's bar, of the sliding door handle's bar, of the button's top and of the switch
handle's bar. Read off calvin_env's collision meshes, which are the same in scenes A-D; only where the
links are mounted differs between scenes."""


def fixture_points(simulator: Any) -> np.ndarray:
    """The world positions (12,) of ``FIXTURE_POINTS``, in their order: they move with the drawer, the door,
    the button and the switch."""
    table = by_name(simulator.scene.fixed_objects)["table"]
    links = table.get_info()["links"]
    points = []
    for link, point in FIXTURE_POINTS:
        frame_position, frame_orientation = simulator.p.getLinkState(
            table.uid, links[link], physicsClientId=simulator.cid)[4:6]
        scaled = np.asarray(point) * table.global_scaling
        points.append(simulator.p.multiplyTransforms(frame_position, frame_orientation, scaled, (0, 0, 0, 1))[0])
    return np.concatenate(points).astype(np.float32)


def robot_state(simulator: Any) -> np.ndarray:
    """calvin's ``robot_obs`` (15,): TCP position and Euler angles, gripper opening, 7 arm joints, gripper
    command."""
    return simulator.robot.get_observation()[0].astype(np.float32)


def render_cameras(simulator: Any, wrist: bool = True) -> dict[str, np.ndarray]:
    """The static camera as ``main_images`` and, with ``wrist``, the gripper camera as ``wrist_images``, uint8
    (H, W, 3), upright as pybullet renders them."""
    cameras = by_name(simulator.cameras)
    keys = (("main_images", "static"), ("wrist_images", "gripper")) if wrist else (("main_images", "static"),)
    return {key: np.ascontiguousarray(cameras[name].render()[0], dtype=np.uint8) for key, name in keys}
