"""Checkpoints under ``<run>/checkpoints/step_N``: written to a temporary name, made durable, then renamed.

Every file and folder of a checkpoint is fsynced before the rename and the ``checkpoints`` folder after
it, so a power loss leaves either the whole checkpoint or none under its name; older checkpoints that
``keep_last`` prunes go only once the new one is durable. ``trainer_state.json`` records the size and
SHA-256 of every other file, so a resume can tell a checkpoint that a full disk, a killed copy or a flaky
file system damaged after the rename (a truncated ``model.safetensors`` ends in safetensors' "invalid
header length") from an intact one; intact also means that the policy and the actor state are among
them. ``latest_intact_checkpoint`` moves a damaged one aside, to ``step_N.damaged`` (kept for
inspection, never deleted or overwritten), and returns the newest intact one, so the run writes that
step anew.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from vlarl_trainer.run_dirs import fsync_directory, fsync_file

STEP_DIR = re.compile(r"step_(\d+)$")
STATE_FILE = "trainer_state.json"
CHUNK_BYTES = 1 << 22
REQUIRED_FILES = ("policy/config.json", "actor_state.pt")
"""What every checkpoint holds: the saved policy and the optimizer's and scheduler's state."""


def write_checkpoint(run_dir: Path, step: int, write: Callable[[Path], None], state: dict,
                     keep_last: int = 0) -> Path:
    """``write(tmp)`` fills a temporary folder, ``trainer_state.json`` (``state`` plus the files' sizes and
    checksums) is added, then it is renamed; with ``keep_last`` > 0 only that many of the newest
    checkpoints stay."""
    root = run_dir / "checkpoints"
    root.mkdir(exist_ok=True)
    target = checkpoint_dir(run_dir, step)
    if target.exists():
        raise FileExistsError(f"checkpoint {target} exists already; checkpoints are never overwritten")
    partial = root / f".step_{step}.partial"
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir()
    write(partial)
    files = {path.relative_to(partial).as_posix(): file_record(path)
             for path in sorted(partial.rglob("*")) if path.is_file()}
    (partial / STATE_FILE).write_text(json.dumps({"step": step, **state, "files": files}, indent=2))
    for path in sorted(partial.rglob("*"), reverse=True):  # files before the folders holding them
        (fsync_file if path.is_file() else fsync_directory)(path)
    fsync_directory(partial)
    os.replace(partial, target)
    fsync_directory(root)
    if keep_last > 0:
        for _, old in complete_checkpoints(run_dir)[:-keep_last]:
            shutil.rmtree(old)
    return target


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    """Where the checkpoint of training step ``step`` lives (or will)."""
    return run_dir / "checkpoints" / f"step_{step}"


def file_record(path: Path) -> dict:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(CHUNK_BYTES):
            digest.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def complete_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of every renamed checkpoint with its trainer_state.json, oldest first."""
    root = run_dir / "checkpoints"
    if not root.exists():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_DIR.match(p.name))]
    return sorted((step, p) for step, p in found if (p / STATE_FILE).exists())


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The complete checkpoint with the highest step (partial ones are ignored), unverified."""
    found = complete_checkpoints(run_dir)
    return found[-1][1] if found else None


def damage(checkpoint: Path) -> list[str]:
    """What is wrong with a checkpoint's files against its trainer_state.json (empty: intact). A
    checkpoint whose state records no files (vlarl-trainer before 0.17) or not ``REQUIRED_FILES`` is
    damaged: nothing proves it whole."""
    try:
        recorded = read_state(checkpoint).get("files")
    except (OSError, ValueError) as error:
        return [f"{STATE_FILE} unreadable ({error})"]
    if recorded is None:
        return [f"{STATE_FILE} records no files"]
    problems = [f"{name} not recorded" for name in REQUIRED_FILES if name not in recorded]
    for name, record in recorded.items():
        path = checkpoint / name
        if not path.is_file():
            problems.append(f"{name} missing")
        elif path.stat().st_size != record["bytes"]:
            problems.append(f"{name} has {path.stat().st_size} bytes, {record['bytes']} written")
        elif file_record(path)["sha256"] != record["sha256"]:
            problems.append(f"{name} differs from its checksum")
    return problems


def latest_intact_checkpoint(run_dir: Path, report: Callable[[str], None] = print) -> Path | None:
    """The newest checkpoint whose files match their checksums; each damaged one newer than it is
    moved aside to ``step_N.damaged`` (``step_N.damaged-2``, ... when that name is taken) and named
    through ``report``."""
    for step, checkpoint in reversed(complete_checkpoints(run_dir)):
        problems = damage(checkpoint)
        if not problems:
            return checkpoint
        aside = checkpoint.with_name(f"{checkpoint.name}.damaged")
        attempt = 1
        while aside.exists():
            attempt += 1
            aside = checkpoint.with_name(f"{checkpoint.name}.damaged-{attempt}")
        checkpoint.rename(aside)
        report(f"checkpoint step_{step} is damaged ({'; '.join(problems)}): moved aside to {aside}, "
               "continuing from the newest intact one before it")
    return None


def read_state(checkpoint: Path) -> dict:
    return json.loads((checkpoint / STATE_FILE).read_text())
