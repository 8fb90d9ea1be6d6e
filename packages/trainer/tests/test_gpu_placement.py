"""Placement on GPUs, tried on this machine's CPUs with a Ray that declares logical GPUs: every process of
every component on a device takes its share of that device's GPU, so RLinf's collocated, disaggregated and
hybrid layouts all start, and the CPU recipe trains with env, rollout and actor on one GPU."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
import ray
from hypothesis import given
from hypothesis import strategies as st

from vlarl_trainer.rl.cluster import WorkerGroup, gpu_share, place_on_gpus, processes_per_device
from vlarl_trainer.rl.placement import COMPONENTS, parse_component_placement
from vlarl_trainer.rl.workers.process import WorkerProcess

pytestmark = pytest.mark.xdist_group("ray")

LAYOUTS = {
    # RLinf's names for how components share devices; each recipe's cluster.component_placement is one of
    # them, the GPU recipes' on 8 devices. Four devices show the same sharing with fewer worker processes.
    "collocated, 1 device": ({"env,rollout,actor": 0}, 1),
    "the CPU recipes' two env processes, 1 device": ({"env": "0:0-1", "rollout": 0, "actor": 0}, 1),
    "collocated, 4 devices": ({"env,rollout,actor": "0-3"}, 4),
    "disaggregated, 4 devices": ({"env": 0, "rollout": "1-2", "actor": 3}, 4),
    "hybrid, 4 devices": ({"actor": "0-3", "env": "0-1", "rollout": "2-3"}, 4),
}


@given(st.integers(min_value=1, max_value=256))
def test_the_shares_of_a_device_never_add_up_past_one_gpu(processes):
    share = gpu_share(processes)
    assert 0 < share <= 1 / processes and share * processes <= 1.0
    assert processes * (share + 1e-4) > 1.0 - 1e-9  # rounded down by less than Ray's step


def test_a_device_counts_the_processes_of_every_component():
    placed = parse_component_placement({"actor": "0-7", "env": "0-3", "rollout": "4-7"})
    assert processes_per_device(placed.values()) == {device: 2 for device in range(8)}
    placed = parse_component_placement({"env": "0:0-1", "rollout": 0, "actor": 0})
    assert processes_per_device([*placed.values(), [(0,)]]) == {0: 5}  # an evaluation env worker too


class ReportsItsGpu(WorkerProcess):
    def gpu(self) -> tuple[list[str], float]:
        context = ray.get_runtime_context()
        return context.get_accelerator_ids()["GPU"], context.get_assigned_resources().get("GPU", 0.0)


@pytest.fixture(scope="module")
def eight_logical_gpus(ray_for_the_session):
    """A Ray of its own that declares 8 GPUs on this machine (the session's embedded one has none)."""
    ray.shutdown()
    ray.init(num_cpus=2, num_gpus=8, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_starts_with_each_device_shared_by_its_processes(layout, eight_logical_gpus):
    placement, devices = LAYOUTS[layout]
    placed = parse_component_placement(placement, devices)
    gpus = place_on_gpus(placed, timeout=60)
    groups = [WorkerGroup(role, ReportsItsGpu, placed[role], [((), {})] * len(placed[role]), gpus)
              for role in COMPONENTS]
    try:
        for group in groups:
            group.identify(timeout=300)
        reports = {role: ray.get(group.call("gpu"), timeout=60) for role, group in zip(COMPONENTS, groups)}
    finally:
        for group in groups:
            group.kill()
        gpus.remove()
    sharing = processes_per_device(placed.values())
    gpu_of_device: dict[int, list[str]] = {}
    for role in COMPONENTS:
        for (device,), (gpu_ids, share) in zip(placed[role], reports[role]):
            assert share == pytest.approx(gpu_share(sharing[device])), (role, device)
            assert gpu_of_device.setdefault(device, gpu_ids) == gpu_ids, (role, device)
    assert len({tuple(ids) for ids in gpu_of_device.values()}) == devices  # one GPU per device


def gpus_free_within(count: int, seconds: float) -> bool:
    """Whether ``count`` GPUs are free in the cluster, waiting up to ``seconds`` for Ray to free them."""
    end = time.monotonic() + seconds
    while ray.available_resources().get("GPU", 0) != count and time.monotonic() < end:
        time.sleep(0.2)
    return ray.available_resources().get("GPU", 0) == count


def test_a_placement_the_cluster_cannot_hold_fails_in_time_naming_both(eight_logical_gpus):
    assert gpus_free_within(8, seconds=60)  # the layouts' groups are given back
    placed = parse_component_placement({"env,rollout,actor": "0-9"})
    with pytest.raises(RuntimeError, match=r"asks for 10 GPUs .* the cluster has 8 GPUs, 8 of them free"):
        place_on_gpus(placed, timeout=2)
    assert gpus_free_within(8, seconds=60)  # the bundles it asked for are given back


def test_a_process_spanning_devices_is_refused_on_gpus(eight_logical_gpus):
    placed = parse_component_placement({"env,rollout": "0-1", "actor": "0-1:0"})
    with pytest.raises(ValueError, match=r"each actor process runs on one device, got a process spanning "
                                         r"devices \[0, 1\]"):
        place_on_gpus(placed, timeout=2)


@pytest.mark.sim
@pytest.mark.slow
def test_the_cpu_recipe_trains_a_step_with_its_three_components_on_one_gpu(tmp_path, ray_for_the_session):
    """``metaworld_10_ppo_openpi_tiny`` places env, rollout and actor on device 0: on a Ray with one GPU each
    takes a third of it, and the workers, finding no CUDA, run on the CPU. (Last in the module: it replaces
    the module's Ray with one of a single GPU.)"""
    from vlarl_envs.testing import require_simulator

    require_simulator("metaworld")
    from vlarl_trainer.config import load_config
    from vlarl_trainer.metrics import read_metrics
    from vlarl_trainer.rl.runner import Trainer
    from vlarl_trainer.testing import SMALL_RUN

    ray.shutdown()
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, configure_logging=False)
    trainer = Trainer(load_config(["recipe=metaworld_10_ppo_openpi_tiny", *SMALL_RUN, "runner.max_steps=1",
                                   "cluster.start_timeout=300", f"runner.output_dir={tmp_path}", "runner.name=run"]))
    try:
        assert trainer.gpus.processes_per_device == {0: 3}
        results = trainer.run()
    finally:
        trainer.close()
    try:
        assert gpus_free_within(1, seconds=60)  # close gave the bundle back (Ray frees it asynchronously)
    finally:
        ray.shutdown()
    metrics = read_metrics(Path(results["run_dir"]) / "metrics.jsonl")
    assert math.isfinite(metrics[1]["train/critic/value_loss"])
