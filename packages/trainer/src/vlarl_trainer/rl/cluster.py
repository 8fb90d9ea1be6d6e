"""Ray: start or join a cluster, place worker groups, and turn worker failures into one error.

On a machine without GPUs every placement device is a logical CPU slot and the processes
share the machine's cores; with GPUs each device is one GPU bundle of a placement group and
processes sharing a device get a fraction of it.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError, RayTaskError
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy

from vlarl_trainer.rl.placement import device_count
from vlarl_trainer.rl.stopping import STOP_SIGNALS, Abandon
from vlarl_trainer.rl.workers.process import STACK_SIGNAL, stack_file

GRACEFUL_EXIT_SECONDS = 5.0
"""How long ``WorkerGroup.kill`` waits for its processes to finish their queued calls and exit
(their atexit handlers run) before it ends the ones still there."""

EMBEDDED_START_ATTEMPTS = 3
"""An embedded Ray node waits a fixed time for its helper processes; on a machine busy with
other work they can miss it, and a second start usually makes it."""


class WorkerFailure(RuntimeError):
    """A worker raised, died or missed a deadline; the message carries its role and traceback.

    ``died``: the worker's process is gone (killed, crashed in native code), which a new process of
    the same role can make good; a Python exception would only repeat. ``actor_id``: the dead
    worker's Ray actor id (hex), when Ray names it."""

    def __init__(self, message: str, role: str = "", died: bool = False, actor_id: str | None = None) -> None:
        super().__init__(message)
        self.role, self.died, self.actor_id = role, died, actor_id


class WorkerHang(WorkerFailure):
    """A remote call missed its deadline (``cluster.call_timeout``)."""


class Deadline:
    """How long the driver waits for one remote call, and the workers whose stacks it prints when a
    call takes longer.

    ``fixed`` seconds when set. Otherwise derived from the run's own measurements: ``FIRST_CALLS``
    until a rollout, update or evaluation has been timed (start-up, compilation and the first
    evaluation fall under it), then ``FACTOR`` times the slowest one measured, at least ``MINIMUM``.
    """

    FIRST_CALLS = 1800.0
    FACTOR = 5.0
    MINIMUM = 300.0

    def __init__(self, fixed: float | None = None) -> None:
        self.fixed = fixed
        self.abandon: Callable[[], bool] = lambda: False
        """Asked while waiting: True makes the wait raise ``stopping.Abandon`` (a stop signal came)."""
        self.slowest: float | None = None
        self.groups: list[WorkerGroup] = []
        """Every group of the run, whose stacks a missed deadline prints."""

    def seconds(self) -> float:
        if self.fixed is not None:
            return self.fixed
        return self.FIRST_CALLS if self.slowest is None else max(self.MINIMUM, self.FACTOR * self.slowest)

    def measured(self, seconds: float) -> None:
        """One rollout, update or evaluation took ``seconds``."""
        self.slowest = seconds if self.slowest is None else max(self.slowest, seconds)

    def expired(self, role: str, seconds: float) -> WorkerHang:
        stacks = "\n".join(group.stacks() for group in self.groups)
        return WorkerHang(
            f"a call to {a_worker(role)} found no answer within {seconds:.0f} s (cluster.call_timeout"
            f"{'' if self.fixed is not None else ', derived from the measured step times'}); Python stacks "
            f"of the run's workers:\n{stacks}", role=role)


def start_ray(address: str | None, num_cpus: int | None) -> None:
    if ray.is_initialized():
        return
    if address is not None:
        check_reachable(address)
        try:
            with stop_signals_kept_from_ray():
                ray.init(address=address, configure_logging=False, log_to_driver=True)
        except ConnectionError as error:
            raise ValueError(unreachable_message(address, str(error).splitlines()[0])) from None
        return
    for attempt in range(1, EMBEDDED_START_ATTEMPTS + 1):
        try:
            with stop_signals_kept_from_ray():
                ray.init(num_cpus=num_cpus, include_dashboard=False, configure_logging=False, log_to_driver=True)
            return
        except Exception as error:  # Ray raises a bare Exception when its node does not come up in time
            ray.shutdown()
            if "timed out during startup" not in str(error) or attempt == EMBEDDED_START_ATTEMPTS:
                raise


@contextlib.contextmanager
def stop_signals_kept_from_ray() -> Iterator[None]:
    """While Ray starts: the processes and threads it starts never see SIGTERM or SIGINT, and this process keeps
    its handlers.

    A scheduler that stops a job signals all its processes at once (SLURM's ``scancel`` and time limit);
    the GCS, raylet and agents of an embedded Ray would shut down on SIGTERM and take the workers, whose
    state the driver is about to checkpoint, with them. A process inherits its parent's blocked signals
    and keeps them across ``exec``, so the signals are blocked while ``ray.init`` starts them (the driver
    ends them with SIGKILL a second after its SIGTERM). ``ray.init`` also sets a SIGTERM handler of its own
    in this process, which logs and aborts: the handlers from before come back before the main thread lets
    the signals through, so one held back meanwhile reaches the run's handler (a thread this process
    started before, which blocks nothing, may still take a signal while Ray's handler is in place)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            if handler is not None:
                signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


ADDRESS_CHECK_SECONDS = 5


def unreachable_message(address: str, reason: str) -> str:
    return (f"cluster.address={address}: no Ray cluster answers there ({reason}); check the host and port of the "
            "head (`ray start --head --port=<port>` prints them) and that this node may reach it, or leave "
            "cluster.address unset for a Ray of this machine alone")


def check_reachable(address: str | None) -> None:
    """A ValueError in seconds where a ``host:port`` address has nothing listening, instead of Ray's minutes
    of retries; no address (an embedded Ray) and other forms ("auto", "ray://...") are left to Ray."""
    host, _, port = (address or "").rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host, int(port)), timeout=ADDRESS_CHECK_SECONDS).close()
    except OSError as error:
        raise ValueError(unreachable_message(address, error.strerror or str(error))) from None


def gpu_count() -> int:
    return int(ray.cluster_resources().get("GPU", 0))


def free_port() -> int:
    """A port no socket of this host holds, on any of its addresses (others may connect to it)."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


class WorkerGroup:
    """One Ray actor per process of a component, in rank order.

    Its calls wait at most ``deadline.seconds()``; ``identify`` learns where each process runs, which
    ``stacks`` needs; ``restart(rank)`` replaces one process with a new one built as the first was.

    With a ``GpuPlacement`` a process takes its device's share of that device's GPU bundle. Without one
    (no GPUs) a process takes no resources and Ray starts it on the driver's node; ``spread`` puts the
    processes on the cluster's nodes in turn instead (``spread_over_nodes``), which on one machine changes
    nothing."""

    def __init__(
        self,
        role: str,
        cls: type,
        processes: Sequence[tuple[int, ...]],
        init_args: Sequence[tuple[tuple, dict]],
        gpus: GpuPlacement | None,
        deadline: Deadline | None = None,
        spread: bool = False,
    ) -> None:
        self.role = role
        self.deadline = deadline
        if deadline is not None:
            deadline.groups.append(self)
        self.remote_cls = ray.remote(cls)
        self.specs: list[tuple[dict[str, Any], tuple, dict]] = []
        """Per rank: the actor options and constructor arguments it was built with."""
        nodes = spread_over_nodes(len(processes)) if spread and gpus is None else None
        for rank, (devices, (args, kwargs)) in enumerate(zip(processes, init_args)):
            options: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 1}
            if gpus is not None:
                options["num_gpus"] = gpus.gpus(devices)
                options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                    gpus.group, placement_group_bundle_index=devices[0]
                )
            elif nodes is not None:
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(nodes[rank], soft=False)
            self.specs.append((options, args, kwargs))
        self.workers = [
            self.remote_cls.options(**options).remote(*args, **kwargs) for options, args, kwargs in self.specs
        ]
        self.processes: list[tuple[str, int] | None] = [None] * len(self.workers)
        """Per rank: the host and pid ``identify`` learnt (None before)."""

    def __len__(self) -> int:
        return len(self.workers)

    def call(self, method: str, *args, **kwargs) -> list[ray.ObjectRef]:
        return [getattr(worker, method).remote(*args, **kwargs) for worker in self.workers]

    def get(self, refs, timeout: float | None = None):
        """``ray.get`` of ``refs`` within ``timeout`` (default: the deadline's), naming this role on failure."""
        return wait_all(refs, self.role, self.deadline, timeout)

    def identify(self, timeout: float | None = None) -> list[int]:
        """Wait for every process to be up (within ``timeout``); returns their pids in rank order."""
        self.processes = [tuple(where) for where in self.get(self.call("where"), timeout)]
        return [pid for _, pid in self.processes]

    def rank_of(self, failure: WorkerFailure) -> int | None:
        """The rank of the worker a failure names, or None when it names none of this group's."""
        ids = [worker._ray_actor_id.hex() for worker in self.workers]
        return ids.index(failure.actor_id) if failure.actor_id in ids else None

    def restart(self, rank: int, timeout: float | None = None) -> int:
        """Replace the process of ``rank`` with a new one built like it; returns the new pid."""
        ray.kill(self.workers[rank], no_restart=True)
        options, args, kwargs = self.specs[rank]
        self.workers[rank] = self.remote_cls.options(**options).remote(*args, **kwargs)
        self.processes[rank] = tuple(self.get(self.workers[rank].where.remote(), timeout))
        return self.processes[rank][1]

    def stacks(self) -> str:
        """Every process's Python stacks, dumped by its faulthandler (``workers.process``); processes on
        other hosts are named with the command that shows theirs."""
        here = socket.gethostname()
        signalled = {}
        for rank, process in enumerate(self.processes):
            if process is not None and process[0] == here:
                try:
                    os.kill(process[1], STACK_SIGNAL)
                    signalled[rank] = process[1]
                except OSError:
                    pass
        time.sleep(1.0 if signalled else 0.0)
        parts = []
        for rank, process in enumerate(self.processes):
            title = f"--- {self.role} worker {rank}"
            if process is None:
                parts.append(f"{title}: not started")
            elif rank not in signalled:
                parts.append(
                    f"{title} (pid {process[1]} on {process[0]}): `py-spy dump --pid {process[1]}` on its host"
                )
            else:
                with open(stack_file(process[1])) as dump:
                    parts.append(f"{title} (pid {process[1]}):\n{dump.read().rstrip() or '(no answer)'}")
        return "\n".join(parts)

    def forget_stack_files(self) -> None:
        """Remove the stack files of this host's processes (at the end of a run)."""
        for process in self.processes:
            if process is not None and process[0] == socket.gethostname():
                with contextlib.suppress(OSError):
                    os.remove(stack_file(process[1]))

    def kill(self) -> None:
        """End every process: first by asking it to exit once its queued calls are done, so its atexit
        handlers run (log and coverage writers flush), then by force: a process still there after
        ``GRACEFUL_EXIT_SECONDS`` (a hung one) is killed."""
        exits = [worker.__ray_terminate__.remote() for worker in self.workers]
        ray.wait(exits, num_returns=len(exits), timeout=GRACEFUL_EXIT_SECONDS)
        for worker in self.workers:
            ray.kill(worker, no_restart=True)
        self.forget_stack_files()


def spread_over_nodes(count: int) -> list[str]:
    """Node ids for ``count`` processes that take no resources: the alive nodes with CPUs in turn, the
    driver's first. Ray's SPREAD strategy and soft node affinity are best effort and leave such processes on
    one node in some runs; a hard affinity to a node that was alive a moment ago does not."""
    here = ray.get_runtime_context().get_node_id()
    nodes = sorted((node["NodeID"] for node in ray.nodes() if node["Alive"] and node["Resources"].get("CPU", 0) > 0),
                   key=lambda node: node != here)
    nodes = nodes or [here]
    return [nodes[index % len(nodes)] for index in range(count)]


GPU_FRACTION_STEP = 1e-4
"""Ray keeps fractional GPU requests to four decimals; a device's shares are rounded down to it so
that they never add up past one GPU."""


def processes_per_device(placements: Iterable[Sequence[tuple[int, ...]]]) -> dict[int, int]:
    """How many of the processes of every placement (one tuple of devices per process, as
    ``placement.parse_placement`` gives) run on each device."""
    counts: dict[int, int] = {}
    for processes in placements:
        for devices in processes:
            for device in devices:
                counts[device] = counts.get(device, 0) + 1
    return counts


def gpu_share(processes: int) -> float:
    """The fraction of one GPU each of ``processes`` processes sharing it asks Ray for."""
    return math.floor(1.0 / processes / GPU_FRACTION_STEP) * GPU_FRACTION_STEP


@dataclass
class GpuPlacement:
    """A run's placement group of one GPU bundle per device, and how many of the run's processes, of every
    worker group it starts, share each device: a process takes its device's share of the bundle's GPU, so
    env, rollout, actor and evaluation workers placed on one device all start there."""

    group: PlacementGroup
    processes_per_device: dict[int, int]

    def gpus(self, devices: tuple[int, ...]) -> float:
        """The fraction of a GPU a process on ``devices`` (one device) asks for."""
        return gpu_share(self.processes_per_device[devices[0]])

    def remove(self) -> None:
        """Give the bundles back to the cluster (the next run or evaluation places its own)."""
        remove_placement_group(self.group)


def place_on_gpus(placements: Mapping[str, Sequence[tuple[int, ...]]], timeout: float) -> GpuPlacement:
    """The placement group for the worker groups ``placements`` names (role -> its processes' devices),
    ready within ``timeout`` seconds, filled node by node.

    Raises:
        ValueError: a process spans several devices (a Ray actor holds GPUs of one bundle).
        RuntimeError: the cluster cannot place the bundles in time; the message says what it has.
    """
    for role, processes in placements.items():
        spanning = [devices for devices in processes if len(devices) > 1]
        if spanning:
            raise ValueError(f"cluster.component_placement: on GPUs each {role} process runs on one device, "
                             f"got a process spanning devices {list(spanning[0])}; give {role} as many "
                             f"processes as devices (e.g. '0-3') or several per device ('0:0-1')")
    counts = processes_per_device(placements.values())
    num_devices = device_count(placements)
    group = placement_group([{"GPU": 1}] * num_devices, strategy="PACK")
    try:
        ray.get(group.ready(), timeout=timeout)
    except GetTimeoutError:
        remove_placement_group(group)
        total, free = ray.cluster_resources(), ray.available_resources()
        raise RuntimeError(
            f"cluster.component_placement asks for {num_devices} GPUs (one bundle per device 0-{num_devices - 1}, "
            f"shared by {sum(counts.values())} processes); the cluster has {total.get('GPU', 0):g} GPUs, "
            f"{free.get('GPU', 0):g} of them free, and placed none within {timeout:g} s "
            f"(cluster.start_timeout)") from None
    return GpuPlacement(group, counts)


def a_worker(role: str) -> str:
    """``an env worker``, ``a rollout worker``: the role with its article."""
    return f"{'an' if role[:1] in 'aeiou' else 'a'} {role} worker"


POLL_SECONDS = 0.5
"""How often a wait looks whether a stop signal asks it to give up."""


def wait_ready(refs: list, deadline: Deadline | None, timeout: float | None) -> bool:
    """Wait until every ref is ready (a failed call's is ready too) or ``timeout`` passes; returns whether
    all are. Raises ``stopping.Abandon`` as soon as ``deadline.abandon()`` says so."""
    pending, started = list(dict.fromkeys(refs)), time.monotonic()
    while True:
        remaining = None if timeout is None else timeout - (time.monotonic() - started)
        if remaining is not None and remaining <= 0:
            return False
        window = POLL_SECONDS if remaining is None else min(POLL_SECONDS, remaining)
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=window, fetch_local=False)
        if not pending:
            return True
        if deadline is not None and deadline.abandon():
            raise Abandon


def wait_in_time(refs: list, role: str, deadline: Deadline | None = None, timeout: float | None = None) -> None:
    """Wait until every ref is ready, at most ``timeout`` seconds or the deadline's; a call that misses
    it raises WorkerHang, with every worker's stacks when there is a deadline."""
    limit = timeout if timeout is not None else deadline.seconds() if deadline is not None else None
    if wait_ready(refs, deadline, limit):
        return
    if deadline is None:
        raise WorkerHang(f"a call to {a_worker(role)} found no answer within {limit:.0f} s", role=role)
    raise deadline.expired(role, limit)


def wait_all(refs, role: str, deadline: Deadline | None = None, timeout: float | None = None):
    """``ray.get`` that names the failed worker and keeps its traceback, after ``wait_in_time``."""
    wait_in_time(refs if isinstance(refs, list) else [refs], role, deadline, timeout)
    try:
        return ray.get(refs)
    except RayTaskError as error:
        raise WorkerFailure(f"{a_worker(role)} raised:\n{error}", role=role) from None
    except RayActorError as error:
        raise WorkerFailure(f"{a_worker(role)} died:\n{error}", role=role, died=True,
                            actor_id=getattr(error, "actor_id", None)) from None
    except RayError as error:
        raise WorkerFailure(f"{a_worker(role)} could not run:\n{error}", role=role) from None
