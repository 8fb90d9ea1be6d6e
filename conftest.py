"""Repository-wide pytest hooks.

GPU tests skip with a printed reason on a machine without CUDA; every other test runs.
Simulator tests import their simulator through ``vlarl_envs.testing.require_simulator``,
which turns a missing simulator into an error when ``VLARL_REQUIRE_SIMS=1`` (CI).
"""

import os

import pytest

# Ray reads this once, on its import, which a test module may do before it imports vlarl_trainer (which
# sets it too): under `uv run`, Ray's workers must start in this interpreter, not through uv's hook.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU; none is visible on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
