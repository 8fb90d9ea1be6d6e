"""``vlarl-main-job``: the whole experiment, demonstrations to RL, in one command and one new folder.

    vlarl-main-job --preset demo
    vlarl-main-job --preset full --seed 1
    vlarl-main-job --preset full --variant grpo actor.lr=5e-5      # key=value goes to the trainer
    vlarl-main-job --preset full --demos-per-task 3 --sft-steps 400
    vlarl-main-job --resume runs/main-full-flow-sde-seed1-20261124-173000   # after a stop during RL

The stages: scripted-expert demonstrations of every task of the recipe's env (MetaWorld MT10),
SFT of the recipe's policy on them (a tiny pi0 at 64 px), then RL from the SFT checkpoint with
``vlarl-train``, whose evaluation before the first and after the last RL step replays the same
test-split episodes, so the two columns of the final table compare one policy before and after
RL on identical initial states. The demonstrations are the same for every seed; the seed sets SFT
and RL.

    <out>/<name>/demonstrations/   LeRobot v3.0 dataset (skipped with --dataset)
    <out>/<name>/sft/              the vlarl-sft run (checkpoints/, metrics.jsonl, tensorboard/)
    <out>/<name>/rl/               the vlarl-train run (metrics.jsonl, tensorboard/, videos/, checkpoints/)
    <out>/<name>/job.json          the job's settings and finished stages (what --resume reads)
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
from vlarl_trainer.rl.evaluation import format_table
from vlarl_trainer.jobs.presets import PRESETS, VARIANT_RECIPES, CollectStage, MainJobPreset, RLStage, SFTStage
from vlarl_trainer.metrics import logged_seconds
from vlarl_trainer.run_dirs import make_run_dir, run_exists_error
from vlarl_trainer.sft.config import SFTConfig

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
        # N for every task, the preset's per-task counts included: a user asking for 3 a task gets 3 of reach too.
        preset = dataclasses.replace(preset, collect=CollectStage(episodes_per_task=demos_per_task))
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
    summary = collect_demonstrations(config.env.id, preset.collect.episodes_per_task, dataset,
                                     task_episodes=preset.collect.task_episodes, **env_kwargs)
    print(summary.table(), flush=True)


def reinforce(config: TrainConfig) -> dict[str, Any]:
    """``vlarl-train`` on the config: its results hold the ``before`` and ``after`` evaluation reports."""
    import ray

    from vlarl_trainer.rl.runner import Trainer

    try:
        trainer = Trainer(config)
        try:
            return trainer.run()
        finally:
            trainer.close()
    finally:
        ray.shutdown()


def job_results(preset: MainJobPreset, variant: str, seed: int, before: dict[str, Any], after: dict[str, Any],
                sft_loss: dict[str, float], seconds: dict[str, float], paths: dict[str, Any],
                resumed_from: int | None = None, overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """What results.json holds: the settings (the user's trainer overrides among them, so that a record
    names every number its run changed), success per task and split before and after RL, the SFT loss at
    its first and last log, timings, paths, and the RL step a resumed job continued from."""
    rows = [{"split": split, "task": task, "before": before["table"].get((split, task)), "after": rate}
            for (split, task), rate in sorted(after["table"].items())]
    return {
        "preset": dataclasses.asdict(preset),
        "variant": variant,
        "recipe": VARIANT_RECIPES[variant],
        "seed": seed,
        "overrides": list(overrides),
        "success": rows,
        "mean": {"before": before["metrics"]["eval/success_once"], "after": after["metrics"]["eval/success_once"]},
        "sft_loss": sft_loss,
        "seconds": seconds,
        "paths": paths,
        "resumed_from_step": resumed_from,
    }


def write_json(path: Path, content: dict[str, Any]) -> None:
    """Written under a temporary name and renamed, as every file of a run is."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(content, indent=2) + "\n")
    os.replace(partial, path)


def summary_text(before: dict[str, Any], after: dict[str, Any], paths: dict[str, Any]) -> str:
    """The final table (success per task before and after RL, and the mean) and where to look next."""
    lines = [format_table(before, after), ""]
    lines += [f"tensorboard ({stage}): {path}" for stage, path in paths["tensorboard"].items()]
    lines.append(f"videos: {paths['videos']} ({len(paths['video_files'])} files)")
    lines.append(f"results: {paths['results']}")
    return "\n".join(lines)


JOB_STATE = "job.json"
"""The job's settings and the timings of its finished stages, rewritten after each stage: what
``--resume`` continues from."""


def preset_from_dict(saved: dict[str, Any]) -> MainJobPreset:
    """The inverse of ``dataclasses.asdict`` on a preset, as job.json and results.json hold it."""
    rl = dict(saved["rl"], trainer_overrides=tuple(saved["rl"]["trainer_overrides"]))
    return MainJobPreset(name=saved["name"], collect=CollectStage(**saved["collect"]), sft=SFTStage(**saved["sft"]),
                         rl=RLStage(**rl))


def run_main_job(preset: MainJobPreset, variant: str = "flow-sde", seed: int = 0, out: str | Path = "runs",
                 name: str | None = None, overrides: list[str] | None = None,
                 dataset: str | Path | None = None) -> tuple[dict[str, Any], str]:
    """Run every stage in a new folder ``<out>/<name>``; returns results.json's content and the summary text."""
    from vlarl_trainer.rl.validation import validate

    name = name or f"main-{preset.name}-{variant}-seed{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    job_dir = Path(out) / name
    state = {"preset": dataclasses.asdict(preset), "variant": variant, "seed": seed, "overrides": list(overrides or []),
             "dataset": None if dataset is None else str(dataset), "seconds": {}}
    # A bad override or a taken name stops the job here, not after the demonstrations and SFT.
    if job_dir.exists():
        raise run_exists_error(job_dir, EXISTING_JOB_HINT)
    validate(job_config(job_dir, state))
    make_run_dir(job_dir, EXISTING_JOB_HINT)
    write_json(job_dir / JOB_STATE, state)
    return continue_job(job_dir, state)


def resume_main_job(job_dir: str | Path) -> tuple[dict[str, Any], str]:
    """Finish a job that stopped during RL: its RL run continues from its last checkpoint (the trainer's
    ``resume=``), or starts again when it stopped before the first one; the earlier stages are kept."""
    job_dir = Path(job_dir)
    if not (job_dir / JOB_STATE).exists():
        raise ValueError(f"--resume {job_dir}: expected a vlarl-main-job run directory with {JOB_STATE}, found none")
    if (job_dir / "results.json").exists():
        raise FileExistsError(f"--resume {job_dir}: the job has finished already (results.json exists)")
    state = json.loads((job_dir / JOB_STATE).read_text())
    unfinished = [stage for stage in ("collect", "sft") if stage not in state["seconds"]]
    if unfinished:
        raise ValueError(f"--resume {job_dir}: the job stopped during {unfinished[0]}, before RL, and only RL "
                         f"continues; start a new job")
    return continue_job(job_dir, state)


def job_config(job_dir: Path, state: dict[str, Any]) -> TrainConfig:
    preset = preset_from_dict(state["preset"])
    sft_checkpoint = job_dir / "sft" / "checkpoints" / f"step_{preset.sft.steps}"
    return trainer_config(preset, state["variant"], state["seed"], job_dir, sft_checkpoint, state["overrides"])


def continue_job(job_dir: Path, state: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The stages job.json does not record as finished, then results.json."""
    from vlarl_trainer.sft.train import run_sft

    preset, seconds = preset_from_dict(state["preset"]), state["seconds"]
    config = job_config(job_dir, state)
    dataset_path = Path(state["dataset"]) if state["dataset"] is not None else job_dir / "demonstrations"
    started, runs_every_stage = time.perf_counter(), not seconds
    if "collect" not in seconds:
        mark = time.perf_counter()
        if state["dataset"] is None:
            print(f"== demonstrations: {preset.collect.describe()} of {config.env.id}", flush=True)
            collect(preset, config, dataset_path)
        seconds["collect"] = time.perf_counter() - mark
        write_json(job_dir / JOB_STATE, state)

    if "sft" not in seconds:
        mark = time.perf_counter()
        print(f"== SFT: {preset.sft.steps} steps", flush=True)
        sft = run_sft(sft_config(preset, config, dataset_path, job_dir))
        seconds["sft"] = time.perf_counter() - mark
        state["sft"] = {"run_dir": str(sft.run_dir), "checkpoint": str(sft.checkpoint),
                        "loss": {"first": sft.first_loss, "final": sft.final_loss}}
        write_json(job_dir / JOB_STATE, state)
    sft_dir = Path(state["sft"]["run_dir"])

    mark = time.perf_counter()
    config, resumed_from = rl_stage_config(job_dir, config)
    print(f"== RL: {config.recipe}, {config.runner.max_steps} steps from "
          f"{config.policy.pretrained if resumed_from is None else f'step {resumed_from}'}", flush=True)
    trained = reinforce(config)
    seconds["rl"] = time.perf_counter() - mark
    rl_dir = Path(trained["run_dir"])
    before = trained.get("before")
    if before is None:
        raise ValueError(f"--resume {job_dir}: {rl_dir / 'metrics.jsonl'} has lost the evaluation before RL")
    if resumed_from is not None:
        # The steps kept from before the stop count with their logged times; the replayed ones count once.
        seconds["rl"] += sum(value for step, value in logged_seconds(rl_dir / "metrics.jsonl").items()
                             if step <= resumed_from)
    # A resumed job's total is the sum of its stages: the time between the stop and --resume is no work.
    seconds["total"] = (time.perf_counter() - started if runs_every_stage
                        else seconds["collect"] + seconds["sft"] + seconds["rl"])
    after = trained["after"]
    seconds["eval_before"] = before["metrics"]["time/eval"]
    seconds["eval_after"] = after["metrics"]["time/eval"]

    videos = rl_dir / "videos"
    paths = {
        "run": str(job_dir),
        "dataset": str(dataset_path),
        "sft_checkpoint": state["sft"]["checkpoint"],
        "rl_run": str(rl_dir),
        "tensorboard": {"sft": str(sft_dir / "tensorboard"), "rl": str(rl_dir / "tensorboard")},
        "metrics": {"sft": str(sft_dir / "metrics.jsonl"), "rl": str(rl_dir / "metrics.jsonl")},
        "videos": str(videos),
        "video_files": sorted(str(path) for path in videos.rglob("*.mp4")),
        "results": str(job_dir / "results.json"),
    }
    results = job_results(preset, state["variant"], state["seed"], before, after, state["sft"]["loss"], seconds,
                          paths, resumed_from, state["overrides"])
    write_json(job_dir / "results.json", results)
    return results, summary_text(before, after, paths)


def rl_stage_config(job_dir: Path, config: TrainConfig) -> tuple[TrainConfig, int | None]:
    """The trainer config that carries the RL stage on, and the step it resumes from (None: from the start).
    An RL run that stopped before its first checkpoint is moved aside, kept, and RL starts again."""
    from vlarl_trainer.rl import checkpoint as checkpoints
    from vlarl_trainer.rl.runner import resumed_config

    rl_dir = job_dir / config.runner.name
    if not rl_dir.exists():
        return config, None
    latest = checkpoints.latest_checkpoint(rl_dir)
    if latest is None or not (rl_dir / "config.yaml").exists():
        attempt = 1
        while rl_dir.with_name(f"{rl_dir.name}-interrupted-{attempt}").exists():
            attempt += 1
        rl_dir.rename(rl_dir.with_name(f"{rl_dir.name}-interrupted-{attempt}"))
        return config, None
    return resumed_config(str(rl_dir), []), checkpoints.read_state(latest)["step"]


def main(argv: list[str] | None = None) -> int:
    """Exit 2 on bad arguments or an existing run directory, 1 when a trainer worker fails."""
    from vlarl_trainer.rl.cluster import WorkerFailure

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS))
    parser.add_argument("--variant", choices=sorted(VARIANT_RECIPES),
                        help="the RL recipe: PPO with flow-SDE (default) or flow-noise, or GRPO")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--out", help="parent folder of the run directory (default: runs)")
    parser.add_argument("--name", help="run directory name (default: main-<preset>-<variant>-seed<N>-<time>)")
    parser.add_argument("--dataset", help="reuse these demonstrations (a vlarl-collect dataset) instead of collecting")
    parser.add_argument("--demos-per-task", type=int,
                        help="demonstrations of every task instead of the preset's (its per-task counts included)")
    parser.add_argument("--sft-steps", type=int, help="SFT steps instead of the preset's")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="finish a job that stopped during RL, with the settings it started with")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="trainer settings, e.g. actor.lr=5e-5")
    args = parser.parse_args(argv)
    malformed = [o for o in args.overrides if "=" not in o]
    if malformed:
        parser.error(f"trainer overrides are key=value, got {malformed}")
    settings = {"--preset": args.preset, "--variant": args.variant, "--seed": args.seed, "--out": args.out,
                "--name": args.name, "--dataset": args.dataset, "--demos-per-task": args.demos_per_task,
                "--sft-steps": args.sft_steps, "KEY=VALUE": args.overrides or None}
    if args.resume is not None and any(value is not None for value in settings.values()):
        given = [option for option, value in settings.items() if value is not None]
        parser.error(f"--resume continues a job with the settings in its {JOB_STATE}; drop {', '.join(given)}")
    try:
        if args.resume is not None:
            _, summary = resume_main_job(args.resume)
        else:
            preset = with_stage_sizes(PRESETS[args.preset or "demo"], args.demos_per_task, args.sft_steps)
            print("preset:", json.dumps(dataclasses.asdict(preset)), flush=True)
            _, summary = run_main_job(preset, args.variant or "flow-sde", 0 if args.seed is None else args.seed,
                                      args.out or "runs", args.name, args.overrides, args.dataset)
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
