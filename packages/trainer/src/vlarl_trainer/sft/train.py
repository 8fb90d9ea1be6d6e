"""``vlarl-sft``: supervised pre-training of a policy on a LeRobot dataset, then success evaluation.

    vlarl-sft --dataset datasets/mt10-64px-10 --steps 2000 --eval-episodes 10
    vlarl-sft --eval-only runs/sft-.../checkpoints/step_2000 --dataset datasets/mt10-64px-10

Training samples frames uniformly, each with the next H actions of its episode (H = the
policy's action horizon; the pi0 family regresses them with its flow-matching loss). The run
directory gets ``config.json``, ``tensorboard/`` and ``metrics.jsonl`` (one JSON object per
logged step, vlarl-train's logger), ``checkpoints/step_N/`` (``save_pretrained``, written atomically)
and ``eval.json``. Evaluation replays episode ids ``0..N-1`` of the test split for every task
of the dataset with deterministic action chunks and prints a success table.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import vlarl_policies
from vlarl_policies import VLAPolicy
from vlarl_trainer.data import ActionChunkSampler, DemonstrationDataset, load_dataset
from vlarl_trainer.metrics import MetricLogger
from vlarl_trainer.sft.config import SFTConfig, create_run_dir, save_config
from vlarl_trainer.sft.evaluation import evaluate_success, success_table


@dataclass
class SFTResult:
    run_dir: Path
    checkpoint: Path
    first_loss: float
    final_loss: float
    train_seconds: float
    success: dict[str, list[bool]] | None


def check_policy_fits(policy: VLAPolicy, dataset: DemonstrationDataset) -> None:
    """The dataset must give the policy its action and state sizes and its first camera."""
    config = policy.config
    if (config.action_dim, config.state_dim) != (dataset.action_dim, dataset.state_dim):
        raise ValueError(f"policy expects action_dim={config.action_dim}, state_dim={config.state_dim}; dataset "
                         f"{dataset.root} has action_dim={dataset.action_dim}, state_dim={dataset.state_dim}")
    cameras = [f"{camera}_images" for camera in dataset.images]
    if config.camera_keys[0] not in cameras:
        raise ValueError(f"policy reads camera {config.camera_keys[0]!r}; dataset {dataset.root} has {cameras}")


def build_policy(config: SFTConfig, dataset: DemonstrationDataset) -> VLAPolicy:
    """A fresh policy sized for the dataset (state statistics from it), or the given checkpoint."""
    if config.checkpoint is not None:
        policy = vlarl_policies.from_pretrained(config.checkpoint)
        check_policy_fits(policy, dataset)
        return policy.train()
    policy = vlarl_policies.make(config.policy, preset=config.preset, action_dim=dataset.action_dim,
                                 state_dim=dataset.state_dim, tokenizer_corpus=dataset.tasks,
                                 **config.policy_overrides)
    check_policy_fits(policy, dataset)
    state_stats = dataset.stats.get("observation.state")
    if state_stats is None:
        raise ValueError(f"dataset {dataset.root} has no observation.state statistics in meta/stats.json")
    if getattr(policy.config, "state_in_prompt", False):
        policy.set_state_stats(q01=state_stats["q01"], q99=state_stats["q99"])
    else:
        policy.set_state_stats(mean=state_stats["mean"], std=state_stats["std"])
    return policy.train()


def learning_rate_factor(step: int, config: SFTConfig) -> float:
    """Linear warm-up to 1, then cosine decay to ``final_lr_fraction`` at the last step."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.final_lr_fraction + (1 - config.final_lr_fraction) * 0.5 * (1 + math.cos(math.pi * progress))


def train(policy: VLAPolicy, dataset: DemonstrationDataset, config: SFTConfig, log: MetricLogger) -> tuple[float, float]:
    """AdamW on the policy's supervised loss; returns the mean loss of the first and last log windows."""
    sampler = ActionChunkSampler(dataset, policy.config.action_horizon)
    rng = np.random.default_rng(config.seed)
    parameters = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: learning_rate_factor(step, config))
    window: list[torch.Tensor] = []
    window_losses: list[float] = []
    window_start = time.perf_counter()
    for step in range(1, config.steps + 1):
        loss, metrics = policy.sft_loss(sampler.sample(config.batch_size, rng))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(parameters, config.grad_clip)
        optimizer.step()
        schedule.step()
        window.append(metrics["sft/loss"])
        if step % config.log_every == 0 or step == config.steps:
            elapsed = time.perf_counter() - window_start
            mean_loss = float(torch.stack(window).mean())
            window_losses.append(mean_loss)
            log.log(step, {
                "sft/loss": mean_loss,
                "sft/loss_env_dims": float(metrics["sft/loss_env_dims"]),
                "train/actor/grad_norm": float(grad_norm),
                "train/actor/lr": schedule.get_last_lr()[0],
                "time/steps_per_second": len(window) / elapsed,
            })
            print(f"step {step:>6}  loss {mean_loss:.4f}  grad_norm {float(grad_norm):.3f}  "
                  f"{len(window) / elapsed:.1f} steps/s", flush=True)
            window, window_start = [], time.perf_counter()
    return window_losses[0], window_losses[-1]


def evaluation_target(dataset_info: dict[str, Any] | None, env_id: str | None, tasks: list[str] | None,
                      image_size: int | None, horizon: int | None = None) -> tuple[str, list[str], int, int | None]:
    """Env id, tasks, image size and episode length to evaluate on: explicit values, else those the
    dataset was collected with (a horizon of None leaves the env's default)."""
    collected = (dataset_info or {}).get("vlarl", {})
    env_id = env_id or collected.get("env_id")
    tasks = tasks or collected.get("tasks")
    image_size = image_size or collected.get("image_size") or 64
    horizon = horizon or collected.get("horizon")
    if env_id is None or not tasks:
        raise ValueError("evaluation needs an env id and its tasks: pass --env-id (and --tasks), or a dataset "
                         "written by vlarl-collect (its info.json names them under 'vlarl')")
    return env_id, list(tasks), int(image_size), None if horizon is None else int(horizon)


def run_sft(config: SFTConfig, env_id: str | None = None, tasks: list[str] | None = None) -> SFTResult:
    """Train, save and evaluate; everything lands in a new run directory."""
    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    dataset = load_dataset(config.dataset)
    if config.eval_episodes:
        target = evaluation_target(dataset.info, env_id, tasks, dataset.image_shape[0], config.eval_horizon)
    policy = build_policy(config, dataset)
    run_dir = create_run_dir(config)
    save_config(config, run_dir)
    print(f"run: {run_dir}\ndataset: {dataset.root} ({dataset.num_episodes} episodes, {dataset.num_frames} frames, "
          f"{len(dataset.tasks)} tasks)", flush=True)
    log = MetricLogger(run_dir, ["tensorboard"], config.to_dict(), config.steps, start_step=0, progress=False)
    try:
        started = time.perf_counter()
        first_loss, final_loss = train(policy, dataset, config, log)
        train_seconds = time.perf_counter() - started
        checkpoint = policy.save_pretrained(run_dir / "checkpoints" / f"step_{config.steps}")
        success = None
        if config.eval_episodes:
            success = evaluate_success(policy, target[0], target[1], config.eval_episodes, split=config.eval_split,
                                       image_size=target[2], num_envs=config.eval_envs, horizon=target[3])
            log.log(config.steps, evaluation_metrics(success, config.eval_split))
            (run_dir / "eval.json").write_text(json.dumps(success, indent=2) + "\n")
    finally:
        log.close()
    return SFTResult(run_dir, checkpoint, first_loss, final_loss, train_seconds, success)


def evaluation_metrics(success: dict[str, list[bool]], split: str) -> dict[str, float]:
    """``eval/success_once`` and ``eval/<split>/success_once/<task>``, the names vlarl-train logs."""
    everything = [outcome for outcomes in success.values() for outcome in outcomes]
    metrics = {"eval/success_once": float(np.mean(everything))}
    metrics.update({f"eval/{split}/success_once/{task}": float(np.mean(outcomes)) for task, outcomes in success.items()})
    return metrics


def parse_override(text: str) -> tuple[str, Any]:
    """``key=value`` with value parsed as JSON where it parses (numbers, lists, booleans), else a string."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", help="a LeRobot v3.0 dataset directory (from vlarl-collect)")
    parser.add_argument("--eval-only", metavar="CHECKPOINT", help="evaluate a saved policy and exit")
    parser.add_argument("--run-dir", help="new directory for this run (default: runs/sft-<time>)")
    parser.add_argument("--policy", default="pi0")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--checkpoint", help="start from a saved policy instead of a fresh one")
    parser.add_argument("--set", dest="overrides", action="append", type=parse_override, default=[],
                        metavar="KEY=VALUE", help="policy config field, e.g. --set action_chunk=4")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 is fastest on a shared machine)")
    parser.add_argument("--eval-episodes", type=int, default=10, help="per task; 0 skips evaluation")
    parser.add_argument("--eval-split", default="test")
    parser.add_argument("--eval-envs", type=int, default=4)
    parser.add_argument("--eval-horizon", type=int,
                        help="episode length limit during evaluation (default: the dataset's collection horizon)")
    parser.add_argument("--env-id", help="env to evaluate on (default: the dataset's)")
    parser.add_argument("--tasks", nargs="+", help="tasks to evaluate (default: the dataset's)")
    parser.add_argument("--image-size", type=int, help="camera size for evaluation (default: the dataset's)")
    args = parser.parse_args(argv)
    if args.eval_only:
        torch.set_num_threads(args.threads)
        info = load_dataset(args.dataset).info if args.dataset else None
        env_id, tasks, image_size, horizon = evaluation_target(info, args.env_id, args.tasks, args.image_size,
                                                               args.eval_horizon)
        policy = vlarl_policies.from_pretrained(args.eval_only)
        success = evaluate_success(policy, env_id, tasks, args.eval_episodes, split=args.eval_split,
                                   image_size=image_size, num_envs=args.eval_envs, horizon=horizon)
        print(success_table(success))
        return
    if not args.dataset:
        parser.error("--dataset is required unless --eval-only is given")
    config = SFTConfig(
        dataset=args.dataset, run_dir=args.run_dir, policy=args.policy, preset=args.preset,
        policy_overrides=dict(args.overrides), checkpoint=args.checkpoint, steps=args.steps,
        batch_size=args.batch_size, lr=args.lr, seed=args.seed, threads=args.threads,
        eval_episodes=args.eval_episodes, eval_split=args.eval_split, eval_envs=args.eval_envs,
        eval_horizon=args.eval_horizon,
    )
    result = run_sft(config, env_id=args.env_id, tasks=args.tasks)
    print(f"\nloss {result.first_loss:.4f} -> {result.final_loss:.4f} in {result.train_seconds:.0f} s")
    if result.success is not None:
        print(success_table(result.success))
    print(f"\ncheckpoint: {result.checkpoint}\ntensorboard: {result.run_dir / 'tensorboard'}\nmetrics: {result.run_dir / 'metrics.jsonl'}")


if __name__ == "__main__":
    main()
