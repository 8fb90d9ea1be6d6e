"""The five console scripts, each a Hydra app over the one config tree:

    vlarl-collect   recipe=<name> dataset=<new dir> [collect.episodes_per_task=N ...]
    vlarl-sft       recipe=<name> dataset=<dir> [sft.steps=N ...]
    vlarl-train     recipe=<name> [policy.pretrained=<sft checkpoint>] [key=value ...] | resume=<run dir | auto>
                    [--dry-run: validate, print the layout and each actor rank's memory, start nothing]
    vlarl-eval      eval.checkpoint=<run | checkpoint | policy dir> [recipe=<name>] [key=value ...]
    vlarl-main-job  recipe=<name> job=<demo | full | mt50 | ml45 | libero_spatial | calvin_abc_d | put_on_plate | gsenv>
                    [key=value ...] | resume=<job dir | auto>

``resume=auto`` with ``runner.name`` continues that run (or job) when its directory exists and starts it
otherwise, so a job script can be resubmitted unchanged after a preemption.
"""

from __future__ import annotations

import json
from pathlib import Path

from vlarl_trainer.cli.app import hydra_command
from vlarl_trainer.config import AUTO, VlarlConfig


def collect(config: VlarlConfig, overrides: list[str]) -> None:
    from vlarl_trainer.data.collector import collect_from_config

    summary = collect_from_config(config)
    print(summary.table())
    print(f"\ndataset: {summary.path} ({summary.seconds:.0f} s)")


def print_evaluation(report: dict, sampling: str) -> None:
    """An evaluation report's table of single-task success under ``sampling`` (``eval.sampling``), when it
    played episodes, and calvin's line for the CALVIN chains, when it played them."""
    from vlarl_envs.calvin.chains import format_summary
    from vlarl_trainer.rl.evaluation import format_table

    if "eval/success_once" in report["metrics"]:
        print(format_table(None, report, sampling))
    if "chains" in report:
        print(f"CALVIN chains ({len(report['chains']['lengths'])}): {format_summary(report['chains']['summary'])}")


def sft(config: VlarlConfig, overrides: list[str]) -> None:
    from vlarl_trainer.sft.train import run_sft

    result = run_sft(config)
    print(f"\nloss {result.first_loss:.4f} -> {result.final_loss:.4f} in {result.train_seconds:.0f} s")
    if result.evaluation is not None:
        print_evaluation(result.evaluation, config.eval.sampling)
    print(f"\ncheckpoint: {result.checkpoint}\ntensorboard: {result.run_dir / 'tensorboard'}\n"
          f"metrics: {result.run_dir / 'metrics.jsonl'}")


def train(config: VlarlConfig, overrides: list[str]) -> None:
    """Validate, train, print the before/after table."""
    import ray

    from vlarl_trainer.rl.cluster import WorkerFailure
    from vlarl_trainer.rl.evaluation import format_table
    from vlarl_trainer.rl.runner import Trainer, auto_resumed_config, resumed_config

    if config.resume == AUTO:
        config = auto_resumed_config(config, overrides)
    elif config.resume is not None:
        config = resumed_config(config.resume, overrides)
    try:
        trainer = Trainer(config)
        try:
            results = trainer.run()
        except WorkerFailure as error:
            raise WorkerFailure(f"{error}\nstopped; the checkpoints in {trainer.run_dir / 'checkpoints'} are intact "
                                f"(continue with resume={trainer.run_dir})") from None
    finally:
        ray.shutdown()
    if "after" in results:
        print(format_table(results.get("before"), results["after"], config.eval.sampling))
    run_dir = Path(results["run_dir"])
    print(f"run: {run_dir}\ntensorboard: {run_dir / 'tensorboard'}\nmetrics: {run_dir / 'metrics.jsonl'}")
    videos = sorted((run_dir / "videos").rglob("*.mp4")) if (run_dir / "videos").exists() else []
    if videos:
        print(f"videos: {run_dir / 'videos'} ({len(videos)} files)")


def dry_run(config: VlarlConfig, overrides: list[str]) -> None:
    """Validate, then print the processes per device and one actor rank's memory; start no Ray. A
    published-size recipe needs no checkpoint for it."""
    from vlarl_trainer.rl.memory import estimate_config_memory, layout_table, memory_table
    from vlarl_trainer.rl.runner import auto_resumed_config, resumed_config

    if config.resume == AUTO:
        config = auto_resumed_config(config, overrides)
    elif config.resume is not None:
        config = resumed_config(config.resume, overrides)
    layout, memory, parameters = estimate_config_memory(config)
    print(f"{config.recipe or config.resume}: valid\n\nprocesses per device:\n{layout_table(layout)}\n")
    print(memory_table(config, memory, parameters, layout.actor_workers))


def evaluate(config: VlarlConfig, overrides: list[str]) -> None:
    """Score ``eval.checkpoint`` on the recipe's env, or on its own run's env when no recipe is named; with
    ``eval.calvin_chains``, also CALVIN's chains, printed as calvin prints them."""
    from vlarl_trainer.config import config_from_yaml
    from vlarl_trainer.rl.evaluation import evaluate_checkpoint, resolve_policy

    if config.eval.checkpoint is None:
        raise ValueError("name the policy to score: eval.checkpoint=<run dir | checkpoints/step_N | policy dir>")
    policy_dir, run_dir = resolve_policy(config.eval.checkpoint)
    if not config.recipe:
        if run_dir is None:
            raise ValueError(f"eval.checkpoint={config.eval.checkpoint} belongs to no run directory with a "
                             "config.yaml: name the recipe to score it on (recipe=<name>)")
        config = config_from_yaml(run_dir / "config.yaml", [o for o in overrides if not o.startswith("recipe=")])
    video_dir = policy_dir.parent / "eval_videos" if config.eval.video else None
    report = evaluate_checkpoint(config, policy_dir, video_dir)
    print_evaluation(report, config.eval.sampling)
    headline = {k: v for k, v in report["metrics"].items() if "/" not in k[5:] or k.startswith("eval/chains/")}
    print(json.dumps(headline, indent=2))


def main_job(config: VlarlConfig, overrides: list[str]) -> None:
    from vlarl_trainer.jobs.main_job import auto_resume_main_job, resume_main_job, run_main_job

    if config.resume == AUTO:
        summary = auto_resume_main_job(config, [o for o in overrides if o != f"resume={AUTO}"])
    elif config.resume is not None:
        extra = [o for o in overrides if not o.startswith("resume=")]
        if extra:
            raise ValueError(f"resume= continues a job with the settings in its job.json; drop {extra}")
        _, summary = resume_main_job(config.resume)
    else:
        _, summary = run_main_job(config, overrides)
    print(summary)


collect_main = hydra_command("vlarl-collect", collect, need_recipe=False)
sft_main = hydra_command("vlarl-sft", sft)
train_main = hydra_command("vlarl-train", train, dry_run=dry_run)
eval_main = hydra_command("vlarl-eval", evaluate, need_recipe=False)
main_job_main = hydra_command("vlarl-main-job", main_job)
