"""SIGTERM and SIGINT: what SLURM and Kubernetes send before they preempt a job, and Ctrl-C.

A run that gets one stops at the next point where nothing is lost beyond the step in progress:
a rollout or an evaluation is abandoned at once (the actor's weights are still those of the last
finished step), an update or a checkpoint is finished first. The handler itself only takes note
(raising inside Ray's C++ wait breaks it); the driver's waits look every ``POLL_SECONDS``
(``rl.cluster.wait_ready``) and raise ``Abandon`` in an abandonable phase. The trainer then writes the
checkpoint of the last finished step and raises ``RunStopped``, which the console scripts turn
into exit code 143 (SIGTERM) or 130 (SIGINT) and the command that continues the run. A second
signal stops the process at once, as it would without the handler; checkpoints are written
under a temporary name and renamed, so even that leaves none half-written.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class RunStopped(Exception):
    """The run stopped on a signal after writing the checkpoint of its last finished step."""

    def __init__(self, signum: int, step: int, checkpoint: Path | None, run_dir: Path) -> None:
        self.signum, self.step, self.checkpoint, self.run_dir = signum, step, checkpoint, run_dir
        self.resume_dir = run_dir
        """What ``resume=`` continues: the run, or the main job holding it."""
        saved = f"checkpoint {checkpoint}" if checkpoint is not None else "no checkpoint (no step had finished)"
        super().__init__(f"stopped by {signal.Signals(signum).name} after step {step}; {saved}")

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a process the signal ended."""
        return 128 + self.signum


class Abandon(BaseException):
    """Raised by a wait inside an abandonable phase once a stop signal has arrived; a BaseException, so
    that no ``except Exception`` on the way turns it into a failure."""


class StopSignals:
    """Catches the stop signals while a run trains (in the main thread, where Python runs handlers).

        with StopSignals() as stop:
            with stop.abandonable():
                rollouts()          # waits raise Abandon here once a signal came (stop.should_abandon())
            update()                # a signal only sets stop.signum here
            if stop.signum: ...
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._abandonable = False
        self._previous: dict[int, object] = {}

    def install(self) -> StopSignals:
        """Catch the stop signals from now on (in the main thread; elsewhere Python sets no handlers); a
        second call changes nothing."""
        if not self._previous and threading.current_thread() is threading.main_thread():
            self._previous = {signum: signal.signal(signum, self._handle) for signum in STOP_SIGNALS}
        return self

    def restore(self) -> None:
        """Give the stop signals their handlers from before ``install`` back; a second call changes nothing."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def __enter__(self) -> StopSignals:
        return self.install()

    def __exit__(self, *exc_info: object) -> None:
        self.restore()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # the second signal: stop now, as without the handler
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
            return
        self.signum = signum

    def should_abandon(self) -> bool:
        """Whether a signal came and the work in progress may be thrown away."""
        return self.signum is not None and self._abandonable

    @contextmanager
    def abandonable(self) -> Iterator[None]:
        """A phase whose work a stop throws away (its results change nothing until it ends)."""
        if self.signum is not None:
            raise Abandon
        self._abandonable = True
        try:
            yield
        finally:
            self._abandonable = False
