"""Worker stack dumps (``workers.process``): a private directory, no link followed, and the dump itself; the
private rendezvous files of the actor ranks."""

from __future__ import annotations

import faulthandler
import os
import stat
import subprocess
import sys
import tempfile

import pytest

from vlarl_trainer.rl.workers.process import STACK_SIGNAL, WorkerProcess, stack_file


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    return tmp_path


def test_dumps_go_to_a_directory_of_this_user_alone(temp_root):
    directory = os.path.dirname(stack_file(123))
    info = os.lstat(directory)
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()
    assert stack_file(123) == os.path.join(directory, "123.txt")


def test_a_directory_open_to_others_is_refused(temp_root):
    shared = temp_root / f"vlarl-stacks-{os.getuid()}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(PermissionError, match="expected a directory of this user alone.*drwxrwxrwx"):
        stack_file(123)


def test_a_planted_link_is_not_followed(temp_root):
    victim = temp_root / "victim.txt"
    victim.write_text("kept")
    os.symlink(victim, stack_file(os.getpid()))
    with pytest.raises(OSError):
        WorkerProcess().enable_stack_dumps()
    assert victim.read_text() == "kept"


def test_the_signal_writes_this_process_stacks(temp_root):
    worker = WorkerProcess()
    worker.enable_stack_dumps()
    try:
        os.kill(os.getpid(), STACK_SIGNAL)
        worker._stack_output.flush()
    finally:
        faulthandler.unregister(STACK_SIGNAL)
        worker._stack_output.close()
    dump = open(stack_file(os.getpid())).read()
    assert "test_the_signal_writes_this_process_stacks" in dump


def test_a_local_rendezvous_is_a_new_file_of_this_user_alone_gone_at_exit(tmp_path):
    """Actor ranks of one machine meet in a file (no port): a new name in a private directory each time,
    removed when the process that chose it exits."""
    script = (f"import pathlib, tempfile; tempfile.gettempdir = lambda: {str(tmp_path)!r}\n"
              "from vlarl_trainer.rl.workers.process import local_rendezvous\n"
              "first, second = local_rendezvous(), local_rendezvous()\n"
              "pathlib.Path(first.removeprefix('file://')).write_text('store')\n"
              "print(first, second)")
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    first, second = shown.stdout.split()
    assert first.startswith("file://") and first != second
    directory = os.path.dirname(first.removeprefix("file://"))
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert os.listdir(directory) == []
