"""What every worker process answers besides its job: where it runs, and its Python stacks on request.

A driver whose call misses its deadline cannot ask the worker anything (Ray runs one call at a time),
so each worker registers faulthandler for SIGUSR1 at start: the signal makes the interpreter write
every thread's stack to ``stack_file(pid)`` without the worker's help, even inside a C extension's
loop that holds the GIL for good.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import socket
import tempfile
from typing import IO

import ray

STACK_SIGNAL = signal.SIGUSR1


def stack_file(pid: int) -> str:
    """Where the process ``pid`` writes its stacks on ``STACK_SIGNAL``."""
    return os.path.join(tempfile.gettempdir(), f"vlarl-stacks-{pid}.txt")


class WorkerProcess:
    """Base of the env, rollout and actor workers."""

    _stack_output: IO[str] | None = None

    def enable_stack_dumps(self) -> None:
        """From now on ``STACK_SIGNAL`` writes this process's stacks to ``stack_file(pid)``."""
        self._stack_output = open(stack_file(os.getpid()), "w")  # no with block: faulthandler keeps it open
        faulthandler.register(STACK_SIGNAL, file=self._stack_output, all_threads=True)

    def where(self) -> tuple[str, int]:
        """The host and pid of this process."""
        return socket.gethostname(), os.getpid()

    def node_id(self) -> str:
        """The id of the Ray node this process runs on, which tells nodes apart where several share a
        host (``ray start`` twice on one machine)."""
        return ray.get_runtime_context().get_node_id()
