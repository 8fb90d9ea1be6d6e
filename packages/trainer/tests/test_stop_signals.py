"""Stop signals that reach every process of a job at once: Ray's processes never see them, workers ignore
them, and the driver's handler gets them (the whole-command test is in test_faults.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading

import pytest

from vlarl_trainer.rl.cluster import stop_signals_kept_from_ray
from vlarl_trainer.rl.stopping import STOP_SIGNALS, StopSignals
from vlarl_trainer.rl.workers.process import WorkerProcess


def blocked_signals(pid: int) -> set[int]:
    """The signals process ``pid`` blocks, from its SigBlk mask."""
    with open(f"/proc/{pid}/status") as status:
        mask = int(next(line for line in status if line.startswith("SigBlk:")).split()[1], 16)
    return {number for number in range(1, 65) if mask & (1 << (number - 1))}


@pytest.fixture
def own_handlers():
    """The stop signals' handlers of this process, given back after the test."""
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    yield
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def test_processes_started_while_ray_starts_block_the_stop_signals():
    with stop_signals_kept_from_ray():
        child = subprocess.Popen(["sleep", "30"])
    try:
        assert {signal.SIGTERM, signal.SIGINT} <= blocked_signals(child.pid)
        assert not {signal.SIGTERM, signal.SIGINT} & blocked_signals(os.getpid())
    finally:
        child.kill()
        child.wait()


def test_a_signal_while_ray_starts_reaches_the_runs_handler_after_it(own_handlers):
    """ray.init sets a SIGTERM handler of its own in the driver (it logs and aborts); the run's handler comes
    back before the signal that waited is delivered."""
    stop = StopSignals().install()
    with stop_signals_kept_from_ray():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # what ray.init does to the driver's handler
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        assert stop.signum is None  # held back
    assert stop.signum == signal.SIGTERM
    stop.restore()


def test_install_and_restore_may_be_called_twice(own_handlers):
    before = signal.getsignal(signal.SIGTERM)
    stop = StopSignals()
    stop.install()
    caught = signal.getsignal(signal.SIGTERM)
    stop.install()
    stop.restore()
    stop.restore()
    assert caught is not before and signal.getsignal(signal.SIGTERM) is before


def test_workers_leave_the_stop_signals_to_the_driver(tmp_path, monkeypatch, own_handlers):
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    WorkerProcess().prepare_process()
    assert all(signal.getsignal(signum) is signal.SIG_IGN for signum in STOP_SIGNALS)
    os.kill(os.getpid(), signal.SIGTERM)  # ignored: the test goes on
