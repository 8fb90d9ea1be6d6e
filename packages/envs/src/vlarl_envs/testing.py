"""Test helper shared by the vlarl packages: simulators are required in CI, optional elsewhere."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


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
