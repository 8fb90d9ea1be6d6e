"""Checkpoints under ``<run>/checkpoints/step_N``: written to a temporary name, then renamed."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

STEP_DIR = re.compile(r"step_(\d+)$")


def write_checkpoint(run_dir: Path, step: int, write: Callable[[Path], None], state: dict) -> Path:
    """``write(tmp)`` fills a temporary folder, ``trainer_state.json`` is added, then it is renamed."""
    root = run_dir / "checkpoints"
    root.mkdir(exist_ok=True)
    target = root / f"step_{step}"
    if target.exists():
        raise FileExistsError(f"checkpoint {target} exists already; checkpoints are never overwritten")
    partial = root / f".step_{step}.partial"
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir()
    write(partial)
    (partial / "trainer_state.json").write_text(json.dumps({"step": step, **state}, indent=2))
    os.replace(partial, target)
    return target


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The complete checkpoint with the highest step (partial ones are ignored)."""
    root = run_dir / "checkpoints"
    if not root.exists():
        return None
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_DIR.match(p.name))]
    found = [(step, p) for step, p in found if (p / "trainer_state.json").exists()]
    return max(found)[1] if found else None


def read_state(checkpoint: Path) -> dict:
    return json.loads((checkpoint / "trainer_state.json").read_text())
