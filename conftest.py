"""Repository-wide pytest hooks.

GPU tests skip with a printed reason on a machine without CUDA; every other test runs. With ``--durations``
(``make test``) the summary ends with the time by test module.
Simulator tests import their simulator through ``vlarl_envs.testing.require_simulator``,
which turns a missing simulator into an error when ``VLARL_REQUIRE_SIMS=1`` (CI).
"""

import collections
import os
import shutil
import subprocess
import sys

import pytest

# Ray reads this once, on its import, which a test module may do before it imports vlarl_trainer (which
# sets it too): under `uv run`, Ray's workers must start in this interpreter, not through uv's hook.
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


def pytest_configure(config):
    """Under ``make test`` two test processes each start a Ray of their own, at about the same moment. On
    a machine where no Ray has run, each ``ray.init`` would write a new token to ``~/.ray/auth_token`` (Ray
    turns token authentication on by default) and a cluster whose later processes read the other one's
    token would refuse them; so the controlling process writes the token once, before its test processes
    start. Nothing to do where ``RAY_AUTH_MODE`` chooses the mode or a token exists."""
    runs_test_processes = bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")
    if (not runs_test_processes or "RAY_AUTH_MODE" in os.environ
            or os.path.exists(os.path.expanduser("~/.ray/auth_token"))):
        return
    ray_cli = shutil.which("ray", path=os.path.dirname(sys.executable))
    if ray_cli is not None:
        subprocess.run([ray_cli, "get-auth-token", "--generate"], capture_output=True, check=True, timeout=120)


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


MODULES_SHOWN = 15


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, config):
    """Under ``--durations``, the time of each test module's tests (setup, call and teardown, summed over
    the test processes) after the slowest tests: where a change to the suite's time has to act."""
    if config.option.durations is None:
        return
    by_module: collections.Counter[str] = collections.Counter()
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) in ("setup", "call", "teardown"):
                by_module[report.nodeid.split("::")[0]] += report.duration
    total = sum(by_module.values())
    if not total:
        return
    shown = min(MODULES_SHOWN, len(by_module))
    terminalreporter.write_sep("=", f"time by test module: {shown} of {len(by_module)}, {total:.0f} s in all")
    for module, seconds in by_module.most_common(shown):
        terminalreporter.write_line(f"{seconds:8.1f}s {100 * seconds / total:5.1f}%  {module}")
