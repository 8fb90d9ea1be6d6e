"""MetaWorld's task lists, its difficulty groups and the lazy import of the simulator itself."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

METAWORLD_DIFFICULTY: dict[str, tuple[str, ...]] = {
    "easy": (
        "button-press-v3", "button-press-topdown-v3", "button-press-topdown-wall-v3", "button-press-wall-v3",
        "coffee-button-v3", "dial-turn-v3", "door-close-v3", "door-lock-v3", "door-open-v3", "door-unlock-v3",
        "drawer-close-v3", "drawer-open-v3", "faucet-close-v3", "faucet-open-v3", "handle-press-v3",
        "handle-press-side-v3", "handle-pull-v3", "handle-pull-side-v3", "lever-pull-v3", "plate-slide-v3",
        "plate-slide-back-v3", "plate-slide-back-side-v3", "plate-slide-side-v3", "reach-v3", "reach-wall-v3",
        "window-close-v3", "window-open-v3", "peg-unplug-side-v3",
    ),
    "medium": (
        "basketball-v3", "bin-picking-v3", "box-close-v3", "coffee-pull-v3", "coffee-push-v3", "hammer-v3",
        "peg-insert-side-v3", "push-wall-v3", "soccer-v3", "sweep-v3", "sweep-into-v3",
    ),
    "hard": ("assembly-v3", "hand-insert-v3", "pick-out-of-hole-v3", "pick-place-v3", "push-v3", "push-back-v3"),
    "very_hard": ("shelf-place-v3", "disassemble-v3", "stick-pull-v3", "stick-push-v3", "pick-place-wall-v3"),
}
"""MetaWorld's 50 tasks by difficulty, as LeRobot's MetaWorld env groups them for evaluation
(``DIFFICULTY_TO_TASKS`` of lerobot's metaworld env; SmolVLA and RLinf report MT50 by these groups):
28 easy, 11 medium, 6 hard and 5 very hard tasks."""


def difficulty_of(task: str) -> str:
    """The difficulty group of a MetaWorld task name."""
    for group, tasks in METAWORLD_DIFFICULTY.items():
        if task in tasks:
            return group
    raise ValueError(f"unknown MetaWorld task {task!r}; expected a v3 task name such as 'reach-v3'")



def load_metaworld() -> SimpleNamespace:
    """Import metaworld on first use, with the install command in the error when it is missing."""
    try:
        env_dict = importlib.import_module("metaworld.env_dict")
        types = importlib.import_module("metaworld.types")
        policies = importlib.import_module("metaworld.policies")
        mujoco = importlib.import_module("mujoco")
    except ImportError as error:
        raise ImportError(
            "MetaWorld environments need the simulator: pip install 'vlarl-envs[metaworld]' "
            f"(metaworld==3.1.1, mujoco<3.10); import failed with: {error}"
        ) from error
    return SimpleNamespace(
        ALL_V3_ENVIRONMENTS=env_dict.ALL_V3_ENVIRONMENTS,
        MT10=tuple(env_dict.MT10_V3),
        ML45_TRAIN=tuple(env_dict.ML45_V3["train"]),
        ML45_TEST=tuple(env_dict.ML45_V3["test"]),
        Task=types.Task,
        EXPERTS=policies.ENV_POLICY_MAP,
        mj_forward=mujoco.mj_forward,
    )
