"""WorkerGroup.kill: processes exit through their atexit handlers, and a hung one is ended all the same."""

from __future__ import annotations

import atexit
import os
import time
from pathlib import Path

import pytest

from vlarl_trainer.rl.cluster import WorkerGroup
from vlarl_trainer.rl.workers.process import WorkerProcess

pytestmark = pytest.mark.xdist_group("ray")


class MarksItsExit(WorkerProcess):
    """Writes ``<folder>/<pid>`` from an atexit handler, as coverage.py and log writers save at exit."""

    def __init__(self, folder: str) -> None:
        atexit.register(lambda: Path(folder, str(os.getpid())).write_text("exited"))

    def hang(self) -> None:
        time.sleep(600)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pid: int, seconds: float = 30.0) -> bool:
    end = time.monotonic() + seconds
    while process_alive(pid) and time.monotonic() < end:
        time.sleep(0.1)
    return not process_alive(pid)


def start_group(folder: Path, size: int) -> WorkerGroup:
    group = WorkerGroup("marks", MarksItsExit, [(0,)] * size, [((str(folder),), {})] * size, gpus=None)
    group.identify(timeout=60)
    return group


def test_kill_lets_every_process_run_its_exit_handlers(tmp_path, embedded_ray):
    group = start_group(tmp_path, 2)
    pids = [pid for _, pid in group.processes]
    group.kill()
    assert all(wait_gone(pid) for pid in pids)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(str(pid) for pid in pids)


def test_kill_ends_a_hung_process(tmp_path, embedded_ray):
    group = start_group(tmp_path, 1)
    (pid,) = [pid for _, pid in group.processes]
    group.call("hang")
    group.kill()
    assert wait_gone(pid)
    assert not list(tmp_path.iterdir())  # forced: no exit handler ran
