"""CALVIN (Franka Panda on a play table, calvin_env on pybullet) behind the vlarl contract.

Task Description:
    One of CALVIN's 34 language-conditioned tasks per episode (``options["task"]``, or drawn from the
    episode id), in one of the id's scenes: A, B or C (the training tables) or D (the evaluation table).
    The instruction is CALVIN's validation sentence for the task; the ``semantic`` split draws one of the
    task's other annotation sentences (those of CALVIN's training data) instead.

Randomizations:
    An episode's generator is seeded by its split's stream and its id. It picks the scene (A, B or C for
    the ABC id), the task where none is given (the ``test`` and ``semantic`` splits play task
    ``episode_id % 34`` instead), a symbolic start state in which the task is possible
    (``vlarl_envs.calvin.tasks.start_states``) and the block poses that realize it
    (``vlarl_envs.calvin.simulator.place_state``). ``train`` and ``test`` draw from different streams, so
    their start states differ; ``semantic`` replays ``test``'s.

Success Conditions:
    calvin's task oracle (``calvin_env.envs.tasks.Tasks`` over the benchmark's task file), comparing the
    simulator's info when the task began with the current one, as calvin's evaluation does. The episode
    terminates on success unless ``terminate_on_success=False`` and truncates after ``horizon`` steps
    (360, calvin's steps per task).

Observations: ``main_images`` from the static camera and ``wrist_images`` from the gripper camera, both
``image_size``; ``states`` = calvin's ``robot_obs`` (15,): TCP position (3) and Euler angles (3), gripper
opening, the 7 arm joints, the last gripper command; ``privileged_state`` (51,) = ``robot_obs``,
``scene_obs`` (24,): sliding door, drawer, button, switch, lightbulb, LED, then position and Euler angles
of the red, blue and pink blocks, in this order in every scene, then the world positions (12,) of the
middle of the drawer handle's bar, of the sliding door handle's bar, of the button's top and of the switch
handle's bar (``vlarl_envs.calvin.simulator.FIXTURE_POINTS``: they differ between scenes and move with
their joints); ``vlarl_envs.calvin.privileged`` names its parts. Actions: 7-D relative, calvin's
``rel_actions``: TCP position (x 2 cm) and Euler angles (x 0.05 rad) per step, then the gripper, open
where positive and closed otherwise (calvin's 1 and -1).

Chains: ``reset(options={"chain": k})`` plays CALVIN's evaluation chain ``k`` (``vlarl_envs.calvin.chains``)
as one episode. The scene starts in the chain's symbolic state with block poses drawn from the test
split's stream of ``k``; each task gets ``steps_per_task`` steps (option, 360 as calvin) and its canonical
instruction, and succeeds relative to the state it began in. A success earns 1 and moves on to the next
task in the scene as it is: the step's observation carries the next instruction and its info
``replan=True`` (an ``ActionChunk`` drops the rest of its chunk there, as calvin resets its models'
action queues). The episode terminates when the fifth task succeeds and truncates when a task runs out of
steps, so its return is the chain's length (``info["chain_length"]``). Chains play every one of CALVIN's
34 tasks, whatever ``tasks`` the env draws its single-task episodes from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from vlarl_envs.calvin.assets import calvin_instructions
from vlarl_envs.calvin.chains import STEPS_PER_TASK, evaluation_chain
from vlarl_envs.calvin.simulator import (
    RENDERERS,
    build_simulator,
    close_simulator,
    fixture_points,
    place_state,
    render_cameras,
    robot_state,
    scene_state,
    step_physics,
    task_done,
)
from vlarl_envs.calvin.tasks import SymbolicState, start_states
from vlarl_envs.contract import validate_choice
from vlarl_envs.contract_env import ContractEnv
from vlarl_envs.wrappers.action_chunk import REPLAN

SPLIT_STREAMS = {"train": 0, "test": 1, "semantic": 1}
"""Seed stream of each split's episodes: ``semantic`` replays ``test``'s with paraphrased instructions."""
SPLITS = tuple(SPLIT_STREAMS)
PARAPHRASED_SPLITS = frozenset({"semantic"})
CHAIN_OPTIONS = ("chain", "steps_per_task")
"""Reset options of a chain episode, besides the contract's: the chain's index and each task's steps."""

ANGLE = 2 * np.pi
STATE_LOW = np.array([-2.0] * 3 + [-ANGLE] * 3 + [-0.01] + [-ANGLE] * 7 + [-1.0])
STATE_HIGH = np.array([2.0] * 3 + [ANGLE] * 3 + [0.1] + [ANGLE] * 7 + [1.0])
"""Bounds of ``robot_obs``: metres around the robot, angles up to a turn either way, the two fingers'
0.08 m opening with room for contact overshoot, the gripper command +-1."""
SCENE_LOW = np.array([-1.0] * 4 + [0.0] * 2 + ([-2.0] * 3 + [-ANGLE] * 3) * 3)
SCENE_HIGH = np.array([1.0] * 4 + [1.0] * 2 + ([2.0] * 3 + [ANGLE] * 3) * 3)
"""Bounds of ``scene_obs``: joints (at most 0.28 m of travel), lights 0 or 1, block poses."""
FIXTURES_LOW, FIXTURES_HIGH = np.full(12, -2.0), np.full(12, 2.0)
"""Bounds of the fixture points: metres around the table."""


class CalvinEnv(ContractEnv):
    """CALVIN's play table in one or several scenes, a task per episode, CALVIN's instructions and oracle."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}
    splits = SPLITS
    extra_reset_options = CHAIN_OPTIONS

    def __init__(
        self,
        scenes: Sequence[str],
        tasks: Sequence[str],
        env_id: str = "vlarl/CALVIN",
        image_size: int | tuple[int, int] = 200,
        horizon: int = 360,
        renderer: str = "tiny",
        max_simulators: int | None = None,
        **settings: Any,
    ) -> None:
        """
        Args:
            scenes: the CALVIN scenes (``A``, ``B``, ``C``, ``D``) episodes draw from.
            tasks: the CALVIN tasks this env plays, in calvin's order.
            env_id: the registered id, used in error messages.
            image_size: resolution of both cameras, int or (H, W); calvin records 200 (static) and 84 (gripper).
            horizon: steps before truncation (calvin gives each task 360).
            renderer: "tiny" (pybullet's CPU renderer) or "egl" (what CALVIN's datasets were rendered with);
                see ``vlarl_envs.calvin.simulator.RENDERERS``.
            max_simulators: how many scenes' simulators the env keeps built (about 90 MB each); an episode
                in another scene closes the one used longest ago and builds its own (about 0.5 s). None
                keeps every scene's. An episode plays the same in a kept simulator as in a new one.
            **settings: ``ContractEnv``'s obs_mode, terminate_on_success, split, render_mode (the static
                camera's image) and wrist_camera (the gripper camera's).
        """
        if not scenes:
            raise ValueError(f"{env_id}: expected at least one scene, got {scenes!r}")
        validate_choice(env_id, "renderer", renderer, RENDERERS)
        if max_simulators is not None and max_simulators < 1:
            raise ValueError(f"{env_id}: max_simulators must be >= 1 or None (every scene's), got {max_simulators}")
        self.scenes = tuple(scenes)
        self.tasks = tuple(tasks)
        super().__init__(env_id, image_size=image_size, horizon=horizon, **settings)
        self.renderer = renderer
        self.max_simulators = max_simulators
        self.instructions = calvin_instructions()
        privileged_low = np.concatenate([STATE_LOW, SCENE_LOW, FIXTURES_LOW])
        privileged_high = np.concatenate([STATE_HIGH, SCENE_HIGH, FIXTURES_HIGH])
        privileged = spaces.Box(privileged_low.astype(np.float32), privileged_high.astype(np.float32), dtype=np.float32)
        self._declare_spaces(7, STATE_LOW, STATE_HIGH, privileged, hand_camera=True)
        self._simulators: dict[str, Any] = {}
        self._scene: str | None = None
        self._task: str | None = None
        self._instruction = ""
        self._start_info: dict = {}
        self._chain: tuple[str, ...] | None = None
        """The tasks of the chain being played (None in a single-task episode)."""
        self._completed = 0

    @property
    def task(self) -> str | None:
        """The task of the current episode (None before the first reset)."""
        return self._task

    @property
    def scene(self) -> str | None:
        return self._scene

    @property
    def built_scenes(self) -> tuple[str, ...]:
        """The scenes whose simulators the env holds, the one used longest ago first."""
        return tuple(self._simulators)

    @property
    def simulator(self) -> Any:
        """calvin's ``PlayTableSimEnv`` of the current scene, for inspection (``scene``, ``robot``, ``get_info``)."""
        if self._scene is None:
            raise RuntimeError(f"{self.env_id}: call reset() first")
        return self._simulators[self._scene]

    def _simulator_of(self, scene: str) -> Any:
        """The scene's simulator, built on first use and kept (an ABC env holds up to three), at most
        ``max_simulators`` of them: the one used longest ago closes to make room."""
        if scene in self._simulators:
            self._simulators[scene] = self._simulators.pop(scene)
            return self._simulators[scene]
        while self.max_simulators is not None and len(self._simulators) >= self.max_simulators:
            close_simulator(self._simulators.pop(next(iter(self._simulators))))
        self._simulators[scene] = build_simulator(scene, *self.image_size, self.renderer)
        return self._simulators[scene]

    def _reset_from_options(self, options: dict[str, Any]) -> dict[str, Any]:
        if "chain" in options:
            return self._reset_chain(options)
        if "steps_per_task" in options:
            raise ValueError(f"{self.env_id}: steps_per_task sets the steps of a chain's tasks; pass it with "
                             f"the chain option, or set horizon for single-task episodes")
        return super()._reset_from_options(options)

    def _reset_to_episode(self, split: str, episode_id: int, task: str | None) -> dict[str, Any]:
        rng = np.random.default_rng([SPLIT_STREAMS[split], episode_id])
        scene = self.scenes[int(rng.integers(len(self.scenes)))]
        drawn = self.tasks[int(rng.integers(len(self.tasks)))]
        if task is None:
            task = drawn if split == "train" else self.tasks[episode_id % len(self.tasks)]
        starts = start_states(task)
        state = starts[int(rng.integers(len(starts)))]
        instruction = self.instructions.choose(task, split in PARAPHRASED_SPLITS, rng)
        self._chain = None
        self._start(scene, state, task, instruction, rng)
        return {"task": task, "scene": scene, "success": self._success()}

    def _reset_chain(self, options: dict[str, Any]) -> dict[str, Any]:
        """Start evaluation chain ``options["chain"]``: its symbolic start state, block poses and scene drawn
        from the test split's stream of its index, its first task with the canonical instruction."""
        fixed = sorted(set(options) - set(CHAIN_OPTIONS))
        if fixed:
            raise ValueError(f"{self.env_id}: a chain fixes its own task, split and start; got {fixed} with "
                             f"the chain option, expected only {list(CHAIN_OPTIONS)}")
        index = options["chain"]
        chain = evaluation_chain(index)
        steps = options.get("steps_per_task", STEPS_PER_TASK)
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
            raise ValueError(f"{self.env_id}: steps_per_task must be a positive int, got {steps!r}")
        rng = np.random.default_rng([SPLIT_STREAMS["test"], int(index)])
        scene = self.scenes[int(rng.integers(len(self.scenes)))]
        self._chain, self._completed, self._budget = chain.tasks, 0, int(steps)
        task = chain.tasks[0]
        self._start(scene, chain.initial_condition, task, self.instructions.canonical(task), rng)
        return {"task": task, "episode_id": int(index), "split": "test", "scene": scene, "chain": int(index),
                "chain_tasks": list(chain.tasks), "chain_length": 0}

    def _start(self, scene: str, state: SymbolicState, task: str, instruction: str, rng: np.random.Generator) -> None:
        place_state(self._simulator_of(scene), state, rng)
        self._scene = scene
        self._begin_task(task, instruction)

    def _begin_task(self, task: str, instruction: str) -> None:
        """Make ``task`` the current one in the scene as it is: success is judged against the state now, and
        its steps count from 0."""
        self._task = task
        self._instruction = instruction
        self._start_info = self.simulator.get_info()
        self._elapsed = 0

    def _success(self) -> bool:
        return task_done(self._task, self._start_info, self.simulator.get_info())

    def _step_simulator(self, action: np.ndarray) -> tuple[float, dict[str, Any]]:
        command = np.empty(7)
        command[:6] = action[:6]
        command[6] = 1.0 if action[6] > 0 else -1.0
        step_physics(self.simulator, command)
        success = self._success()
        info = {"success": success, "task": self._task}
        if self._chain is not None:
            self._advance_chain(success, info)
        return float(success), info

    def _advance_chain(self, success: bool, info: dict[str, Any]) -> None:
        """A chain's step: a success counts and, short of the chain's end, moves on to its next task, whose
        instruction the step's observation then carries."""
        if success:
            self._completed += 1
        info["chain_length"] = self._completed
        if success and self._completed < len(self._chain):
            task = self._chain[self._completed]
            self._begin_task(task, self.instructions.canonical(task))
            info[REPLAN] = True

    def _terminated(self, info: dict[str, Any]) -> bool:
        """A chain ends with its last task's success, whatever ``terminate_on_success`` says."""
        if self._chain is not None:
            return self._completed == len(self._chain)
        return super()._terminated(info)

    def _observe(self) -> dict[str, Any]:
        robot = robot_state(self.simulator)
        privileged = np.concatenate([robot, scene_state(self.simulator), fixture_points(self.simulator)])
        return {"states": robot, "task_description": self._instruction, "privileged_state": privileged}

    def _render_images(self) -> dict[str, np.ndarray]:
        return render_cameras(self.simulator, wrist=self.renders_wrist)

    def close(self):
        for simulator in self._simulators.values():
            close_simulator(simulator)
        self._simulators.clear()
        self._scene = None
        self._task = None
        super().close()
