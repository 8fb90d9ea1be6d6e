"""What every worker process does besides its job: it answers where it runs, dumps its Python stacks on
request, and leaves the stop signals to the driver.

A driver whose call misses its deadline cannot ask the worker anything (Ray runs one call at a time),
so each worker registers faulthandler for SIGUSR1 at start: the signal makes the interpreter write
every thread's stack to ``stack_file(pid)`` without the worker's help, even inside a C extension's
loop that holds the GIL for good. The files live in a directory only their user may enter, and are
opened without following links, so another user can neither read them nor plant a link to a file of
ours for a dump to overwrite.

A scheduler that stops a job signals every process of it at once (SLURM's ``scancel`` and time limit send
SIGTERM to all of the job's processes, Ray's workers included). A worker that exited on it would take the
actor's optimizer state and the rollout's weights with it before the driver writes the checkpoint of the
last finished step, so workers ignore SIGTERM and SIGINT: the driver stops the run (``rl.stopping``) and
ends them (``ray.kill``; after a SIGKILL of the driver, the run's watcher sends SIGKILL after SIGTERM).
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import os
import signal
import socket
import stat
import tempfile
import uuid
from typing import IO

import psutil
import ray

from vlarl_trainer.rl.stopping import STOP_SIGNALS

STACK_SIGNAL = signal.SIGUSR1


def private_directory(kind: str, purpose: str) -> str:
    """This user's private directory ``vlarl-<kind>-<uid>`` in the temp directory (created with mode 700) for
    ``purpose``; one that is a link, another user's or open to others is refused."""
    path = os.path.join(tempfile.gettempdir(), f"vlarl-{kind}-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{path}: expected a directory of this user alone (mode 700) for {purpose}, found "
                              f"mode {stat.filemode(info.st_mode)} of uid {info.st_uid}; remove it")
    return path


def stack_directory() -> str:
    """This user's private directory of stack dumps."""
    return private_directory("stacks", "the workers' stack dumps")


def local_rendezvous() -> str:
    """A torch ``init_method`` for ranks that all run on this machine: ``file://`` a new name in this user's
    private directory, where torch's FileStore keeps the rendezvous (no port to listen on, no file another
    user can read or plant). The file goes when this process exits (one killed with SIGKILL leaves its
    half-kilobyte behind)."""
    path = os.path.join(private_directory("rendezvous", "the actor ranks' rendezvous"), uuid.uuid4().hex)
    atexit.register(remove_if_present, path)
    return f"file://{path}"


def remove_if_present(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def loopback_interface() -> str:
    """The name of the network interface that holds 127.0.0.1 (``lo`` on Linux)."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(address.family == socket.AF_INET and address.address == "127.0.0.1" for address in addresses):
            return name
    raise RuntimeError("no network interface holds 127.0.0.1; name one in GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME")


def stack_file(pid: int) -> str:
    """Where the process ``pid`` writes its stacks on ``STACK_SIGNAL``."""
    return os.path.join(stack_directory(), f"{pid}.txt")


class WorkerProcess:
    """Base of the env, rollout and actor workers."""

    _stack_output: IO[str] | None = None

    def prepare_process(self) -> None:
        """The first call of every worker's ``__init__`` (which Ray runs in the process's main thread, where
        Python sets signal handlers): stack dumps on ``STACK_SIGNAL``, and SIGTERM and SIGINT ignored."""
        self.enable_stack_dumps()
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)

    def enable_stack_dumps(self) -> None:
        """From now on ``STACK_SIGNAL`` writes this process's stacks to ``stack_file(pid)``."""
        descriptor = os.open(stack_file(os.getpid()), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        self._stack_output = os.fdopen(descriptor, "w")  # no with block: faulthandler keeps it open
        faulthandler.register(STACK_SIGNAL, file=self._stack_output, all_threads=True)

    def where(self) -> tuple[str, int]:
        """The host and pid of this process."""
        return socket.gethostname(), os.getpid()

    def node_id(self) -> str:
        """The id of the Ray node this process runs on, which tells nodes apart where several share a
        host (``ray start`` twice on one machine)."""
        return ray.get_runtime_context().get_node_id()
