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

import matplotlib

matplotlib.use("Agg")  # files only: no display on a training machine

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import numpy as np  # noqa: E402
import yaml  # noqa: E402

from vlarl_trainer.metrics import read_metrics  # noqa: E402


def metrics_file(path: Path) -> Path:
    """The metrics.jsonl a path names: the file itself, a trainer run's, or a main job's RL run's."""
    for candidate in (path, path / "metrics.jsonl", path / "rl" / "metrics.jsonl"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no metrics.jsonl at {path}, {path / 'metrics.jsonl'} or {path / 'rl' / 'metrics.jsonl'}")


def read_curve(path: Path, metric: str) -> dict[int, float]:
    """Step -> value of ``metric``, from every line of a metrics.jsonl that has it."""
    curve = {step: float(logged[metric]) for step, logged in read_metrics(path).items() if metric in logged}
    if not curve:
        raise ValueError(f"{path} logs no {metric!r}")
    return curve


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


def plot(curves: dict[str, dict[int, float]], metric: str, out: Path) -> Path:
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    for label, curve in curves.items():
        steps = sorted(curve)
        axes.plot(steps, [curve[s] for s in steps], linewidth=1, alpha=0.6, label=label)
    shared = sorted(set.intersection(*(set(curve) for curve in curves.values())))
    if len(curves) > 1 and shared:
        mean = [np.mean([curve[s] for curve in curves.values()]) for s in shared]
        axes.plot(shared, mean, color="black", linewidth=2.5, label=f"mean of {len(curves)}")
    axes.set_xlabel("training step")
    axes.set_ylabel(metric)
    if "success" in metric:
        axes.set_ylim(-0.02, 1.02)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out)
    plt.close(figure)
    return out


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
    print(plot(curves, args.metric, args.out))


if __name__ == "__main__":
    main()
