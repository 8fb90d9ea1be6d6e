"""Where CALVIN's files are: calvin_env's checkout (scenes, robot, cameras, task oracle) and calvin's language
annotations. Finding them imports nothing from calvin_env, so a family answers without the simulator.

calvin_env keeps its URDFs and meshes (``data/``) and its configs (``conf/``) beside its Python package, so
it works from a checkout installed in place (``pip install -e``), which ``make setup`` makes in
``third_party/calvin_env``. calvin's annotations belong to another repository (mees/calvin); ``make setup``
copies them beside the checkout, in ``third_party/calvin_annotations``, and ``VLARL_CALVIN_ANNOTATIONS``
names another folder holding them.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

from vlarl_envs.instructions import InstructionSet

INSTALL_HINT = ("pip install 'vlarl-envs[calvin]', then calvin_env from a checkout of github.com/mees/calvin_env "
                "(`make calvin` in a vlarl checkout: CALVIN_ENV_SRC, CALVIN_ANNOTATIONS_SRC)")

ANNOTATIONS_VARIABLE = "VLARL_CALVIN_ANNOTATIONS"
VALIDATION_ANNOTATIONS = "new_playtable_validation.yaml"
"""One sentence per task: what calvin's evaluation instructs, vlarl's canonical sentence."""
TRAINING_ANNOTATIONS = "new_playtable.yaml"
"""7-20 sentences per task, those of CALVIN's training data: vlarl's paraphrases (the ``semantic`` split)."""

SCENES = ("A", "B", "C", "D")


def calvin_env_root() -> Path:
    """The calvin_env checkout (the folder holding ``calvin_env/``, ``conf/`` and ``data/``)."""
    spec = importlib.util.find_spec("calvin_env")
    if spec is None or spec.origin is None:
        raise ImportError(f"CALVIN environments need calvin_env: {INSTALL_HINT}")
    root = Path(spec.origin).parents[1]
    if not (root / "data").is_dir() or not (root / "conf").is_dir():
        raise ImportError(f"calvin_env at {root} has no data/ and conf/ beside it: it was installed from a wheel, "
                          f"not from a checkout in place; {INSTALL_HINT}")
    return root


def scene_config(scene: str) -> Path:
    return calvin_env_root() / "conf" / "scene" / f"calvin_scene_{scene}.yaml"


def task_oracle_config() -> Path:
    """calvin_env's copy of the benchmark's task definitions (the same file as calvin's rollout tasks)."""
    return calvin_env_root() / "conf" / "tasks" / "new_playtable_tasks.yaml"


def annotations_dir() -> Path:
    folder = os.environ.get(ANNOTATIONS_VARIABLE)
    path = Path(folder) if folder else calvin_env_root().parent / "calvin_annotations"
    if not (path / VALIDATION_ANNOTATIONS).is_file() or not (path / TRAINING_ANNOTATIONS).is_file():
        raise ImportError(f"CALVIN's annotations ({VALIDATION_ANNOTATIONS}, {TRAINING_ANNOTATIONS}) are not in {path}; "
                          f"set {ANNOTATIONS_VARIABLE} to the folder holding them (calvin_models/conf/annotations "
                          f"of github.com/mees/calvin) or run `make calvin`")
    return path


@functools.cache
def calvin_instructions() -> InstructionSet:
    """Per task: CALVIN's validation sentence, then its training sentences as paraphrases."""
    import yaml

    folder = annotations_dir()
    validation = yaml.safe_load((folder / VALIDATION_ANNOTATIONS).read_text())
    training = yaml.safe_load((folder / TRAINING_ANNOTATIONS).read_text())
    return InstructionSet({task: (validation[task][0],
                                  *(sentence for sentence in training[task] if sentence != validation[task][0]))
                           for task in validation})
