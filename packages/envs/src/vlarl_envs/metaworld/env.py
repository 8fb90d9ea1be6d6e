"""MetaWorld v3 (Sawyer, MuJoCo) behind the vlarl contract.

Task Description:
    One of the 50 MetaWorld v3 tasks (``reach-v3``, ``pick-place-v3``, ...), or a set of them
    (MT10, MT50, ML45 train/test) with the task drawn per reset or fixed by
    ``options["task"]``. The instruction comes from ``METAWORLD_INSTRUCTIONS``.

Randomizations:
    Object and goal positions are drawn uniformly from the task's own reset space with a
    generator seeded by ``(split stream, episode_id)``, so the same episode id replays the
    same initial state, and the ``test``/``semantic`` splits never share initial states
    with ``train``.

Success Conditions:
    MetaWorld's own ``info["success"]``. The episode terminates on success unless
    ``terminate_on_success=False`` and truncates after ``horizon`` steps.

Observations: ``main_images`` from the ``corner2`` camera moved closer to the table, as RLinf
and most pixel-based MetaWorld work do (rolled 180 degrees by MetaWorld, rotated back here),
``states`` = hand xyz + gripper opening (4,), ``privileged_state`` = MetaWorld's full 39-D
vector with the goal visible (what scripted experts and state-based learners need), and
``task_description``. Actions are MetaWorld's own normalized 4-D (xyz delta, gripper effort).
"""

from __future__ import annotations

import atexit
import os
import pickle
import sys
import weakref
from collections.abc import Sequence
from typing import Any

if sys.platform.startswith("linux"):
    # Off-screen rendering without a display; must be set before mujoco is imported.
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

import numpy as np

from vlarl_envs.contract import validate_choice
from vlarl_envs.contract_env import ContractEnv
from vlarl_envs.metaworld.instructions import METAWORLD_INSTRUCTIONS
from vlarl_envs.metaworld.tasks import load_metaworld

SPLIT_STREAMS = {"train": 0, "test": 1, "semantic": 1}
"""Initial-state stream per split: ``semantic`` replays ``test``'s states with paraphrased
instructions, so the two differ only in language."""

PARAPHRASED_SPLITS = frozenset({"semantic"})
HAND_LOW = np.array([-0.525, 0.348, -0.0525, -1.0])
HAND_HIGH = np.array([0.525, 1.025, 0.7, 1.0])
PRIVILEGED_STATE_DIM = 39
MAIN_CAMERA = "corner2"
MAIN_CAMERA_POSITION = (0.75, 0.075, 0.7)
"""Where ``corner2`` sits. MetaWorld's own position frames the whole room, so at 64-96 px the
table takes a third of the image and goals and small objects are a pixel or two; from here
the table fills the frame (the placement of arXiv 2212.05698 and many pixel-based works)."""


OPEN_ENVS: weakref.WeakSet = weakref.WeakSet()
"""MetaWorld envs not yet closed."""


def close_open_envs() -> None:
    """Close the envs a program left open while their EGL display still works: left to garbage collection
    at exit, MuJoCo's renderers would be freed after MuJoCo's own exit hook terminated the display, and
    print an EGLError each."""
    for env in list(OPEN_ENVS):
        env.close()


def close_open_envs_before_the_display_ends() -> None:
    """Register ``close_open_envs`` to run at exit before MuJoCo's hook that terminates the EGL display (exit
    hooks run last registered first, and MuJoCo registers its hook when the first GL context is made)."""
    atexit.unregister(close_open_envs)
    atexit.register(close_open_envs)


class MetaWorldEnv(ContractEnv):
    """One or several MetaWorld v3 tasks with instructions, images and replayable episodes."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 80}
    instructions = METAWORLD_INSTRUCTIONS
    """Every instruction the env can give (tokenizers of new policies are trained on them)."""
    splits = tuple(SPLIT_STREAMS)

    def __init__(
        self,
        tasks: Sequence[str],
        env_id: str = "vlarl/MetaWorld",
        image_size: int | tuple[int, int] = 224,
        horizon: int = 200,
        fast_render: bool = True,
        **settings: Any,
    ) -> None:
        """
        Args:
            tasks: MetaWorld task names this env draws from (one for a single task).
            env_id: the registered id, used in error messages.
            image_size: camera resolution, int or (H, W); default 224x224.
            horizon: steps before truncation.
            fast_render: no shadows, reflections or multisampling, 5-10x faster on CPU at small sizes; the
                reflection pass draws nothing any MetaWorld camera view shows (the same pixels on all 50
                tasks) but takes a third of a 64-px frame.
            **settings: ``ContractEnv``'s obs_mode, terminate_on_success, split and render_mode.
        """
        self._metaworld = load_metaworld()
        for task in tasks:
            validate_choice(env_id, "MetaWorld task", task, self._metaworld.ALL_V3_ENVIRONMENTS)
        self.tasks = tuple(tasks)
        super().__init__(env_id, image_size=image_size, horizon=horizon, **settings)
        self.fast_render = fast_render
        self._declare_spaces(4, HAND_LOW, HAND_HIGH, PRIVILEGED_STATE_DIM)
        self._simulators: dict[str, Any] = {}
        OPEN_ENVS.add(self)
        self._task: str | None = None
        self._instruction = ""
        self._sim_obs: np.ndarray | None = None

    @property
    def task(self) -> str | None:
        """The task of the current episode (None before the first reset)."""
        return self._task

    @property
    def simulator(self) -> Any:
        """The MetaWorld env of the current task, for inspection (camera, model, data)."""
        if self._task is None:
            raise RuntimeError(f"{self.env_id}: call reset() first")
        return self._simulators[self._task]

    def _simulator(self, task: str) -> Any:
        """The MetaWorld env of ``task``, built on first use (1-2 s each)."""
        if task not in self._simulators:
            env_cls = self._metaworld.ALL_V3_ENVIRONMENTS[task]
            height, width = self.image_size if self.obs_mode == "rgb" else (64, 64)
            simulator = env_cls(
                render_mode="rgb_array" if self._renders() else None,
                camera_name=MAIN_CAMERA,
                width=width,
                height=height,
            )
            simulator.model.cam_pos[simulator.model.camera(MAIN_CAMERA).id] = MAIN_CAMERA_POSITION
            if self.fast_render:
                simulator.model.vis.quality.shadowsize = 0
                simulator.model.vis.quality.offsamples = 0
            simulator.max_path_length = self.horizon + 1  # the truncation is ours
            # set_task marks the task set and makes the goal observable; its position
            # vector is then replaced by the seeded draw of every reset.
            reset_dim = simulator._random_reset_space.low.size
            task_data = {"env_cls": env_cls, "rand_vec": np.zeros(reset_dim), "partially_observable": False}
            simulator.set_task(self._metaworld.Task(env_name=task, data=pickle.dumps(task_data)))
            simulator._freeze_rand_vec = False
            simulator.seeded_rand_vec = True
            self._simulators[task] = simulator
        return self._simulators[task]

    def _reset_to_episode(self, split: str, episode_id: int, task: str | None) -> dict[str, Any]:
        rng = np.random.default_rng([SPLIT_STREAMS[split], episode_id])
        if task is None:
            task = self.tasks[int(rng.integers(len(self.tasks)))]
        simulator = self._simulator(task)
        # MetaWorld draws object and goal positions from its own generator, rejecting
        # invalid layouts; seeding that generator per episode makes the layout replayable.
        simulator.np_random = np.random.default_rng(rng.integers(2**63))
        self._sim_obs, _ = simulator.reset()
        # MetaWorld's resets move goal sites and some bodies (drawers, windows) in the model
        # without recomputing the scene's poses, so the first frame would show a stale layout
        # until the first step; a forward pass poses the scene that sim_obs describes.
        self._metaworld.mj_forward(simulator.model, simulator.data)
        self._task = task
        self._instruction = METAWORLD_INSTRUCTIONS.choose(task, split in PARAPHRASED_SPLITS, rng)
        return {"task": task}

    def _step_simulator(self, action: np.ndarray) -> tuple[float, dict[str, Any]]:
        self._sim_obs, reward, _, _, sim_info = self._simulators[self._task].step(action)
        return float(reward), {"success": bool(sim_info["success"]), "task": self._task}

    def _observe(self) -> dict[str, Any]:
        privileged = np.asarray(self._sim_obs, dtype=np.float32)
        return {"states": privileged[:4].copy(), "task_description": self._instruction, "privileged_state": privileged}

    def _render_images(self) -> dict[str, np.ndarray]:
        return {"main_images": self._render_main_camera()}

    def _render_main_camera(self) -> np.ndarray:
        simulator = self._simulators[self._task]
        viewer = simulator.mujoco_renderer.viewer
        if viewer is not None:
            # Every simulator renders through its own GL context, holding its own model's meshes
            # and textures; gymnasium makes a context current only when it is created. Without
            # this, a multi-task env (or several envs in one process) draws one task's scene
            # with another task's meshes once a second simulator exists.
            viewer.make_context_current()
        frame = simulator.render()
        if viewer is None:  # this render made the simulator's GL context
            close_open_envs_before_the_display_ends()
            if self.fast_render:
                import mujoco

                simulator.mujoco_renderer.viewer.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
                frame = simulator.render()
        # corner2 is mounted rolled by 180 degrees: rotate (not mirror) to keep handedness.
        return np.ascontiguousarray(frame[::-1, ::-1])

    def close(self):
        for simulator in self._simulators.values():
            simulator.close()
        self._simulators.clear()
        OPEN_ENVS.discard(self)
        super().close()
