"""How fast a tiny training run reacts to the faults of the trainer README's table, measured on real runs.

Each case starts ``vlarl-train`` (the tiny pi0 on MetaWorld reach-v3, two envs) in a subprocess,
waits until it has logged ``--after`` steps, injects the fault and times the reaction:

- SIGTERM: seconds from the signal to the process's exit, and its exit code (143);
- SIGKILL of the driver: seconds until every process of its tree (Ray's included) has ended;
- an env worker killed with SIGKILL: the time of the step that replaced it and replayed its
  rollout, as a ratio to the median step of the same run.

    uv run python benchmarks/fault_latency.py [--after 2] [--steps 6]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from vlarl_trainer.testing import SMALL_RUN

SMALL = ["recipe=metaworld_10_ppo_openpi_tiny", *SMALL_RUN]


def logged_steps(run_dir: Path) -> dict[int, dict]:
    path = run_dir / "metrics.jsonl"
    steps: dict[int, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            record = json.loads(line)
            steps.setdefault(record.pop("step"), {}).update(record)
    return steps


def start_run(output: Path, name: str, steps: int) -> tuple[subprocess.Popen, Path]:
    command = [sys.executable, "-m", "vlarl_trainer", *SMALL, f"runner.output_dir={output}", f"runner.name={name}",
               f"runner.max_steps={steps}", "runner.save_interval=1"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), output / name


def wait_for_step(process: subprocess.Popen, run_dir: Path, step: int) -> None:
    while step not in logged_steps(run_dir):
        if process.poll() is not None:
            raise RuntimeError(process.stderr.read()[-3000:])
        time.sleep(0.1)


def sigterm(output: Path, after: int, steps: int) -> str:
    process, run_dir = start_run(output, "sigterm", steps)
    wait_for_step(process, run_dir, after)
    signalled = time.perf_counter()
    process.send_signal(signal.SIGTERM)
    process.wait()
    return f"SIGTERM -> exit {process.returncode} in {time.perf_counter() - signalled:.1f} s"


def sigkill_driver(output: Path, after: int, steps: int) -> str:
    process, run_dir = start_run(output, "sigkill", steps)
    wait_for_step(process, run_dir, after)
    tree = psutil.Process(process.pid).children(recursive=True)
    killed = time.perf_counter()
    process.kill()
    process.wait()
    gone, alive = psutil.wait_procs(tree, timeout=120)
    left = f", {len(alive)} still running after 120 s" if alive else ""
    return (f"SIGKILL of the driver -> all {len(tree)} processes of its tree gone in "
            f"{time.perf_counter() - killed:.1f} s{left}")


def killed_env_worker(output: Path, after: int, steps: int) -> str:
    process, run_dir = start_run(output, "env-kill", steps)
    wait_for_step(process, run_dir, after)
    os.kill(json.loads((run_dir / "workers.json").read_text())["env"][0], signal.SIGKILL)
    if process.wait() != 0:
        raise RuntimeError(process.stderr.read()[-3000:])
    steps_logged = logged_steps(run_dir)
    replaced = [step for step, metrics in steps_logged.items() if metrics.get("env/restarts")]
    others = [metrics["time/step"] for step, metrics in steps_logged.items() if step not in replaced and step > 1]
    seconds = steps_logged[replaced[0]]["time/step"]
    return (f"env worker killed -> replaced in step {replaced[0]}: {seconds:.1f} s against a median step of "
            f"{statistics.median(others):.1f} s ({seconds / statistics.median(others):.1f}x); run finished, exit 0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--after", type=int, default=2, help="steps logged before the fault")
    parser.add_argument("--steps", type=int, default=6, help="runner.max_steps of each run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for case in (sigterm, sigkill_driver, killed_env_worker):
            print(case(Path(folder), args.after, args.steps), flush=True)


if __name__ == "__main__":
    main()
