"""Learning-curve figures from metrics.jsonl: the one a main job draws at its end, and the multi-run
figures of ``scripts/plot_learning_curve.py``.

Figures are drawn with matplotlib's object API on its Agg canvas, so no display and no pyplot
state is involved, and written under a temporary name then renamed, as every file of a run is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from vlarl_trainer.metrics import read_metrics

Curve = Mapping[int, float]
"""Step -> value."""


def read_curve(path: Path, metric: str) -> dict[int, float]:
    """Step -> value of ``metric``, from every line of a metrics.jsonl that has it."""
    curve = {step: float(logged[metric]) for step, logged in read_metrics(path).items() if metric in logged}
    if not curve:
        raise ValueError(f"{path} logs no {metric!r}")
    return curve


def plot_curves(curves: Mapping[str, Curve], ylabel: str, out: Path, with_mean: bool = True,
                title: str | None = None) -> Path:
    """One thin line per curve (with markers where it has few points) and, for several curves with
    ``with_mean``, their mean over the steps they share in bold black."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5), dpi=120)
    axes = figure.subplots()
    for label, curve in curves.items():
        steps = sorted(curve)
        axes.plot(steps, [curve[s] for s in steps], linewidth=1.2, alpha=0.75, label=label,
                  marker="o" if len(steps) <= 12 else None)
    shared = sorted(set.intersection(*(set(curve) for curve in curves.values())))
    if with_mean and len(curves) > 1 and shared:
        mean = [np.mean([curve[s] for curve in curves.values()]) for s in shared]
        axes.plot(shared, mean, color="black", linewidth=2.5, label=f"mean of {len(curves)}")
    axes.set_xlabel("RL step")
    axes.set_ylabel(ylabel)
    if "success" in ylabel:
        axes.set_ylim(-0.02, 1.02)
    if title:
        axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.stem + ".partial.png")
    figure.savefig(partial)
    os.replace(partial, out)
    return out


def job_learning_curve(rl_metrics: Path, out: Path, title: str | None = None) -> Path:
    """A main job's figure: its training rollouts' success per RL step and its held-out success at
    every evaluation (before the first step and after the last, and every ``eval.interval``)."""
    curves = {"training rollouts (env/success_once)": read_curve(rl_metrics, "env/success_once"),
              "held-out test episodes (eval/success_once)": read_curve(rl_metrics, "eval/success_once")}
    return plot_curves(curves, "success rate", out, with_mean=False, title=title)
