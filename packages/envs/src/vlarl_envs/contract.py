"""The observation / action / info contract every vlarl environment keeps.

Environments build their spaces here and validate input here, so that every family
(MetaWorld, ManiSkill, ...) raises the same ``ValueError`` for the same mistake, naming the
env id, what was expected and what came. See docs/architecture.md.
"""

from __future__ import annotations

import math
import string
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

OBS_MODES = ("state", "rgb")
"""``state`` drops the image keys; ``rgb`` keeps them."""

RESET_OPTION_KEYS = frozenset({"episode_id", "task", "split"})
"""Every key ``reset(options=...)`` accepts; anything else is a ValueError."""

INSTRUCTION_CHARSET = string.ascii_letters + string.digits + " .,;:'!?-()/&"
INSTRUCTION_SPACE = spaces.Text(min_length=1, max_length=256, charset=INSTRUCTION_CHARSET)
"""The natural-language instruction; gymnasium's default Text charset has no spaces."""


def image_shape(image_size: int | tuple[int, int]) -> tuple[int, int, int]:
    """(H, W, 3) from an int (square) or an (H, W) pair."""
    if isinstance(image_size, (int, np.integer)):
        height = width = int(image_size)
    else:
        height, width = (int(v) for v in image_size)
    if height <= 0 or width <= 0:
        raise ValueError(f"image_size must be positive, got {image_size!r}")
    return height, width, 3


def observation_space(
    obs_mode: str,
    image_size: int | tuple[int, int],
    state_low: np.ndarray,
    state_high: np.ndarray,
    wrist_camera: bool = False,
    extra: Mapping[str, spaces.Space] | None = None,
) -> spaces.Dict:
    """The Dict observation space of the contract.

    Args:
        obs_mode: "state" or "rgb".
        image_size: camera resolution, int or (H, W).
        state_low, state_high: bounds of the proprioceptive ``states`` vector (S,).
        wrist_camera: whether ``wrist_images`` exists (rgb mode only).
        extra: additional keys a family adds (e.g. ``privileged_state``).
    """
    check_obs_mode(obs_mode)
    entries: dict[str, spaces.Space] = {}
    if obs_mode == "rgb":
        shape = image_shape(image_size)
        entries["main_images"] = spaces.Box(0, 255, shape, np.uint8)
        if wrist_camera:
            entries["wrist_images"] = spaces.Box(0, 255, shape, np.uint8)
    entries["states"] = spaces.Box(
        np.asarray(state_low, np.float32), np.asarray(state_high, np.float32), dtype=np.float32
    )
    entries["task_description"] = INSTRUCTION_SPACE
    entries.update(extra or {})
    return spaces.Dict(entries)


def check_obs_mode(obs_mode: str) -> None:
    if obs_mode not in OBS_MODES:
        raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {obs_mode!r}")


def validate_action(env_id: str, action: Any, space: spaces.Box) -> np.ndarray:
    """Check an action against the normalized Box(-1, 1) and return it as float32.

    Values outside [-1, 1] are clipped (the space is a normalization, not a physical
    limit); a wrong shape, a non-float dtype or a non-finite value is a ValueError.
    """
    array = np.asarray(action)
    if array.dtype.kind != "f":
        raise ValueError(
            f"{env_id}: expected a float action of shape {space.shape}, "
            f"got dtype {array.dtype} with shape {array.shape}"
        )
    if array.shape != space.shape:
        raise ValueError(f"{env_id}: expected an action of shape {space.shape}, got shape {array.shape}")
    # An action has a few entries: Python floats check them faster than numpy reductions on the
    # per-step hot path. Their sum is NaN/inf exactly when an entry is (short of 1e308-sized entries).
    values = array.ravel().tolist()
    if not math.isfinite(sum(values)):
        raise ValueError(f"{env_id}: expected a finite action, got {array.tolist()}")
    if array.dtype == np.float32 and -1.0 <= min(values) and max(values) <= 1.0:
        return array
    return np.minimum(np.maximum(array, space.low, dtype=np.float32), space.high)


def validate_options(env_id: str, options: Mapping[str, Any] | None, extra: Iterable[str] = ()) -> dict[str, Any]:
    """Reject unknown reset options and malformed episode ids; ``extra`` names the options an env accepts
    beyond the contract's (CALVIN's chains)."""
    options = dict(options or {})
    accepted = RESET_OPTION_KEYS | set(extra)
    unknown = set(options) - accepted
    if unknown:
        raise ValueError(f"{env_id}: unknown reset option(s) {sorted(unknown)}; expected any of {sorted(accepted)}")
    episode_id = options.get("episode_id")
    if episode_id is not None and (
        isinstance(episode_id, bool) or not isinstance(episode_id, (int, np.integer)) or episode_id < 0
    ):
        raise ValueError(f"{env_id}: episode_id must be a non-negative int, got {episode_id!r}")
    return options


def validate_choice(env_id: str, what: str, value: Any, allowed: Iterable[str]) -> str:
    """A ValueError listing the allowed values when ``value`` is not one of them."""
    allowed = list(allowed)
    if value not in allowed:
        raise ValueError(f"{env_id}: unknown {what} {value!r}; expected one of {allowed}")
    return value


def validate_task_subset(env_id: str, tasks: Sequence[str] | None, available: Sequence[str], collection: str
                         ) -> tuple[str, ...]:
    """``available``, or ``tasks``, a subset of them in the given order: the ``tasks`` keyword of a multi-task id
    (MetaWorld's suites, LIBERO's suites, CALVIN), which keeps the id, and so its family, while playing fewer tasks.
    ``collection`` names what ``available`` lists in the error (``MT10``, ``LIBERO-Spatial``)."""
    if tasks is None:
        return tuple(available)
    if isinstance(tasks, str) or not tasks:
        raise ValueError(f"{env_id}: tasks must be a non-empty list of task names, got {tasks!r}")
    unknown = [name for name in tasks if name not in available]
    if unknown or len(set(tasks)) != len(tasks):
        raise ValueError(f"{env_id}: tasks must be distinct tasks of {collection}, got {list(tasks)}; "
                         f"{'unknown: ' + str(unknown) if unknown else 'repeated names'}; expected a subset of "
                         f"{list(available)}")
    return tuple(tasks)
