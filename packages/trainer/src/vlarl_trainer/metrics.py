"""Metric sinks: metrics.jsonl always, TensorBoard and W&B by config, a progress bar with ETA."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

LOGGERS = ("tensorboard", "wandb")


def logged_seconds(metrics_path: Path) -> dict[int, float]:
    """Step -> the seconds its training step and its evaluation (if any) took, as metrics.jsonl logged them.

    A run resumed from a checkpoint logs the steps after that checkpoint again, so a step's later line
    wins: a replayed step counts once, with the time of the run that kept it."""
    step_seconds: dict[int, float] = {}
    eval_seconds: dict[int, float] = {}
    for line in metrics_path.read_text().splitlines():
        entry = json.loads(line)
        if "time/step" in entry:
            step_seconds[int(entry["step"])] = float(entry["time/step"])
        if "time/eval" in entry:
            eval_seconds[int(entry["step"])] = float(entry["time/eval"])
    return {step: step_seconds.get(step, 0.0) + eval_seconds.get(step, 0.0)
            for step in step_seconds.keys() | eval_seconds.keys()}


class MetricLogger:
    def __init__(self, run_dir: Path, backends: list[str], config: dict[str, Any], total_steps: int,
                 start_step: int, progress: bool) -> None:
        unknown = [b for b in backends if b not in LOGGERS]
        if unknown:
            raise ValueError(f"runner.logger: unknown backend(s) {unknown}; expected any of {list(LOGGERS)}")
        self.jsonl = open(run_dir / "metrics.jsonl", "a", encoding="utf-8")
        self.tensorboard = None
        if "tensorboard" in backends:
            from torch.utils.tensorboard import SummaryWriter

            self.tensorboard = SummaryWriter(str(run_dir / "tensorboard"))
        self.wandb = None
        if "wandb" in backends:
            import wandb

            os.environ.setdefault("WANDB_MODE", "offline")
            self.wandb = wandb.init(dir=str(run_dir), config=config, name=run_dir.name, resume="allow", id=run_dir.name)
        self.progress = None
        if progress:
            from tqdm import tqdm

            self.progress = tqdm(total=total_steps, initial=start_step, desc="train", unit="step", dynamic_ncols=True)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        clean = {k: float(v) for k, v in metrics.items()}
        self.jsonl.write(json.dumps({"step": step, **clean}) + "\n")
        self.jsonl.flush()
        if self.tensorboard is not None:
            for name, value in clean.items():
                if math.isfinite(value):
                    self.tensorboard.add_scalar(name, value, step)
            self.tensorboard.flush()
        if self.wandb is not None:
            self.wandb.log(clean, step=step)

    def advance(self, summary: dict[str, float]) -> None:
        if self.progress is not None:
            self.progress.set_postfix({k.split("/")[-1]: f"{v:.3g}" for k, v in summary.items()}, refresh=False)
            self.progress.update(1)

    def close(self) -> None:
        self.jsonl.close()
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.wandb is not None:
            self.wandb.finish()
        if self.progress is not None:
            self.progress.close()


def truncate_metrics(path: Path, last_step: int) -> None:
    """Keep the lines of steps <= last_step (a resumed run re-runs the steps after its checkpoint)."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if json.loads(line)["step"] <= last_step]
    partial = path.with_suffix(".partial")
    partial.write_text("".join(line + "\n" for line in kept))
    os.replace(partial, path)
