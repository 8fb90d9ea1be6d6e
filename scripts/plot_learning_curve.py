"""Plot a learning curve from the trainer's metrics.jsonl files: one thin line per run, their mean in bold.

    uv run --locked python scripts/plot_learning_curve.py runs/main-full-flow-sde-seed*/ --out curve.png
    uv run --locked python scripts/plot_learning_curve.py runs/a/metrics.jsonl --metric eval/success_once

Each argument is a metrics.jsonl, a vlarl-train run directory, or a vlarl-main-job run directory
(its rl/metrics.jsonl). The default metric, ``env/success_once``, is the success rate of each
training step's rollouts; the mean is taken over the steps every run logged.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from vlarl_trainer.plots import plot_curves, read_curve


def metrics_file(path: Path) -> Path:
    """The metrics.jsonl a path names: the file itself, a trainer run's, or a main job's RL run's."""
    for candidate in (path, path / "metrics.jsonl", path / "rl" / "metrics.jsonl"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no metrics.jsonl at {path}, {path / 'metrics.jsonl'} or {path / 'rl' / 'metrics.jsonl'}")


def run_name(path: Path) -> str:
    """The run folder's name: a main job's for its rl/metrics.jsonl, else the folder holding the file."""
    folder = path.parent
    return folder.parent.name if folder.name == "rl" else folder.name


def run_label(path: Path) -> str:
    """``seed N`` from the run's config.yaml, else the run's name."""
    config = path.parent / "config.yaml"
    if config.is_file():
        return f"seed {yaml.safe_load(config.read_text())['runner']['seed']}"
    return run_name(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="metrics.jsonl files or run directories")
    parser.add_argument("--metric", default="env/success_once")
    parser.add_argument("--out", type=Path, default=Path("learning_curve.png"))
    args = parser.parse_args(argv)
    files = [metrics_file(path) for path in args.runs]
    curves = {}
    for path in files:
        label = run_label(path)
        curves[label if label not in curves else f"{label} ({run_name(path)})"] = read_curve(path, args.metric)
    print(plot_curves(curves, args.metric, args.out))


if __name__ == "__main__":
    main()
