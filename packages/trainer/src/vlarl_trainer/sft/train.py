"""Supervised pre-training of a policy on a LeRobot dataset (``vlarl-sft``), then success evaluation.

    vlarl-sft recipe=metaworld_10_ppo_openpi_tiny dataset=datasets/mt10-64px-10 sft.steps=2000

The policy is the recipe's (``policy.*``, with the env's action chunk), so the checkpoint is the one
its RL stage loads. Training samples frames uniformly, each with the next H actions of its episode
(H = the policy's action horizon; the pi0 family regresses them with its flow-matching loss). The
run directory ``<runner.output_dir>/<runner.name or sft-<recipe>-<time>>`` gets ``config.yaml``,
``tensorboard/`` and ``metrics.jsonl``, ``checkpoints/step_N/`` (``save_pretrained``, written
atomically) and ``eval.json``: the trainer's evaluator (``eval.*`` on ``env.*``) scores the trained
policy, exactly as vlarl-eval and vlarl-train's evaluation before RL would.
"""

from __future__ import annotations

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
from vlarl_trainer.config import VlarlConfig, to_dict, to_yaml
from vlarl_trainer.data import ActionChunkSampler, DemonstrationDataset, load_dataset
from vlarl_trainer.metrics import MetricLogger
from vlarl_trainer.progress import write
from vlarl_trainer.run_dirs import new_run_dir


@dataclass
class SFTResult:
    run_dir: Path
    checkpoint: Path
    first_loss: float
    final_loss: float
    train_seconds: float
    evaluation: dict[str, Any] | None
    """The evaluator's report (``metrics``, ``table``), or None when ``sft.evaluate`` is off."""


def check_sft_config(config: VlarlConfig) -> None:
    """Every ``sft.*`` number in its range, and a dataset named."""
    sft = config.sft
    if config.dataset is None:
        raise ValueError("vlarl-sft trains on demonstrations: set dataset=<dir> (a vlarl-collect dataset)")
    for name in ("steps", "batch_size", "log_every"):
        if getattr(sft, name) <= 0:
            raise ValueError(f"sft.{name} must be positive, got {getattr(sft, name)}")
    if sft.lr <= 0:
        raise ValueError(f"sft.lr must be positive, got {sft.lr}")
    if not 0 <= sft.warmup_steps < sft.steps:
        raise ValueError(f"sft.warmup_steps must lie in [0, sft.steps={sft.steps}), got {sft.warmup_steps}")
    if not 0 <= sft.final_lr_fraction <= 1:
        raise ValueError(f"sft.final_lr_fraction must be in [0, 1], got {sft.final_lr_fraction}")


def check_dataset_matches_env(dataset: DemonstrationDataset, config: VlarlConfig) -> None:
    """A dataset vlarl-collect wrote names its env; SFT for another env's recipe would train on the wrong tasks."""
    collected_on = (dataset.info or {}).get("vlarl", {}).get("env_id")
    if collected_on is not None and collected_on != config.env.id:
        raise ValueError(f"dataset {dataset.root} was collected on {collected_on}, the recipe's env.id is "
                         f"{config.env.id}: set env.id={collected_on} or use a dataset of {config.env.id}")


def check_policy_fits(policy: VLAPolicy, dataset: DemonstrationDataset) -> None:
    """The dataset must give the policy its action and state sizes and its first camera."""
    config = policy.config
    if (config.action_dim, config.state_dim) != (dataset.action_dim, dataset.state_dim):
        raise ValueError(f"policy expects action_dim={config.action_dim}, state_dim={config.state_dim}; dataset "
                         f"{dataset.root} has action_dim={dataset.action_dim}, state_dim={dataset.state_dim}")
    cameras = [f"{camera}_images" for camera in dataset.images]
    if config.camera_keys[0] not in cameras:
        raise ValueError(f"policy reads camera {config.camera_keys[0]!r}; dataset {dataset.root} has {cameras}")


def build_policy(config: VlarlConfig, dataset: DemonstrationDataset) -> VLAPolicy:
    """The recipe's policy sized for the dataset (state statistics from it), or ``policy.pretrained``."""
    if config.policy.pretrained is not None:
        policy = vlarl_policies.from_pretrained(config.policy.pretrained)
        check_policy_fits(policy, dataset)
        return policy.train()
    policy = vlarl_policies.make(config.policy.name, preset=config.policy.preset, action_dim=dataset.action_dim,
                                 state_dim=dataset.state_dim, tokenizer_corpus=dataset.tasks,
                                 **{**config.policy.kwargs, "action_chunk": config.env.action_chunk})
    check_policy_fits(policy, dataset)
    state_stats = dataset.stats.get("observation.state")
    if state_stats is None:
        raise ValueError(f"dataset {dataset.root} has no observation.state statistics in meta/stats.json")
    if policy.config.state_in_prompt:
        policy.set_state_stats(q01=state_stats["q01"], q99=state_stats["q99"])
    else:
        policy.set_state_stats(mean=state_stats["mean"], std=state_stats["std"])
    return policy.train()


def learning_rate_factor(step: int, config: Any) -> float:
    """Linear warm-up to 1, then cosine decay to ``final_lr_fraction`` at the last step (``config``: ``sft.*``)."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.final_lr_fraction + (1 - config.final_lr_fraction) * 0.5 * (1 + math.cos(math.pi * progress))


def train(policy: VLAPolicy, dataset: DemonstrationDataset, config: Any, seed: int,
          log: MetricLogger) -> tuple[float, float]:
    """AdamW on the policy's supervised loss with ``config`` (``sft.*``); returns the mean loss of the first and
    last log windows."""
    sampler = ActionChunkSampler(dataset, policy.config.action_horizon)
    rng = np.random.default_rng(seed)
    parameters = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, betas=tuple(config.betas), weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: learning_rate_factor(step, config))
    window: list[torch.Tensor] = []
    window_losses: list[float] = []
    window_start = time.perf_counter()
    for step in range(1, config.steps + 1):
        loss, metrics = policy.sft_loss(sampler.sample(config.batch_size, rng))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(parameters, config.clip_grad)
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
            write(f"step {step:>6}  loss {mean_loss:.4f}  grad_norm {float(grad_norm):.3f}  "
                  f"{len(window) / elapsed:.1f} steps/s")
            window, window_start = [], time.perf_counter()
            log.advance({"loss": mean_loss})
        else:
            log.advance()
    return window_losses[0], window_losses[-1]


def run_sft(config: VlarlConfig) -> SFTResult:
    """Train, save and evaluate; everything lands in a new run directory."""
    check_sft_config(config)
    torch.set_num_threads(config.runner.torch_threads)
    torch.manual_seed(config.runner.seed)
    dataset = load_dataset(config.dataset)
    check_dataset_matches_env(dataset, config)
    policy = build_policy(config, dataset)
    run_dir = new_run_dir(config.runner.output_dir, config.runner.name, f"sft-{config.recipe or 'run'}",
                          "runs never overwrite each other (choose another runner.name)")
    (run_dir / "config.yaml").write_text(to_yaml(config))
    print(f"run: {run_dir}\ndataset: {dataset.root} ({dataset.num_episodes} episodes, {dataset.num_frames} frames, "
          f"{len(dataset.tasks)} tasks)", flush=True)
    log = MetricLogger(run_dir, config.runner.logger, to_dict(config), config.sft.steps, start_step=0,
                       progress=config.runner.progress, stage="sft")
    try:
        started = time.perf_counter()
        first_loss, final_loss = train(policy, dataset, config.sft, config.runner.seed, log)
        train_seconds = time.perf_counter() - started
        checkpoint = policy.save_pretrained(run_dir / "checkpoints" / f"step_{config.sft.steps}")
        evaluation = None
        if config.sft.evaluate:
            from vlarl_trainer.rl.evaluation import evaluate_checkpoint, report_json

            evaluation = evaluate_checkpoint(config, checkpoint)
            log.log(config.sft.steps, evaluation["metrics"])
            scored = report_json(evaluation, config.eval.sampling)
            (run_dir / "eval.json").write_text(json.dumps(scored, indent=2) + "\n")
    finally:
        log.close()
    return SFTResult(run_dir, checkpoint, first_loss, final_loss, train_seconds, evaluation)
