"""Two actor ranks on two Ray nodes: a local cluster of a head node and a second one joined to it
(``ray start`` twice on this machine, each with its own ports, temp dir and custom resource), and a
small run that joins it with ``cluster.address=auto``, as a user of ``ray start`` does, and trains two
steps across them.

The run is a script of its own (this file's ``__main__``) in a fresh interpreter, as a user's driver is:
a driver process that earlier tests connected to other Ray instances is no user's."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from vlarl_envs.testing import require_simulator

require_simulator("metaworld")

import ray

from vlarl_trainer.config import load_config
from vlarl_trainer.metrics import read_metrics
from vlarl_trainer.rl.cluster import free_port
from vlarl_trainer.rl.runner import Trainer
from vlarl_trainer.testing import SMALL_RUN

pytestmark = [pytest.mark.sim, pytest.mark.slow, pytest.mark.xdist_group("ray")]

NODE_START_SECONDS = 120
"""How long each ``ray start`` has to bring its node up on a busy two-core machine."""

NODE_START_ATTEMPTS = 2
"""How many times a node is started before the fixture gives up."""

NODE_UP = "will now block forever"
"""What ``ray start --block`` prints once its node is up."""

AUTH_MODE = {"RAY_AUTH_MODE": "disabled"}
"""One authentication mode for every node and the driver: left unset, ``ray start --head`` turns token
authentication on where ``~/.ray/auth_token`` exists (an earlier embedded Ray writes it) while a joining
``ray start --address`` keeps it off and is refused by the head."""


def node_ports() -> list[str]:
    """``ray start`` options that give a node's own processes ports of their own, so that neither node
    meets the other's, nor another Ray running on this machine."""
    return [f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
            f"--metrics-export-port={free_port()}", f"--runtime-env-agent-port={free_port()}"]


def start_node(arguments: list[str], temp_dir: str, started: list[subprocess.Popen]) -> None:
    """``ray start --block`` with ``arguments`` in a session of its own, recorded in ``started`` at once
    (so that teardown finds it even if it never comes up); returns when the node is up.

    A node whose raylet does not register with the GCS within Ray's fixed 30 s (a busy two-core machine
    running other tests' Rays) exits with "timed out during startup"; it is stopped and started once more."""
    output: list[str] = []
    for _ in range(NODE_START_ATTEMPTS):
        process = launch_node(arguments, temp_dir)
        started.append(process)
        output = node_start_output(process)
        if output and NODE_UP in output[-1]:
            return
        stop_nodes([process])
        started.remove(process)
    raise RuntimeError(f"ray start {' '.join(arguments)} did not come up in {NODE_START_ATTEMPTS} attempts; the "
                       f"last one said:\n{''.join(output)}")


def launch_node(arguments: list[str], temp_dir: str) -> subprocess.Popen:
    """The ``ray start --block`` process of one node, its output piped."""
    ray_cli = str(Path(sys.executable).parent / "ray")
    return subprocess.Popen(
        [ray_cli, "start", "--block", "--num-cpus=1", "--object-store-memory=200000000", "--disable-usage-stats",
         f"--temp-dir={temp_dir}", *node_ports(), *arguments],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, **AUTH_MODE})


def node_start_output(process: subprocess.Popen) -> list[str]:
    """The lines ``ray start`` printed until it said the node is up, exited, or ``NODE_START_SECONDS``
    passed."""
    deadline = time.monotonic() + NODE_START_SECONDS
    output = []
    for line in process.stdout:
        output.append(line)
        if NODE_UP in line or time.monotonic() > deadline:
            break
    return output


def stop_nodes(started: list[subprocess.Popen]) -> None:
    """Kill every process of the sessions the ``ray start`` commands in ``started`` lead, and their
    descendants (by pid: other Ray clusters on this machine keep running; by session too, so that a node
    whose ``ray start`` already exited leaves none of its GCS and raylet behind)."""
    leaders = {process.pid for process in started}
    members: dict[int, psutil.Process] = {}
    for candidate in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(candidate.pid) in leaders:
                members[candidate.pid] = candidate
    for leader in [members[pid] for pid in leaders if pid in members]:
        with contextlib.suppress(psutil.NoSuchProcess):
            members.update({child.pid: child for child in leader.children(recursive=True)})
    processes = list(members.values())
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(processes, timeout=10)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=10)


@pytest.fixture
def two_nodes():
    """The address of a head node with resource ``node_a`` and a second node with ``node_b`` joined to it;
    both are torn down, with their temp dir, whatever the test does. The run finds it through
    ``RAY_ADDRESS``, where ``auto`` looks first (the default temp dir's record may name another cluster of
    this machine)."""
    temp_dir = tempfile.mkdtemp(prefix="ray-two-nodes-", dir="/tmp")  # short: Ray's socket paths are limited
    started: list[subprocess.Popen] = []
    try:
        head = f"{ray.util.get_node_ip_address()}:{free_port()}"
        start_node(["--head", f"--port={head.rsplit(':', 1)[1]}", "--include-dashboard=false",
                    f"--ray-client-server-port={free_port()}", '--resources={"node_a": 1}'], temp_dir, started)
        start_node([f"--address={head}", '--resources={"node_b": 1}'], temp_dir, started)
        yield head
    finally:
        stop_nodes(started)
        shutil.rmtree(temp_dir, ignore_errors=True)


def train_on_the_cluster(run_dir: str) -> dict:
    """Join the cluster ``RAY_ADDRESS`` names with ``cluster.address=auto``, train two steps with one FSDP2
    actor rank per node (the second step's weights are gathered from both ranks for the rollout workers),
    and say where the ranks ran."""
    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny", *SMALL_RUN, "runner.max_steps=2",
                          "cluster.address=auto", "cluster.component_placement={actor: '0:0-1'}",
                          "actor.strategy=fsdp", f"runner.output_dir={run_dir}", "runner.name=run"])
    trainer = Trainer(config)
    try:
        joined = {"gcs_address": ray.get_runtime_context().gcs_address, "nodes": len(ray.nodes()),
                  "resources": sorted(ray.cluster_resources())}
        actor_nodes = trainer.actor.get(trainer.actor.call("node_id"))
        actor_pids = [pid for _, pid in trainer.actor.processes]
        trainer.run()
    finally:
        trainer.close()
    return {**joined, "actor_nodes": actor_nodes, "actor_pids": actor_pids, "driver_pid": os.getpid(),
            "run_dir": str(trainer.run_dir)}


def test_actor_ranks_train_on_two_nodes(two_nodes, tmp_path):
    script = subprocess.run([sys.executable, __file__, str(tmp_path)], capture_output=True, text=True, timeout=900,
                            env={**os.environ, **AUTH_MODE, "RAY_ADDRESS": two_nodes})
    assert script.returncode == 0, script.stderr[-5000:]
    run = json.loads(script.stdout.strip().splitlines()[-1])
    assert run["gcs_address"] == two_nodes, "auto joined another cluster"
    assert run["nodes"] == 2 and {"node_a", "node_b"} <= set(run["resources"])
    assert len(set(run["actor_nodes"])) == 2, f"both actor ranks ran on node {run['actor_nodes'][0]}"
    assert len(set(run["actor_pids"])) == 2 and run["driver_pid"] not in run["actor_pids"]
    metrics = read_metrics(Path(run["run_dir"]) / "metrics.jsonl")
    assert sorted(metrics) == [1, 2]
    assert all("train/loss" in metrics[step] for step in (1, 2)), metrics


if __name__ == "__main__":
    print(json.dumps(train_on_the_cluster(sys.argv[1])))
