"""What a run survives: stop signals, a hung worker, a dying env process, a killed driver.

Each fault is injected into a tiny training run of MetaWorld reach-v3 with the settings of the reference
run (``vlarl_trainer.testing.REFERENCE_RUN``, which conftest.py trains once a session), so that a run that
survives its fault is compared with one that met none; the fault table of the trainer README lists what
these tests show.
"""

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from vlarl_envs.testing import require_simulator

require_simulator("metaworld")

import ray

from vlarl_trainer.config import load_config
from vlarl_trainer.metrics import read_metrics as read_logged
from vlarl_trainer.rl.cluster import WorkerHang
from vlarl_trainer.rl.runner import Trainer, auto_resumed_config, resumed_config
from vlarl_trainer.rl.stopping import RunStopped
from vlarl_trainer.testing import REFERENCE_RUN

pytestmark = [pytest.mark.sim, pytest.mark.slow, pytest.mark.xdist_group("ray_reference")]

EXITED_WITHIN = 20.0
"""Seconds every process of a run may outlive its end."""


def make_trainer(tmp_path, *overrides, name="run"):
    """A run with the reference run's settings and ``overrides``."""
    return Trainer(load_config([*REFERENCE_RUN, f"runner.output_dir={tmp_path}", f"runner.name={name}", *overrides]))


def read_metrics(run_dir) -> dict[int, dict]:
    return read_logged(Path(run_dir) / "metrics.jsonl")


def assert_same_training(expected: dict, got: dict) -> None:
    """Every logged figure but the timings and the restart count agrees."""
    for name, value in expected.items():
        if not name.startswith("time/") and name != "env/restarts":
            assert got[name] == pytest.approx(value, rel=1e-4, abs=1e-5), name


# ---------------------------------------------------------------------------------------------- in process


def crash_on_first_step(worker):
    """Make the env worker's process exit mid-rollout, as a simulator's segfault ends it."""
    def crash(*args, **kwargs):
        os._exit(1)

    worker.stages[0].envs[0].step = crash


def hang_in_step(worker):
    """Make the env worker's next step never return, as a simulator stuck in a contact solve."""
    def sleep_forever(*args, **kwargs):
        time.sleep(10**6)

    worker.stages[0].envs[0].step = sleep_forever


def test_a_crashed_env_worker_is_replaced_and_a_hung_one_stops_the_run_with_its_stack(tmp_path, embedded_ray,
                                                                                     reference_metrics):
    """Step 2's env worker exits mid-rollout: a new process replaces it and the step trains as the unbroken
    reference run's did. Step 3's env worker (the new one) then hangs in a step: the run stops within
    ``cluster.call_timeout`` with every worker's Python stack, and the checkpoint of step 2 loads."""
    broken = make_trainer(tmp_path, "cluster.call_timeout=15", name="broken")
    try:
        first_pid = json.loads((broken.run_dir / "workers.json").read_text())["env"][0]
        got = [broken.train_step(0)]
        ray.get(broken.env.workers[0].__ray_call__.remote(crash_on_first_step))
        got.append(broken.train_step(1))
        replaced_pid = json.loads((broken.run_dir / "workers.json").read_text())["env"][0]
        broken.save(2)

        ray.get(broken.env.workers[0].__ray_call__.remote(hang_in_step))
        started = time.perf_counter()
        with pytest.raises(WorkerHang) as hang:
            broken.train_step(2)
        assert time.perf_counter() - started < 15 + 30
    finally:
        broken.close()
    assert [metrics["env/restarts"] for metrics in got] == [0.0, 1.0]
    assert replaced_pid != first_pid and not psutil.pid_exists(first_pid)
    for step, have in enumerate(got, start=1):
        assert_same_training(reference_metrics[step], have)

    message = str(hang.value)
    assert "found no answer within 15 s" in message
    env_stack = message.split("--- env worker 0")[1].split("---")[0]
    assert "sleep_forever" in env_stack and "in step" in env_stack
    assert "--- actor worker 0" in message and "--- rollout worker 0" in message
    import vlarl_policies

    vlarl_policies.from_pretrained(broken.run_dir / "checkpoints" / "step_2" / "policy")


def test_sigterm_during_a_rollout_abandons_it_and_checkpoints_the_last_finished_step(tmp_path, embedded_ray):
    handler = signal.getsignal(signal.SIGTERM)
    trainer = make_trainer(tmp_path, "runner.save_interval=0")
    assert signal.getsignal(signal.SIGTERM) is not handler  # caught from the run's start

    def slow_down(worker):
        env = worker.stages[0].envs[0]
        step = env.step

        def slow_step(*args, **kwargs):
            time.sleep(5)
            return step(*args, **kwargs)

        env.step = slow_step

    ray.get(trainer.env.workers[0].__ray_call__.remote(slow_down))
    signalled = []

    def stop_during_the_second_rollout():
        while 1 not in (read_metrics(trainer.run_dir) if (trainer.run_dir / "metrics.jsonl").exists() else {}):
            time.sleep(0.1)
        time.sleep(2)  # the second step's rollout takes 10 s
        signalled.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGTERM)

    watcher = threading.Thread(target=stop_during_the_second_rollout, daemon=True)
    watcher.start()
    try:
        with pytest.raises(RunStopped) as stopped:
            trainer.run()
        waited = time.perf_counter() - signalled[0]
    finally:
        trainer.close()
    assert stopped.value.step == 1 and stopped.value.exit_code == 143
    assert stopped.value.checkpoint == trainer.run_dir / "checkpoints" / "step_1"
    assert waited < 6, f"the rollout's remaining 8 s were waited for ({waited:.1f} s)"
    assert sorted(read_metrics(trainer.run_dir)) == [1]
    assert signal.getsignal(signal.SIGTERM) is handler  # the run's handler is gone


def test_sigterm_while_the_workers_start_stops_the_run_before_its_first_step(tmp_path, embedded_ray):
    """The handler is in place from the run's start: a SIGTERM while its workers start (a scheduler that
    stops a job minutes into its start-up) neither kills the driver nor is lost; the run stops before
    training, with nothing to checkpoint."""
    started = threading.Event()

    def stop_while_starting():
        started.wait()
        time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_while_starting, daemon=True).start()
    config = load_config([*REFERENCE_RUN, f"runner.output_dir={tmp_path}", "runner.name=run"])
    started.set()
    trainer = Trainer(config)
    try:
        assert trainer.stop_signals.signum == signal.SIGTERM
        with pytest.raises(RunStopped) as stopped:
            trainer.run()
    finally:
        trainer.close()
    assert stopped.value.step == 0 and stopped.value.checkpoint is None and stopped.value.exit_code == 143
    assert not (trainer.run_dir / "checkpoints").exists() or not list((trainer.run_dir / "checkpoints").iterdir())


def test_resume_past_a_truncated_checkpoint_replays_from_the_intact_one(tmp_path, embedded_ray, reference_run,
                                                                      reference_metrics, capsys):
    """The finished reference run, its last checkpoint cut short, resumed with a later ``runner.max_steps``:
    it replays step 3 from step 2's checkpoint as the unbroken run trained it, then goes on to step 4."""
    from vlarl_trainer.rl import checkpoint as checkpoints

    run_dir = shutil.copytree(reference_run, tmp_path / "run")
    weights = run_dir / "checkpoints" / "step_3" / "policy" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # a copy cut short: safetensors' "invalid header length"
    resumed = Trainer(resumed_config(str(run_dir), ["runner.max_steps=4"]))
    try:
        assert resumed.start_step == 2
        resumed.run()
    finally:
        resumed.close()
    assert "checkpoint step_3 is damaged (policy/model.safetensors has 1000 bytes" in capsys.readouterr().out
    assert (run_dir / "checkpoints" / "step_3.damaged").exists()
    assert checkpoints.damage(run_dir / "checkpoints" / "step_3") == []
    replayed = read_metrics(run_dir)
    assert sorted(replayed) == [1, 2, 3, 4] and "eval/success_once" in replayed[4]
    # The reference run scored its last step, 3; this one scores its own last, 4.
    trained = {name: value for name, value in reference_metrics[3].items() if not name.startswith("eval/")}
    assert_same_training(trained, replayed[3])


def test_a_run_stopped_before_its_first_checkpoint_resumes_from_its_first_policy(tmp_path, embedded_ray,
                                                                                 reference_run, reference_metrics):
    run_dir = shutil.copytree(reference_run, tmp_path / "run")
    shutil.rmtree(run_dir / "checkpoints")  # killed after logging its steps, before any checkpoint landed
    resumed = Trainer(resumed_config(str(run_dir), []))
    try:
        assert resumed.start_step == 0
        resumed.run()
    finally:
        resumed.close()
    replayed = read_metrics(run_dir)
    for step in range(1, 4):
        assert_same_training(reference_metrics[step], replayed[step])


def test_limits_are_checked_before_any_worker_starts(tmp_path):
    for setting, expected in [("cluster.call_timeout=0", "cluster.call_timeout must be > 0 seconds or null"),
                              ("cluster.start_timeout=-1", "cluster.start_timeout must be > 0 seconds"),
                              ("cluster.max_env_restarts=-1", "cluster.max_env_restarts must be >= 0")]:
        with pytest.raises(ValueError, match=expected):
            make_trainer(tmp_path, setting)


def test_resume_auto_starts_the_run_its_name_does_not_find(tmp_path):
    """A resubmitted script's first submission: no run directory yet, so a fresh run with its settings."""
    config = load_config([*REFERENCE_RUN, f"runner.output_dir={tmp_path}", "runner.name=fresh", "resume=auto"])
    fresh = auto_resumed_config(config, [])
    assert fresh.resume is None and dataclasses.replace(fresh, resume="auto") == config
    with pytest.raises(ValueError, match="set runner.name=<name>"):
        auto_resumed_config(dataclasses.replace(config, runner=dataclasses.replace(config.runner, name=None)), [])


# ------------------------------------------------------------------------------------------ whole commands


def command(tmp_path, name, *overrides):
    """``vlarl-train`` with the reference run's settings and ``overrides``."""
    return [sys.executable, "-m", "vlarl_trainer", *REFERENCE_RUN, f"runner.output_dir={tmp_path}",
            f"runner.name={name}", *overrides]


def start(arguments) -> subprocess.Popen:
    return subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_step(process: subprocess.Popen, run_dir: Path, step: int) -> None:
    """Until the run has logged training step ``step``."""
    deadline = time.time() + 600
    while True:
        metrics = run_dir / "metrics.jsonl"
        if metrics.exists() and step in read_metrics(run_dir):
            return
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.time() < deadline, f"step {step} not logged within 10 minutes"
        time.sleep(0.2)


def descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def assert_all_gone(processes: list[psutil.Process]) -> None:
    _, alive = psutil.wait_procs(processes, timeout=EXITED_WITHIN)
    assert not alive, f"left running: {[(p.pid, p.name()) for p in alive]}"


def wait_for_new_workers(process: subprocess.Popen, run_dir: Path, old: dict) -> None:
    """Until the run's workers.json names other worker processes than ``old``: the new process's workers
    have started."""
    deadline = time.time() + 600
    while True:
        with contextlib.suppress(json.JSONDecodeError):  # read while the run rewrites it
            if json.loads((run_dir / "workers.json").read_text()) != old:
                return
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.time() < deadline, "no new workers within 10 minutes"
        time.sleep(0.2)


def test_sigterm_and_a_killed_driver_leave_no_process_and_resume_auto_trains_as_an_unbroken_run(
        tmp_path, reference_metrics):
    """One command submitted three times, as a cluster's scheduler resubmits a job script: stopped by SIGTERM
    to every process of it at once (as SLURM stops a job: the driver, Ray's GCS, raylet and agents, the
    workers) during a step, then killed (SIGKILL, no handler) once its workers run, then left to finish.
    It saves no checkpoint of its own accord, so the one the stop leaves is written after the signal."""
    run_dir = tmp_path / "run"
    arguments = command(tmp_path, "run", "resume=auto", "runner.save_interval=0")

    process = start(arguments)
    wait_for_step(process, run_dir, 1)
    processes = descendants(process.pid)
    for signalled in [process, *processes]:
        with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
            signalled.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr[-3000:]
    stopped_after = int(stderr.split("stopped by SIGTERM after step ")[1].split(";")[0])
    assert stopped_after in (1, 2)  # the rollout of step 2 is abandoned, its update finished
    assert sorted(path.name for path in (run_dir / "checkpoints").iterdir()) == [f"step_{stopped_after}"]
    assert (run_dir / "checkpoints" / f"step_{stopped_after}" / "trainer_state.json").exists()
    assert f"continue with: vlarl-train resume={run_dir}" in stderr
    assert_all_gone(processes)

    stopped_workers = json.loads((run_dir / "workers.json").read_text())
    process = start(arguments)
    wait_for_new_workers(process, run_dir, stopped_workers)
    processes = descendants(process.pid)
    assert len(processes) >= 4  # Ray's own processes, the env, rollout and actor workers, the watcher
    process.kill()
    process.communicate()
    assert_all_gone(processes)

    finished = subprocess.run(arguments, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert f"resume=auto: continuing {run_dir}" in finished.stdout
    got = read_metrics(run_dir)
    assert sorted(got) == sorted(reference_metrics) == [1, 2, 3]
    for step, expected in reference_metrics.items():
        assert_same_training(expected, got[step])


def test_killed_env_worker_past_the_limit_stops_the_run_and_keeps_its_checkpoint(tmp_path):
    process = start(command(tmp_path, "killed", "runner.max_steps=200", "cluster.max_env_restarts=0"))
    run_dir = tmp_path / "killed"
    wait_for_step(process, run_dir, 1)
    processes = descendants(process.pid)
    env_pid = json.loads((run_dir / "workers.json").read_text())["env"][0]
    os.kill(env_pid, signal.SIGKILL)
    killed_at = time.time()
    _, stderr = process.communicate(timeout=180)
    assert process.returncode == 1, stderr[-3000:]
    assert time.time() - killed_at < 120
    assert "env worker 0 died 1 times in one rollout, past cluster.max_env_restarts=0" in stderr
    assert f"(continue with resume={run_dir})" in stderr
    assert_all_gone(processes)
    import vlarl_policies

    vlarl_policies.from_pretrained(run_dir / "checkpoints" / "step_1" / "policy")
