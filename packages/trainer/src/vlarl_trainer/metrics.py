"""Metric sinks (metrics.jsonl always, TensorBoard and W&B by config, a progress bar with ETA) and the
one reader of metrics.jsonl, which the trainer, the main job and the scripts all use."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from vlarl_trainer.progress import progress_bar
from vlarl_trainer.run_dirs import write_atomically

LOGGERS = ("tensorboard", "wandb")


def check_loggers(backends: list[str]) -> None:
    """A ValueError naming the ``runner.logger`` entries that are not in ``LOGGERS``."""
    unknown = [backend for backend in backends if backend not in LOGGERS]
    if unknown:
        raise ValueError(f"runner.logger: unknown backend(s) {unknown}; expected any of {list(LOGGERS)}")


def metric_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a metrics.jsonl as written: ``{"step": N, name: value, ...}``."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def read_metrics(path: Path) -> dict[int, dict[str, float]]:
    """Step -> every metric logged at that step (a step's training and evaluation lines merged).

    A run resumed from a checkpoint logs the steps after that checkpoint again, so a later line's
    value of a metric wins: a replayed step counts once, with the values of the run that kept it."""
    merged: dict[int, dict[str, float]] = {}
    for line in metric_lines(path):
        step = int(line["step"])
        merged.setdefault(step, {}).update({name: value for name, value in line.items() if name != "step"})
    return dict(sorted(merged.items()))


def logged_seconds(metrics_path: Path) -> dict[int, float]:
    """Step -> the seconds its training step and its evaluation (if any) took, as metrics.jsonl logged them
    (a replayed step with the time of the run that kept it)."""
    return {step: float(logged.get("time/step", 0.0)) + float(logged.get("time/eval", 0.0))
            for step, logged in read_metrics(metrics_path).items() if "time/step" in logged or "time/eval" in logged}


class MetricLogger:
    def __init__(self, run_dir: Path, backends: list[str], config: dict[str, Any], total_steps: int,
                 start_step: int, progress: bool, wandb_project: str = "vlarl", wandb_name: str | None = None,
                 stage: str = "rl") -> None:
        check_loggers(backends)
        self.jsonl = open(run_dir / "metrics.jsonl", "a", encoding="utf-8")
        self.tensorboard = None
        if "tensorboard" in backends:
            from torch.utils.tensorboard import SummaryWriter

            self.tensorboard = SummaryWriter(str(run_dir / "tensorboard"))
        self.wandb = None
        if "wandb" in backends:
            import wandb

            os.environ.setdefault("WANDB_MODE", "offline")
            self.wandb = wandb.init(dir=str(run_dir), config=config, project=wandb_project,
                                    name=wandb_name or run_dir.name, resume="allow", id=run_dir.name)
        self.progress = progress_bar(total_steps, stage, "step", progress, initial=start_step)

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

    def advance(self, summary: dict[str, float] | None = None) -> None:
        """One step done; ``summary`` (e.g. the latest loss or success) shows beside the bar."""
        if summary:
            self.progress.set_postfix({k.split("/")[-1]: f"{v:.3g}" for k, v in summary.items()}, refresh=False)
        self.progress.update(1)

    def close(self) -> None:
        self.jsonl.close()
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.wandb is not None:
            self.wandb.finish()
        self.progress.close()


def truncate_metrics(path: Path, last_step: int) -> None:
    """Keep the lines of steps <= last_step (a resumed run re-runs the steps after its checkpoint)."""
    if not path.exists():
        return
    kept = [line for line in metric_lines(path) if line["step"] <= last_step]
    write_atomically(path, "".join(json.dumps(line) + "\n" for line in kept))
