"""Component placement strings, as RLinf's recipes write them.

``cluster.component_placement`` maps component names to device ranges::

    env: 0-3            # four env processes on devices 0..3
    rollout: 4-7
    actor: 0-7
    "env,rollout,actor": all     # every component on every device
    actor: "0-1:0-3"    # devices 0..1 host actor processes 0..3 (two per device)

A value is one or more ``resource[:process]`` segments joined by commas. Ranges are inclusive;
``all`` stands for every device and is allowed for resources only. Process ranks continue from
one segment to the next, and within a segment the process and device counts divide one
another (several processes share a device, or one process spans several).
"""

from __future__ import annotations

from collections.abc import Mapping

COMPONENTS = ("env", "rollout", "actor")


def parse_range(text: str, num_devices: int | None, allow_all: bool, what: str) -> list[int]:
    """``"3"`` -> [3]; ``"0-3"`` -> [0, 1, 2, 3]; ``"all"`` -> every device."""
    text = text.strip()
    if text == "all":
        if not allow_all:
            raise ValueError(f"{what}: 'all' is allowed for devices only, got {text!r}")
        if num_devices is None:
            raise ValueError(f"{what}: 'all' needs the number of devices")
        return list(range(num_devices))
    parts = text.split("-")
    if len(parts) not in (1, 2) or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"{what}: expected a rank 'N', a range 'N-M' or 'all', got {text!r}")
    first, last = int(parts[0]), int(parts[-1])
    if last < first:
        raise ValueError(f"{what}: a range must not run backwards, got {text!r}")
    return list(range(first, last + 1))


def parse_placement(text: str | int, num_devices: int | None = None, what: str = "placement") -> list[tuple[int, ...]]:
    """The devices of each process of one component, in process-rank order.

    Returns:
        One tuple of device indices per process: ``"0-1:0-3"`` -> [(0,), (0,), (1,), (1,)],
        ``"0-3:0-1"`` -> [(0, 1), (2, 3)].
    """
    text = str(text).strip()
    if not text:
        raise ValueError(f"{what}: expected a placement such as '0-3', got an empty string")
    processes: list[tuple[int, ...]] = []
    for segment in text.split(","):
        if ":" in segment:
            device_text, process_text = segment.split(":", 1)
            devices = parse_range(device_text, num_devices, True, what)
            ranks = parse_range(process_text, num_devices, False, what)
            if ranks[0] != len(processes):
                raise ValueError(
                    f"{what}: process ranks must be contiguous; segment {segment!r} starts at process "
                    f"{ranks[0]}, expected {len(processes)}"
                )
        else:
            devices = parse_range(segment, num_devices, True, what)
            ranks = list(range(len(processes), len(processes) + len(devices)))
        if num_devices is not None and devices[-1] >= num_devices:
            raise ValueError(f"{what}: device {devices[-1]} in {segment!r} does not exist; there are {num_devices}")
        n_dev, n_proc = len(devices), len(ranks)
        if n_proc % n_dev == 0:
            share = n_proc // n_dev
            processes.extend((devices[i // share],) for i in range(n_proc))
        elif n_dev % n_proc == 0:
            span = n_dev // n_proc
            processes.extend(tuple(devices[i * span : (i + 1) * span]) for i in range(n_proc))
        else:
            raise ValueError(
                f"{what}: {n_proc} processes and {n_dev} devices in {segment!r} do not divide one another"
            )
    return processes


def parse_component_placement(
    placement: Mapping[str, str | int], num_devices: int | None = None
) -> dict[str, list[tuple[int, ...]]]:
    """Each of env, rollout and actor mapped to its processes' devices.

    Keys may name several components (``"env,rollout,actor": all``). A key naming fewer components
    wins, so a job or a command line can move one component of a recipe's shared placement
    (``{"env,rollout,actor": 0, env: "0:0-1"}`` gives env two processes); every component must be
    placed, and two keys of the same size may not place one component.
    """
    placed: dict[str, tuple[int, list[tuple[int, ...]]]] = {}
    for key, value in placement.items():
        components = [name.strip() for name in str(key).split(",")]
        for component in components:
            if component not in COMPONENTS:
                raise ValueError(f"component_placement: unknown component {component!r}; expected {list(COMPONENTS)}")
            if component in placed and placed[component][0] == len(components):
                raise ValueError(f"component_placement: {component!r} is placed twice")
            if component not in placed or placed[component][0] > len(components):
                placed[component] = (len(components), parse_placement(value, num_devices,
                                                                       what=f"placement of {component!r}"))
    missing = [c for c in COMPONENTS if c not in placed]
    if missing:
        raise ValueError(f"component_placement: no placement for {missing}; got {dict(placement)}")
    return {component: placed[component][1] for component in COMPONENTS}


def device_count(placed: Mapping[str, list[tuple[int, ...]]]) -> int:
    """Devices the placement uses: one past the highest index."""
    return 1 + max(device for processes in placed.values() for devices in processes for device in devices)
