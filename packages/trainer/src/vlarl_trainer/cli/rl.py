"""Console scripts: ``vlarl-train recipe=<name> key=value ...`` and ``vlarl-eval <checkpoint> ...``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vlarl_trainer.rl.cluster import WorkerFailure


def _overrides(argv: list[str] | None) -> list[str]:
    return list(sys.argv[1:] if argv is None else argv)


def train_main(argv: list[str] | None = None) -> int:
    """Validate, train, print the before/after table. Exit 2 on a bad config, 1 on a worker failure."""
    import ray

    from vlarl_trainer.config import load_config
    from vlarl_trainer.rl.evaluation import format_table
    from vlarl_trainer.rl.runner import Trainer, resumed_config

    overrides = _overrides(argv)
    resume = next((o.split("=", 1)[1] for o in overrides if o.startswith("resume=")), None)
    try:
        config = resumed_config(resume, overrides) if resume else load_config(overrides)
        trainer = Trainer(config)
    except (ValueError, FileExistsError, ImportError) as error:
        print(f"vlarl-train: {error}", file=sys.stderr)
        ray.shutdown()
        return 2
    except WorkerFailure as error:
        print(f"vlarl-train: {error}", file=sys.stderr)
        ray.shutdown()
        return 1
    try:
        results = trainer.run()
    except WorkerFailure as error:
        print(f"vlarl-train: {error}\nvlarl-train: stopped; the checkpoints in {trainer.run_dir / 'checkpoints'} "
              "are intact", file=sys.stderr)
        return 1
    finally:
        ray.shutdown()
    if "after" in results:
        print(format_table(results.get("before"), results["after"]))
    run_dir = Path(results["run_dir"])
    print(f"run: {run_dir}\ntensorboard: {run_dir / 'tensorboard'}\nmetrics: {run_dir / 'metrics.jsonl'}")
    videos = sorted((run_dir / "videos").rglob("*.mp4")) if (run_dir / "videos").exists() else []
    if videos:
        print(f"videos: {run_dir / 'videos'} ({len(videos)} files)")
    return 0


def eval_main(argv: list[str] | None = None) -> int:
    """``vlarl-eval <run dir | checkpoint dir> [key=value ...]``: evaluate a checkpoint alone."""
    import ray

    from vlarl_trainer.rl import checkpoint as checkpoints
    from vlarl_trainer.rl.cluster import WorkerGroup, start_ray
    from vlarl_trainer.config import config_from_yaml
    from vlarl_trainer.rl.evaluation import evaluate, evaluation_options, format_table
    from vlarl_trainer.rl.rollout import Shards
    from vlarl_trainer.rl.validation import validate
    from vlarl_trainer.rl.workers.env_worker import EnvWorker
    from vlarl_trainer.rl.workers.rollout_worker import RolloutWorker

    args = _overrides(argv)
    if not args or "=" in args[0]:
        print("usage: vlarl-eval <run dir | checkpoint dir> [key=value ...]", file=sys.stderr)
        return 2
    target = Path(args[0])
    checkpoint = checkpoints.latest_checkpoint(target) if (target / "config.yaml").exists() else target
    if checkpoint is None or not (checkpoint / "policy").exists():
        print(f"vlarl-eval: expected a run directory with checkpoints or a checkpoint folder, got {target}",
              file=sys.stderr)
        return 2
    config = config_from_yaml(checkpoint.parent.parent / "config.yaml", args[1:])
    try:
        layout = validate(config)
    except ValueError as error:
        print(f"vlarl-eval: {error}", file=sys.stderr)
        return 2
    try:
        start_ray(config.cluster.address, config.cluster.num_cpus)
        env_args = (config.env.id, config.env.kwargs, config.env.action_chunk, layout.envs_per_stage,
                    config.rollout.pipeline_stage_num)
        env = WorkerGroup("env", EnvWorker, layout.placement["env"], [(env_args, {})] * layout.env_workers, None)
        rollout = WorkerGroup("rollout", RolloutWorker, layout.placement["rollout"],
                              [((str(checkpoint / "policy"), config.runner.torch_threads), {})] * layout.rollout_workers,
                              None)
        shards = Shards(env, rollout, config.rollout.pipeline_stage_num, layout.envs_per_stage)
        video_dir = checkpoint / "eval_videos" if config.eval.video else None
        report = evaluate(shards, evaluation_options(config), layout.chunk_steps, config.runner.seed, video_dir)
    except WorkerFailure as error:
        print(f"vlarl-eval: {error}", file=sys.stderr)
        return 1
    finally:
        ray.shutdown()
    print(format_table(None, report))
    print(json.dumps({k: v for k, v in report["metrics"].items() if "/" not in k[5:]}, indent=2))
    return 0
