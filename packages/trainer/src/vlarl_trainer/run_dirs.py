"""Run directories are created, never reused: a finished or interrupted run stays as it is.

Every command makes its run directory here: vlarl-sft, vlarl-train and vlarl-main-job under
``runner.output_dir``, named ``runner.name`` or ``<stem>-<time>``.
"""

from __future__ import annotations

import time
from pathlib import Path


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


def run_dir_path(output_dir: str | Path, name: str | None, stem: str) -> Path:
    """``<output_dir>/<name>``, or ``<output_dir>/<stem>-<YYYYmmdd-HHMMSS>`` when no name is given."""
    return Path(output_dir) / (name or f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}")


def new_run_dir(output_dir: str | Path, name: str | None, stem: str, hint: str) -> Path:
    """A fresh run directory at ``run_dir_path``; an existing one is an error carrying ``hint``."""
    return make_run_dir(run_dir_path(output_dir, name, stem), hint)
