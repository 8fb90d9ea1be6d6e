"""No orphans: a watcher process that ends a run's processes when the driver dies without cleaning up.

A driver killed with SIGKILL (the OOM killer, a scheduler past its grace period) cannot shut Ray
down; its workers go soon after, but Ray's agents stay for minutes, holding memory and ports. The
watcher is started by the driver in a session of its own, learns the driver's process tree every
``POLL_SECONDS``, and when the driver is gone terminates every process it has seen (SIGTERM, then
SIGKILL after ``GRACE_SECONDS``). It exits when its driver does, or when the run closes it.

    python -m vlarl_trainer.rl.reaper <driver pid>
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

POLL_SECONDS = 0.5
GRACE_SECONDS = 3.0


def start_reaper() -> subprocess.Popen:
    """The watcher of this process (close it with ``stop_reaper`` when the run shuts down itself)."""
    return subprocess.Popen([sys.executable, "-m", "vlarl_trainer.rl.reaper", str(os.getpid())],
                            start_new_session=True, stdin=subprocess.DEVNULL)


def stop_reaper(reaper: subprocess.Popen) -> None:
    reaper.terminate()
    reaper.wait(timeout=10)


def watch(driver_pid: int) -> None:
    """Learn the driver's descendants until it dies, then end them."""
    try:
        driver = psutil.Process(driver_pid)
    except psutil.NoSuchProcess:
        return
    seen: dict[int, psutil.Process] = {}
    myself = psutil.Process().pid
    while True:
        try:
            if driver.status() == psutil.STATUS_ZOMBIE:
                break
            for child in driver.children(recursive=True):
                if child.pid != myself:
                    seen.setdefault(child.pid, child)
        except psutil.NoSuchProcess:
            break
        time.sleep(POLL_SECONDS)
    # Processes started by the ones seen after the last poll (a worker's own children) go too.
    for process in list(seen.values()):
        try:
            for child in process.children(recursive=True):
                seen.setdefault(child.pid, child)
        except psutil.NoSuchProcess:
            continue
    end(list(seen.values()))


def end(processes: list[psutil.Process]) -> None:
    """SIGTERM, then SIGKILL to those still running after ``GRACE_SECONDS``; psutil checks each
    process's start time first, so a reused pid is never signalled."""
    for process in processes:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(processes, timeout=GRACE_SECONDS)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass


if __name__ == "__main__":
    watch(int(sys.argv[1]))
