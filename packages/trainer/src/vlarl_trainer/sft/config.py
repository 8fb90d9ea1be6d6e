"""The settings of one ``vlarl-sft`` run, and the run directory they are saved in."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vlarl_trainer.run_dirs import make_run_dir


@dataclass
class SFTConfig:
    """Supervised pre-training of a policy on a LeRobot dataset, then success evaluation."""

    dataset: str
    run_dir: str | None = None
    """Where logs and checkpoints go; default ``<runs_root>/sft-<time>``. Never an existing directory."""
    runs_root: str = "runs"

    # The policy: a fresh ``vlarl_policies.make(policy, preset, **policy_overrides)``, or a saved one.
    policy: str = "pi0"
    preset: str = "tiny"
    policy_overrides: dict[str, Any] = field(default_factory=dict)
    checkpoint: str | None = None

    # Optimisation: AdamW, linear warm-up then cosine decay to lr * final_lr_fraction.
    steps: int = 2000
    batch_size: int = 32
    lr: float = 3e-4
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.95)
    warmup_steps: int = 100
    final_lr_fraction: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    log_every: int = 50
    threads: int = 1

    # Evaluation: episode ids 0..eval_episodes-1 of eval_split for every task of the dataset.
    eval_episodes: int = 10
    eval_split: str = "test"
    eval_envs: int = 4
    eval_horizon: int | None = None

    def __post_init__(self) -> None:
        positive = ("steps", "batch_size", "log_every", "threads", "eval_envs")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.warmup_steps < 0 or self.eval_episodes < 0:
            raise ValueError(f"warmup_steps and eval_episodes must be >= 0, got {self.warmup_steps}, {self.eval_episodes}")
        if not 0 <= self.final_lr_fraction <= 1:
            raise ValueError(f"final_lr_fraction must be in [0, 1], got {self.final_lr_fraction}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def create_run_dir(config: SFTConfig) -> Path:
    """A new directory for this run: ``config.run_dir`` if given (it must not exist), else a fresh name."""
    if config.run_dir is not None:
        return make_run_dir(Path(config.run_dir), "runs never overwrite each other")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for attempt in range(100):
        run_dir = Path(config.runs_root) / (f"sft-{stamp}" + (f"-{attempt}" if attempt else ""))
        try:
            run_dir.mkdir(parents=True)
            return run_dir
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a fresh run directory under {config.runs_root}")


def save_config(config: SFTConfig, run_dir: Path) -> None:
    (run_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
