"""Run directories are created, never reused: a finished or interrupted run stays as it is.

Every command makes its run directory here: vlarl-sft, vlarl-train and vlarl-main-job under
``runner.output_dir``, named ``runner.name`` or ``<stem>-<time>``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def fsync_file(path: Path) -> None:
    """Flush ``path``'s content to the disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def fsync_directory(path: Path) -> None:
    """Flush ``path``'s entries (names created, renamed or removed in it) to the disk."""
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_atomically(path: Path, text: str) -> None:
    """``path`` holds ``text`` whole or keeps what it held: written under a temporary name, fsynced, renamed,
    and the rename fsynced, so neither a crash nor a power loss leaves it half-written."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    fsync_file(partial)
    os.replace(partial, path)
    fsync_directory(path.parent)


def run_exists_error(run_dir: Path, hint: str) -> FileExistsError:
    """The error for a run directory that exists already; ``hint`` says what to do instead."""
    return FileExistsError(f"run directory {run_dir} exists already; {hint}")


def make_run_dir(run_dir: Path, hint: str) -> Path:
    """Create ``run_dir`` (and its parents), or raise ``run_exists_error`` if it exists."""
    try:
        run_dir.mkdir(parents=True)
    except FileExistsError:
        raise run_exists_error(run_dir, hint) from None
    return run_dir


def check_run_name(name: str | None) -> None:
    """A ValueError unless ``runner.name`` is empty or one folder name, so the run stays inside
    ``runner.output_dir`` (``../x``, ``a/b`` and absolute paths would put it elsewhere)."""
    if name and (name in (".", "..") or "/" in name or "\\" in name):
        raise ValueError(f"runner.name: expected one folder name inside runner.output_dir, got {name!r}")


def run_dir_path(output_dir: str | Path, name: str | None, stem: str) -> Path:
    """``<output_dir>/<name>``, or ``<output_dir>/<stem>-<YYYYmmdd-HHMMSS>`` when no name is given."""
    check_run_name(name)
    return Path(output_dir) / (name or f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}")


def new_run_dir(output_dir: str | Path, name: str | None, stem: str, hint: str) -> Path:
    """A fresh run directory at ``run_dir_path``; an existing one is an error carrying ``hint``."""
    return make_run_dir(run_dir_path(output_dir, name, stem), hint)
