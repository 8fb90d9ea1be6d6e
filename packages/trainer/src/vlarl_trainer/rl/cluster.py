"""Ray: start or join a cluster, place worker groups, and turn worker failures into one error.

On a machine without GPUs every placement device is a logical CPU slot and the processes
share the machine's cores; with GPUs each device is one GPU bundle of a placement group and
processes sharing a device get a fraction of it.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


EMBEDDED_START_ATTEMPTS = 3
"""An embedded Ray node waits a fixed time for its helper processes; on a machine busy with
other work they can miss it, and a second start usually makes it."""


class WorkerFailure(RuntimeError):
    """A worker raised or died; the message carries its role, rank and traceback."""


def start_ray(address: str | None, num_cpus: int | None) -> None:
    if ray.is_initialized():
        return
    if address is not None:
        ray.init(address=address, configure_logging=False, log_to_driver=True)
        return
    for attempt in range(1, EMBEDDED_START_ATTEMPTS + 1):
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, configure_logging=False, log_to_driver=True)
            return
        except Exception as error:  # Ray raises a bare Exception when its node does not come up in time
            ray.shutdown()
            if "timed out during startup" not in str(error) or attempt == EMBEDDED_START_ATTEMPTS:
                raise


def gpu_count() -> int:
    return int(ray.cluster_resources().get("GPU", 0))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class WorkerGroup:
    """One Ray actor per process of a component, in rank order."""

    def __init__(
        self,
        role: str,
        cls: type,
        processes: Sequence[tuple[int, ...]],
        init_args: Sequence[tuple[tuple, dict]],
        bundles: Any | None,
    ) -> None:
        self.role = role
        sharing: dict[int, int] = {}
        for devices in processes:
            sharing[devices[0]] = sharing.get(devices[0], 0) + 1
        remote_cls = ray.remote(cls)
        self.workers = []
        for devices, (args, kwargs) in zip(processes, init_args):
            options: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 1}
            if bundles is not None:
                options["num_gpus"] = len(devices) / sharing[devices[0]] if len(devices) == 1 else len(devices)
                options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                    bundles, placement_group_bundle_index=devices[0]
                )
            self.workers.append(remote_cls.options(**options).remote(*args, **kwargs))

    def __len__(self) -> int:
        return len(self.workers)

    def call(self, method: str, *args, **kwargs) -> list[ray.ObjectRef]:
        return [getattr(worker, method).remote(*args, **kwargs) for worker in self.workers]

    def get(self, refs, timeout: float | None = None):
        return wait_all(refs, self.role, timeout)

    def kill(self) -> None:
        for worker in self.workers:
            ray.kill(worker, no_restart=True)


def gpu_bundles(num_devices: int):
    """A placement group of one GPU per device, filled node by node."""
    group = placement_group([{"GPU": 1, "CPU": 1}] * num_devices, strategy="PACK")
    ray.get(group.ready())
    return group


def wait_all(refs, role: str, timeout: float | None = None):
    """``ray.get`` that names the failed worker and keeps its traceback."""
    try:
        return ray.get(refs, timeout=timeout)
    except RayTaskError as error:
        raise WorkerFailure(f"a {role} worker raised:\n{error}") from None
    except RayActorError as error:
        raise WorkerFailure(f"a {role} worker died:\n{error}") from None
    except RayError as error:
        raise WorkerFailure(f"a {role} worker could not run:\n{error}") from None
