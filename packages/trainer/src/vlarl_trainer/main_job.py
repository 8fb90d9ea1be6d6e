"""``vlarl-main-job``: the whole experiment, demonstrations to RL, in one command and one new folder.

    vlarl-main-job --preset demo
    vlarl-main-job --preset full --seed 1
    vlarl-main-job --preset full --variant grpo actor.lr=5e-5      # key=value goes to the trainer
    vlarl-main-job --preset full --demos-per-task 3 --sft-steps 400

The stages: scripted-expert demonstrations of every task of the recipe's env (MetaWorld MT10),
SFT of the recipe's policy on them (a tiny pi0 at 64 px), then RL from the SFT checkpoint with
``vlarl-train``, whose evaluation before the first and after the last RL step replays the same
test-split episodes, so the two columns of the final table compare one policy before and after
RL on identical initial states. The demonstrations are the same for every seed; the seed sets SFT
and RL.

    <out>/<name>/demonstrations/   LeRobot v3.0 dataset (skipped with --dataset)
    <out>/<name>/sft/              the vlarl-sft run (checkpoints/, metrics.jsonl, tensorboard/)
    <out>/<name>/rl/               the vlarl-train run (metrics.jsonl, tensorboard/, videos/, checkpoints/)
    <out>/<name>/results.json      success per task before and after RL, stage timings, paths
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from vlarl_trainer.config import TrainConfig, load_config
from vlarl_trainer.evaluation import format_table
from vlarl_trainer.main_job_presets import PRESETS, VARIANT_RECIPES, MainJobPreset
from vlarl_trainer.run_dirs import make_run_dir, run_exists_error
from vlarl_trainer.sft_config import SFTConfig

COLLECTOR_ENV_KEYWORDS = ("obs_mode", "reward_mode")
"""Env keywords the collector sets itself; the others (image size, horizon, ...) pass through."""


EXISTING_JOB_HINT = "the main job never overwrites a run (choose another --name)"


def with_stage_sizes(preset: MainJobPreset, demos_per_task: int | None = None,
                     sft_steps: int | None = None) -> MainJobPreset:
    """The preset with another number of demonstrations per task or SFT steps, the two numbers that set
    how good the policy is when RL starts; the name stays, and results.json records the numbers used."""
    for option, value in (("--demos-per-task", demos_per_task), ("--sft-steps", sft_steps)):
        if value is not None and value < 1:
            raise ValueError(f"{option} must be a positive integer, got {value}")
    if demos_per_task is not None:
        preset = dataclasses.replace(preset, collect=dataclasses.replace(preset.collect, episodes_per_task=demos_per_task))
    if sft_steps is not None:
        if sft_steps <= preset.sft.warmup_steps:
            raise ValueError(f"--sft-steps must exceed the preset's {preset.sft.warmup_steps} warm-up steps, "
                             f"got {sft_steps}")
        preset = dataclasses.replace(preset, sft=dataclasses.replace(preset.sft, steps=sft_steps))
    return preset


def trainer_config(preset: MainJobPreset, variant: str, seed: int, job_dir: Path, sft_checkpoint: Path,
                   overrides: list[str]) -> TrainConfig:
    """The variant's recipe, then the preset, then the user's overrides; the job's own wiring comes last
    because the stages depend on it (RL starts from the SFT checkpoint and always evaluates before and after)."""
    if variant not in VARIANT_RECIPES:
        raise ValueError(f"unknown variant {variant!r}; expected one of {sorted(VARIANT_RECIPES)}")
    return load_config([
        f"recipe={VARIANT_RECIPES[variant]}", f"runner.seed={seed}", "eval.video=true", *preset.rl.overrides(),
        *overrides,
        f"policy.pretrained={sft_checkpoint}", "eval.at_start=true", f"runner.output_dir={job_dir}", "runner.name=rl",
    ])


def sft_config(preset: MainJobPreset, config: TrainConfig, dataset: Path, job_dir: Path) -> SFTConfig:
    """SFT of the very policy the recipe trains: its size, noise method and value head, and the env's chunk."""
    return SFTConfig(
        dataset=str(dataset), run_dir=str(job_dir / "sft"), policy=config.policy.name, preset=config.policy.preset,
        policy_overrides={**config.policy.kwargs, "action_chunk": config.env.action_chunk},
        steps=preset.sft.steps, batch_size=preset.sft.batch_size, lr=preset.sft.lr,
        warmup_steps=preset.sft.warmup_steps, seed=config.runner.seed, threads=config.runner.torch_threads,
        # The trainer's evaluation before RL measures this policy on the test episodes.
        eval_episodes=0,
    )


def collect(preset: MainJobPreset, config: TrainConfig, dataset: Path) -> None:
    """Expert demonstrations of every task of the trainer's env, with its image size and horizon."""
    from vlarl_trainer.data import collect_demonstrations

    env_kwargs = {key: value for key, value in config.env.kwargs.items() if key not in COLLECTOR_ENV_KEYWORDS}
    summary = collect_demonstrations(config.env.id, preset.collect.episodes_per_task, dataset, **env_kwargs)
    print(summary.table(), flush=True)


def reinforce(config: TrainConfig) -> dict[str, Any]:
    """``vlarl-train`` on the config: its results hold the ``before`` and ``after`` evaluation reports."""
    import ray

    from vlarl_trainer.runner import Trainer

    try:
        trainer = Trainer(config)
        try:
            return trainer.run()
        finally:
            trainer.close()
    finally:
        ray.shutdown()


def job_results(preset: MainJobPreset, variant: str, seed: int, before: dict[str, Any], after: dict[str, Any],
                sft_loss: dict[str, float], seconds: dict[str, float], paths: dict[str, Any]) -> dict[str, Any]:
    """What results.json holds: the settings, success per task and split before and after RL, the SFT
    loss at its first and last log, timings and paths."""
    rows = [{"split": split, "task": task, "before": before["table"].get((split, task)), "after": rate}
            for (split, task), rate in sorted(after["table"].items())]
    return {
        "preset": dataclasses.asdict(preset),
        "variant": variant,
        "recipe": VARIANT_RECIPES[variant],
        "seed": seed,
        "success": rows,
        "mean": {"before": before["metrics"]["eval/success_once"], "after": after["metrics"]["eval/success_once"]},
        "sft_loss": sft_loss,
        "seconds": seconds,
        "paths": paths,
    }


def write_results(path: Path, results: dict[str, Any]) -> None:
    """Written under a temporary name and renamed, as every file of a run is."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(results, indent=2) + "\n")
    os.replace(partial, path)


def summary_text(before: dict[str, Any], after: dict[str, Any], paths: dict[str, Any]) -> str:
    """The final table (success per task before and after RL, and the mean) and where to look next."""
    lines = [format_table(before, after), ""]
    lines += [f"tensorboard ({stage}): {path}" for stage, path in paths["tensorboard"].items()]
    lines.append(f"videos: {paths['videos']} ({len(paths['video_files'])} files)")
    lines.append(f"results: {paths['results']}")
    return "\n".join(lines)


def run_main_job(preset: MainJobPreset, variant: str = "flow-sde", seed: int = 0, out: str | Path = "runs",
                 name: str | None = None, overrides: list[str] | None = None,
                 dataset: str | Path | None = None) -> tuple[dict[str, Any], str]:
    """Run every stage in a new folder ``<out>/<name>``; returns results.json's content and the summary text."""
    from vlarl_trainer.sft import run_sft
    from vlarl_trainer.validation import validate

    name = name or f"main-{preset.name}-{variant}-seed{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    started = time.perf_counter()
    job_dir = Path(out) / name
    sft_checkpoint = job_dir / "sft" / "checkpoints" / f"step_{preset.sft.steps}"
    config = trainer_config(preset, variant, seed, job_dir, sft_checkpoint, list(overrides or []))
    # A bad override or a taken name stops the job here, not after the demonstrations and SFT.
    if job_dir.exists():
        raise run_exists_error(job_dir, EXISTING_JOB_HINT)
    validate(config)
    make_run_dir(job_dir, EXISTING_JOB_HINT)
    seconds: dict[str, float] = {}

    mark = time.perf_counter()
    dataset_path = Path(dataset) if dataset is not None else job_dir / "demonstrations"
    if dataset is None:
        print(f"== demonstrations: {preset.collect.episodes_per_task} per task of {config.env.id}", flush=True)
        collect(preset, config, dataset_path)
    seconds["collect"] = time.perf_counter() - mark

    mark = time.perf_counter()
    print(f"== SFT: {preset.sft.steps} steps", flush=True)
    sft = run_sft(sft_config(preset, config, dataset_path, job_dir))
    seconds["sft"] = time.perf_counter() - mark

    mark = time.perf_counter()
    print(f"== RL: {config.recipe}, {config.runner.max_steps} steps from {sft.checkpoint}", flush=True)
    trained = reinforce(config)
    seconds["rl"] = time.perf_counter() - mark
    before, after = trained["before"], trained["after"]
    seconds["eval_before"] = before["metrics"]["time/eval"]
    seconds["eval_after"] = after["metrics"]["time/eval"]
    seconds["total"] = time.perf_counter() - started

    rl_dir = Path(trained["run_dir"])
    videos = rl_dir / "videos"
    paths = {
        "run": str(job_dir),
        "dataset": str(dataset_path),
        "sft_checkpoint": str(sft.checkpoint),
        "rl_run": str(rl_dir),
        "tensorboard": {"sft": str(sft.run_dir / "tensorboard"), "rl": str(rl_dir / "tensorboard")},
        "metrics": {"sft": str(sft.run_dir / "metrics.jsonl"), "rl": str(rl_dir / "metrics.jsonl")},
        "videos": str(videos),
        "video_files": sorted(str(path) for path in videos.rglob("*.mp4")),
        "results": str(job_dir / "results.json"),
    }
    results = job_results(preset, variant, seed, before, after, {"first": sft.first_loss, "final": sft.final_loss},
                          seconds, paths)
    write_results(job_dir / "results.json", results)
    return results, summary_text(before, after, paths)


def main(argv: list[str] | None = None) -> int:
    """Exit 2 on bad arguments or an existing run directory, 1 when a trainer worker fails."""
    from vlarl_trainer.cluster import WorkerFailure

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="demo")
    parser.add_argument("--variant", choices=sorted(VARIANT_RECIPES), default="flow-sde",
                        help="the RL recipe: PPO with flow-SDE (default) or flow-noise, or GRPO")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs", help="parent folder of the run directory")
    parser.add_argument("--name", help="run directory name (default: main-<preset>-<variant>-seed<N>-<time>)")
    parser.add_argument("--dataset", help="reuse these demonstrations (a vlarl-collect dataset) instead of collecting")
    parser.add_argument("--demos-per-task", type=int, help="demonstrations per task instead of the preset's")
    parser.add_argument("--sft-steps", type=int, help="SFT steps instead of the preset's")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="trainer settings, e.g. actor.lr=5e-5")
    args = parser.parse_args(argv)
    malformed = [o for o in args.overrides if "=" not in o]
    if malformed:
        parser.error(f"trainer overrides are key=value, got {malformed}")
    try:
        preset = with_stage_sizes(PRESETS[args.preset], args.demos_per_task, args.sft_steps)
        print("preset:", json.dumps(dataclasses.asdict(preset)), flush=True)
        _, summary = run_main_job(preset, args.variant, args.seed, args.out, args.name,
                                  args.overrides, args.dataset)
    except (ValueError, FileExistsError) as error:
        print(f"vlarl-main-job: {error}", file=sys.stderr)
        return 2
    except WorkerFailure as error:
        print(f"vlarl-main-job: {error}", file=sys.stderr)
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
