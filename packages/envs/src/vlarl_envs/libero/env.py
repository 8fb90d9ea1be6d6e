"""LIBERO (Franka Panda, robosuite on MuJoCo) behind the vlarl contract.

Task Description:
    One suite of LIBERO (Spatial, Object, Goal, 10 = Long, 90), a task of it per reset, drawn or
    fixed by ``options["task"]``. The instruction is LIBERO's own language for the task, or the
    perturbation suite's in an OOD split.

Randomizations:
    ``test`` is LIBERO's evaluation protocol: episode k plays task k // 50 (of the env's tasks,
    wrapping around) from its fixed initial state k % 50, or, with ``options["task"]``, that
    task from state k % 50; a 10-task suite has 500 test episodes. ``train`` draws a task and
    one of its 50 states with a generator seeded by the episode id, then shifts every movable
    object by up to ``train_shift`` metres in x and y, so training never starts from a test state.
    Fixtures (cabinets, stoves), which LIBERO places anew at every reset outside its initial
    states, are placed by its sampler seeded from the episode too. After either, ``settle_steps``
    steps of no motion with the gripper open let objects come to rest (openpi waits 10) before
    the first observation.

    The OOD splits ``language``, ``position``, ``object`` and ``task`` play LIBERO-Pro's
    perturbation suites (``_lan``, ``_swap``, ``_object``, ``_task``) where they are installed:
    episode k is task k // 50 from that suite's own initial state k % 50, as in ``test``. A
    perturbed task keeps its base task's name, so ``options["task"]`` names the base task in every
    split; in ``task`` that is the base task's scene with LIBERO-Pro's changed goal, whose
    instruction and success predicate replace the base task's.

Success Conditions:
    LIBERO's own predicate over the task's bddl goal (``check_success``, what its ``done`` reports).
    The episode terminates on success unless ``terminate_on_success=False`` and truncates after
    ``horizon`` steps (the suite's, as openpi caps them).

Reward:
    The env's own reward is the goal's progress in [0, 1] (``vlarl_envs.libero.progress``: the hand
    near the object, the object near its target, for pick-and-place goals; 0 for others); the contract's
    ``reward_mode`` turns it into what the learner is paid (``sparse`` by default: LIBERO's success).

Observations: ``main_images`` from ``agentview`` and ``wrist_images`` from the eye-in-hand
camera, both rotated 180 degrees as LIBERO's datasets are; ``states`` = end-effector position,
its axis-angle and the two finger joints (8,); ``task_description``; ``privileged_state`` (89,),
in both obs modes: the hand's pose and fingers and the poses, boxes and joints of the objects and
regions the task's goal names (layout in ``vlarl_envs.libero.privileged``), what the scripted
experts of ``vlarl_envs.libero.experts`` read. Actions: 7-D, the end-effector position and
rotation deltas of robosuite's OSC_POSE controller and the gripper, all in [-1, 1]; gripper -1
opens, +1 closes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vlarl_envs.contract import validate_choice
from vlarl_envs.contract_env import ContractEnv
from vlarl_envs.libero.privileged import PRIVILEGED_STATE_DIM, PrivilegedStateReader
from vlarl_envs.libero.progress import goal_progress, placing_pairs
from vlarl_envs.libero.simulator import (
    MAIN_CAMERA,
    SETTLE_ACTION,
    WRIST_CAMERA,
    build_simulator,
    close_simulator,
    proprioception,
    render_camera,
    reset_seeded,
    shift_objects,
)
from vlarl_envs.libero.suites import BASE_SPLITS, INIT_STATES_PER_TASK, PERTURBATIONS, LiberoTask

SPLIT_STREAMS = {split: stream for stream, split in enumerate(BASE_SPLITS + tuple(PERTURBATIONS))}
"""Seed stream of each split's generator; all but ``train`` draw nothing but the task of a bare reset."""

STATE_LOW = np.array([-2.0, -2.0, -1.0, -2 * np.pi, -2 * np.pi, -2 * np.pi, -0.1, -0.1])
STATE_HIGH = np.array([2.0, 2.0, 3.0, 2 * np.pi, 2 * np.pi, 2 * np.pi, 0.1, 0.1])
"""Bounds of ``states``: a workspace of metres around the robot, axis-angles up to a full turn,
Panda fingers (0.04 m travel each) with room for contact overshoot."""


class LiberoEnv(ContractEnv):
    """One LIBERO suite (or a subset of its tasks) with LIBERO's instructions, cameras and episodes."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        tasks: Sequence[LiberoTask],
        horizon: int,
        perturbed_tasks: Mapping[str, Sequence[LiberoTask]] | None = None,
        env_id: str = "vlarl/LIBERO",
        image_size: int | tuple[int, int] = 224,
        fast_render: bool = True,
        settle_steps: int = 10,
        train_shift: float = 0.01,
        **settings: Any,
    ) -> None:
        """
        Args:
            tasks: the LIBERO tasks this env plays, in their suite's order.
            horizon: policy steps before truncation (settle steps not counted).
            perturbed_tasks: for each installed OOD split (a key of ``PERTURBATIONS``), its
                LIBERO-Pro tasks, with the names of ``tasks``.
            env_id: the registered id, used in error messages.
            image_size: resolution of both cameras, int or (H, W); default 224x224.
            fast_render: no shadows, reflections or multisampling (3-4x faster frames on a CPU).
            settle_steps: zero-motion steps after every reset, before the first observation.
            train_shift: half-width in metres of the uniform x and y shift of every movable
                object in ``train`` episodes.
            **settings: ``ContractEnv``'s obs_mode, terminate_on_success, split, render_mode and wrist_camera.
        """
        self.tasks = {task.name: task for task in tasks}
        self.split_tasks = {"train": self.tasks, "test": self.tasks}
        for ood_split, ood_tasks in (perturbed_tasks or {}).items():
            validate_choice(env_id, "perturbation split", ood_split, PERTURBATIONS)
            if [task.name for task in ood_tasks] != list(self.tasks):
                raise ValueError(f"{env_id}: the {ood_split!r} split's tasks must be {list(self.tasks)}, "
                                 f"got {[task.name for task in ood_tasks]}")
            self.split_tasks[ood_split] = {task.name: task for task in ood_tasks}
        self.splits = tuple(self.split_tasks)
        """``train``, ``test`` and the OOD splits this env was given tasks for."""
        if settle_steps < 0 or train_shift < 0:
            raise ValueError(f"{env_id}: need settle_steps >= 0 and train_shift >= 0, got {settle_steps} and "
                             f"{train_shift}")
        super().__init__(env_id, image_size=image_size, horizon=horizon, **settings)
        self.fast_render = fast_render
        self.settle_steps = int(settle_steps)
        self.train_shift = float(train_shift)
        self._declare_spaces(7, STATE_LOW, STATE_HIGH, PRIVILEGED_STATE_DIM, hand_camera=True)
        self._simulator: Any = None
        self._simulator_bddl: Path | None = None
        self._read_privileged_state: PrivilegedStateReader | None = None
        self._placing_pairs: tuple[tuple[int, int], ...] = ()
        self._task: str | None = None
        self._episode_task: LiberoTask | None = None
        self._robot_obs: dict[str, np.ndarray] = {}
        self._privileged_state: np.ndarray | None = None

    @property
    def task(self) -> str | None:
        """The task of the current episode (None before the first reset)."""
        return self._task

    def check_split(self, split: str) -> str:
        """``split``, or a ValueError naming the available splits (and, for an OOD split the installed
        assets lack, the LIBERO-Pro suite it needs)."""
        if split in PERTURBATIONS and split not in self.split_tasks:
            raise ValueError(f"{self.env_id}: split {split!r} needs LIBERO-Pro's "
                             f"_{PERTURBATIONS[split].suffix} suite, which the installed assets lack "
                             f"for this suite; available splits: {list(self.splits)}")
        return super().check_split(split)

    @property
    def simulator(self) -> Any:
        """LIBERO's ``OffScreenRenderEnv`` of the current task, for inspection (``sim``, ``env``)."""
        if self._task is None:
            raise RuntimeError(f"{self.env_id}: call reset() first")
        return self._simulator

    def _simulator_of(self, task: LiberoTask) -> Any:
        """The task's simulator, kept while episodes play the same bddl file (an OOD split's task has
        its own); the previous one is closed first, so one model is held at a time."""
        if self._simulator_bddl != task.bddl_file:
            if self._simulator is not None:
                close_simulator(self._simulator)
                self._simulator = None
            self._simulator = build_simulator(task, self.fast_render)
            self._simulator_bddl = task.bddl_file
            self._read_privileged_state = PrivilegedStateReader(self._simulator)
            self._placing_pairs = placing_pairs(self._simulator.env.parsed_problem["goal_state"],
                                                self._read_privileged_state.names)
        return self._simulator

    def episode_start(self, split: str, episode_id: int, task: str | None) -> tuple[str, int, np.random.Generator]:
        """The task, the index of its initial state and the generator of the rest of an episode."""
        names = list(self.tasks)
        rng = np.random.default_rng([SPLIT_STREAMS[split], episode_id])
        if split != "train":
            if task is None:
                task = names[(episode_id // INIT_STATES_PER_TASK) % len(names)]
            return task, episode_id % INIT_STATES_PER_TASK, rng
        if task is None:
            task = names[int(rng.integers(len(names)))]
        return task, int(rng.integers(INIT_STATES_PER_TASK)), rng

    def _reset_to_episode(self, split: str, episode_id: int, task: str | None) -> dict[str, Any]:
        task, state_index, rng = self.episode_start(split, episode_id, task)
        episode_task = self.split_tasks[split][task]
        simulator = self._simulator_of(episode_task)
        reset_seeded(simulator, int(rng.integers(2**32)))
        robot_obs = simulator.set_init_state(episode_task.init_states[state_index])
        if split == "train" and self.train_shift > 0:
            shift_objects(simulator.sim, rng, self.train_shift)
        for _ in range(self.settle_steps):
            robot_obs, *_ = simulator.step(SETTLE_ACTION)
        self._task = task
        self._episode_task = episode_task
        self._read_state(robot_obs)
        return {"task": task, "init_state": state_index, "success": bool(simulator.check_success())}

    def _step_simulator(self, action: np.ndarray) -> tuple[float, dict[str, Any]]:
        robot_obs, _, done, _ = self._simulator.step(action.astype(np.float64))
        self._read_state(robot_obs)
        return goal_progress(self._privileged_state, self._placing_pairs), {"success": bool(done), "task": self._task}

    def _read_state(self, robot_obs: dict[str, np.ndarray]) -> None:
        """Keep the state a reset or step left: robosuite reports the robot's, the reader adds the goal's
        objects; both the observation and the step's goal progress read it."""
        self._robot_obs = robot_obs
        self._privileged_state = self._read_privileged_state(robot_obs)

    def _observe(self) -> dict[str, Any]:
        return {"states": proprioception(self._robot_obs), "task_description": self._episode_task.language,
                "privileged_state": self._privileged_state}

    def _render_images(self) -> dict[str, np.ndarray]:
        height, width = self.image_size
        sim = self._simulator.sim
        images = {"main_images": render_camera(sim, MAIN_CAMERA, height, width)}
        if self.renders_wrist:
            images["wrist_images"] = render_camera(sim, WRIST_CAMERA, height, width)
        return images

    def _render_main_image(self) -> np.ndarray:
        return render_camera(self._simulator.sim, MAIN_CAMERA, *self.image_size)

    def close(self):
        if self._simulator is not None:
            close_simulator(self._simulator)
            self._simulator = None
            self._simulator_bddl = None
            self._read_privileged_state = None
        super().close()
