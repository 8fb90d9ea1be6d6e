"""Run directories are created, never reused: a finished or interrupted run stays as it is."""

from __future__ import annotations

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
