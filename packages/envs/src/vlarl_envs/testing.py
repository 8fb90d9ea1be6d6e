"""Test helpers shared by the vlarl packages: simulators are required in CI, optional elsewhere;
every env family replays its episodes by id."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any


def require_simulator(module_name: str) -> ModuleType:
    """Import a simulator module for a test.

    Without it, the test is skipped, unless ``VLARL_REQUIRE_SIMS=1`` (as in CI), where the
    ImportError propagates so that a missing simulator fails the run instead of hiding it.
    """
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        if os.environ.get("VLARL_REQUIRE_SIMS") == "1":
            raise ImportError(f"VLARL_REQUIRE_SIMS=1 but simulator {module_name!r} is missing: {error}") from error
        import pytest

        pytest.skip(f"simulator {module_name!r} is not installed ({error})")


def assert_episode_ids_replay(env) -> dict[str, Any]:
    """Check the contract's replayable resets on ``env``: episode 7 after episode 8 starts as
    episode 7 did (whatever ``seed`` the reset gets), in ``privileged_state`` and in
    ``main_images`` when the env renders; episode 8 and the test split's episode 7 start
    elsewhere. Returns the test split's first observation of episode 7, for family-specific checks.
    """
    import numpy as np

    first, _ = env.reset(seed=1, options={"episode_id": 7})
    env.reset(seed=2, options={"episode_id": 8})
    again, _ = env.reset(seed=3, options={"episode_id": 7})
    np.testing.assert_array_equal(first["privileged_state"], again["privileged_state"])
    if "main_images" in first:
        np.testing.assert_array_equal(first["main_images"], again["main_images"])
    other, _ = env.reset(options={"episode_id": 8})
    assert not np.array_equal(first["privileged_state"], other["privileged_state"])
    held_out, _ = env.reset(options={"episode_id": 7, "split": "test"})
    assert not np.array_equal(first["privileged_state"], held_out["privileged_state"])
    return held_out
