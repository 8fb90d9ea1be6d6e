"""The training loop: sync weights, roll out, compute advantages, update, log, evaluate, save.

    Trainer(load_config(["recipe=metaworld_10_ppo_openpi_tiny"])).run()
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch

from vlarl_trainer.config import VlarlConfig, config_from_yaml, to_dict, to_yaml
from vlarl_trainer.metrics import MetricLogger, truncate_metrics
from vlarl_trainer.progress import write
from vlarl_trainer.rl import checkpoint as checkpoints
from vlarl_trainer.rl.batch import build_batch, concat_epochs, minibatch_plan
from vlarl_trainer.rl.cluster import Deadline, WorkerGroup, check_reachable, start_ray
from vlarl_trainer.rl.eval_env import evaluation_env
from vlarl_trainer.rl.evaluation import (
    add_calvin_chains,
    add_training_env_splits,
    evaluate_config,
    logged_evaluation,
)
from vlarl_trainer.rl.reaper import start_reaper, stop_reaper
from vlarl_trainer.rl.rollout import Shards, place_workers, run_episodes, start_env_workers, start_inference_workers
from vlarl_trainer.rl.stopping import Abandon, RunStopped, StopSignals
from vlarl_trainer.rl.training_episodes import success_per_task, training_options
from vlarl_trainer.rl.validation import (
    Layout,
    check_pretrained_exists,
    sampling_overrides,
    validate_run,
)
from vlarl_trainer.rl.workers.actor_worker import ActorWorker, train_metric_name
from vlarl_trainer.rl.workers.env_worker import EPISODE_STATISTICS
from vlarl_trainer.rl.workers.process import local_rendezvous
from vlarl_trainer.run_dirs import new_run_dir, write_atomically


def rl_run_dir(config: VlarlConfig) -> Path:
    """A fresh run folder ``<runner.output_dir>/<runner.name or recipe-time>``; an existing one is never reused."""
    return new_run_dir(config.runner.output_dir, config.runner.name, config.recipe or "run",
                       "runs are never overwritten (choose runner.name, or continue one with resume=<its directory>)")


def resumed_config(resume: str, overrides: list[str]) -> VlarlConfig:
    """The saved config of a run, with the overrides given on resuming (e.g. runner.max_steps)."""
    run_dir = Path(resume)
    if not (run_dir / "config.yaml").exists():
        raise ValueError(f"resume={resume}: expected a run directory with config.yaml, found none")
    config = config_from_yaml(
        run_dir / "config.yaml", [o for o in overrides if not o.startswith(("resume=", "recipe="))]
    )
    config.resume = str(run_dir)
    return config


def auto_resumed_config(config: VlarlConfig, overrides: list[str]) -> VlarlConfig:
    """``resume=auto``: the run ``runner.name`` names, continued with ``overrides`` when its directory holds
    a run, otherwise started anew from ``config``."""
    if config.runner.name is None:
        raise ValueError("resume=auto continues the run runner.name names: set runner.name=<name>")
    run_dir = Path(config.runner.output_dir) / config.runner.name
    if (run_dir / "config.yaml").exists():
        print(f"resume=auto: continuing {run_dir}", flush=True)
        return resumed_config(str(run_dir), overrides)
    if not config.recipe:
        raise ValueError(f"resume=auto found no run at {run_dir} and starts one: name its recipe (recipe=<name>)")
    return dataclasses.replace(config, resume=None)


def initial_policy(config: VlarlConfig, layout: Layout, run_dir: Path, instructions: list[str]) -> str:
    """The directory every worker loads the starting policy from: ``policy.pretrained``, or the run's
    ``initial_policy`` where the run makes one (a new policy, or the pretrained one with the sampling
    settings ``policy.kwargs`` changes, such as a flow-SDE noise level its SFT run did not use).

    A run resumed before its first checkpoint finds the first policy it wrote already there and starts
    from that one: it is written atomically, so it is whole, and it is the policy the run began with.
    """
    resampled = sampling_overrides(config) if config.policy.pretrained is not None else {}
    if config.policy.pretrained is not None and not resampled:
        return config.policy.pretrained
    written = run_dir / "initial_policy"
    if written.exists():
        return str(written)
    import vlarl_policies

    if resampled:
        return str(vlarl_policies.resample_saved(config.policy.pretrained, written, **resampled))
    torch.manual_seed(config.runner.seed)
    policy = vlarl_policies.make(
        config.policy.name,
        preset=config.policy.preset,
        tokenizer_corpus=instructions,
        **{"action_dim": layout.action_dim, "state_dim": layout.state_dim, "action_chunk": config.env.action_chunk,
           **config.policy.kwargs},
    )
    return str(policy.save_pretrained(written))


def env_instructions(config: VlarlConfig) -> list[str]:
    """Every instruction the training and evaluation envs can give (their families' instruction sets,
    paraphrases included), so the tokenizer of a new policy covers them."""
    from vlarl_envs import family_of

    sentences: list[str] = []
    for env_id in dict.fromkeys((config.env.id, evaluation_env(config).env.id)):
        instructions = family_of(env_id).instructions(env_id)
        sentences += [sentence for options in instructions.sentences.values() for sentence in options]
    return list(dict.fromkeys(sentences))


class Trainer:
    def __init__(self, config: VlarlConfig) -> None:
        self.stop_signals = StopSignals().install()
        """The run's stop signals, caught from its start: one that comes while the workers start stops the run
        before its first step; ``run`` gives the previous handlers back when it ends, as ``close`` does."""
        try:
            self._set_up(config)
        except BaseException:
            self.stop_signals.restore()
            raise

    def _set_up(self, config: VlarlConfig) -> None:
        check_pretrained_exists(config)
        check_reachable(config.cluster.address)
        self.layout, self.eval_layout = validate_run(config)
        self.config = config
        self.resume_from: Path | None = None
        if config.resume is not None:
            self.run_dir = Path(config.resume)
            latest = checkpoints.latest_intact_checkpoint(self.run_dir, report=write)
            # A run stopped before its first checkpoint starts again from its first policy.
            self.resume_from = latest
            self.start_step = 0 if latest is None else checkpoints.read_state(latest)["step"]
            truncate_metrics(self.run_dir / "metrics.jsonl", self.start_step)
            policy_path = (str(latest / "policy") if latest is not None
                           else initial_policy(config, self.layout, self.run_dir, env_instructions(config)))
        else:
            self.run_dir = rl_run_dir(config)
            write_atomically(self.run_dir / "config.yaml", to_yaml(config))
            self.start_step = 0
            policy_path = initial_policy(config, self.layout, self.run_dir, env_instructions(config))
        self.synced_step: int | None = None
        """The training step whose weights the rollout workers hold, once the actor's were synced."""
        self.finished_step = self.start_step
        """The last training step whose update is done."""
        self.restarts_logged = 0
        """Env worker replacements already counted in a step's ``env/restarts``."""
        self.reaper = None
        self.gpus = None
        """The run's GPU placement group (None without GPUs), given back at ``close``."""
        self.policy_path = policy_path
        """The saved policy the workers started from: the architecture of every weight the actor hands out."""
        self._start_workers(policy_path)

    # ------------------------------------------------------------------ set-up

    def _start_workers(self, policy_path: str) -> None:
        config, layout = self.config, self.layout
        start_ray(config.cluster.address, config.cluster.num_cpus)
        self.reaper = start_reaper()
        placements = dict(layout.placement)
        if self.eval_layout is not layout:
            placements["evaluation env"] = self.eval_layout.placement["env"]
        self.gpus = place_workers(placements, config.cluster.start_timeout)
        self.deadline = Deadline(config.cluster.call_timeout)
        self.shards = start_inference_workers(config, layout, policy_path, self.gpus, self.deadline)
        self.env, self.rollout = self.shards.env, self.shards.rollout
        self.eval_shards = self.shards
        if self.eval_layout is not layout:
            # Another env to score on: env workers of their own, acting through the same rollout workers.
            eval_env = start_env_workers(evaluation_env(config), self.eval_layout, self.gpus, self.deadline)
            self.eval_shards = Shards(eval_env, self.rollout, config.rollout.pipeline_stage_num,
                                      self.eval_layout.envs_per_stage, config.cluster.max_env_restarts)
        world = layout.actor_workers
        samples = config.env.num_envs * config.rollout.rollout_epoch * layout.chunk_steps
        optimizer_steps = (config.runner.max_steps * config.actor.update_epoch
                           * max(1, samples // config.actor.global_batch_size))
        actor_args = [((rank, world, None, policy_path, config.actor, config.algorithm,
                        optimizer_steps, actor_threads(config)), {}) for rank in range(world)]
        self.actor = WorkerGroup("actor", ActorWorker, layout.placement["actor"], actor_args, self.gpus, self.deadline,
                                 spread=True)
        for group in self.groups:
            group.identify(config.cluster.start_timeout)
        # Under an embedded Ray every rank runs here; on a cluster they meet where Ray put rank 0, which may be
        # another node than the driver's.
        rendezvous = (local_rendezvous() if config.cluster.address is None
                      else self.actor.get(self.actor.workers[0].rendezvous_point.remote()))
        self.actor.get(self.actor.call("join", rendezvous), config.cluster.start_timeout)
        self.write_workers()
        if self.resume_from is not None:
            self.actor.get(self.actor.call("load", str(self.resume_from)))

    @property
    def groups(self) -> list[WorkerGroup]:
        return list(dict.fromkeys((self.env, self.eval_shards.env, self.rollout, self.actor)))

    def write_workers(self) -> None:
        """``workers.json``: each role's pids, rewritten when an env worker is replaced."""
        roles = {"env": self.env, "rollout": self.rollout, "actor": self.actor}
        if self.eval_shards.env is not self.env:
            roles["eval_env"] = self.eval_shards.env
        pids = {role: [process[1] for process in group.processes] for role, group in roles.items()}
        write_atomically(self.run_dir / "workers.json", json.dumps(pids))

    @property
    def env_restarts(self) -> int:
        """Env workers replaced so far, in training rollouts and evaluations (counted in the next step)."""
        distinct = [self.shards] if self.eval_shards is self.shards else [self.shards, self.eval_shards]
        return sum(shards.env_restarts for shards in distinct)

    # ------------------------------------------------------------------ loop

    def run(self) -> dict[str, Any]:
        """Train to ``runner.max_steps``, evaluating and saving as configured.

        Raises:
            RunStopped: a SIGTERM or SIGINT arrived; the last finished step's checkpoint is written.
        """
        config = self.config
        logger = MetricLogger(self.run_dir, config.runner.logger, to_dict(config), config.runner.max_steps,
                              self.start_step, config.runner.progress, config.runner.wandb_project,
                              config.runner.wandb_name)
        results: dict[str, Any] = {}
        metrics_path = self.run_dir / "metrics.jsonl"
        try:
            with self.stop_signals as stop:
                self.deadline.abandon = stop.should_abandon
                try:
                    self._train(logger, results, metrics_path, stop)
                except Abandon:
                    pass
                if stop.signum is not None:
                    raise RunStopped(stop.signum, self.finished_step, self.checkpoint_of_finished_step(),
                                     self.run_dir)
        finally:
            self.deadline.abandon = lambda: False
            logger.close()
        results["run_dir"] = str(self.run_dir)
        return results

    def _train(self, logger: MetricLogger, results: dict[str, Any], metrics_path: Path, stop: StopSignals) -> None:
        config = self.config
        with stop.abandonable():
            if config.eval.at_start:
                # A resumed run reports the evaluation before training that its first process logged.
                logged = logged_evaluation(metrics_path, 0) if config.resume is not None else None
                results["before"] = logged if logged is not None or self.start_step > 0 else self._evaluate(0, logger)
            if self.start_step > 0 and self.evaluation_due(self.start_step):
                # An evaluation due at the checkpoint's step, unless the stopped process logged it.
                results["after"] = (logged_evaluation(metrics_path, self.start_step)
                                    or self._evaluate(self.start_step, logger))
        for step in range(self.start_step, config.runner.max_steps):
            metrics = self.train_step(step, stop)
            self.finished_step = step + 1
            logger.log(step + 1, metrics)
            logger.advance({"env/success_once": metrics["env/success_once"]})
            last = step + 1 == config.runner.max_steps
            if last or (config.runner.save_interval and (step + 1) % config.runner.save_interval == 0):
                self.save(step + 1)
            if stop.signum is not None:
                return
            if self.evaluation_due(step + 1):
                with stop.abandonable():
                    results["after"] = self._evaluate(step + 1, logger)

    def evaluation_due(self, step: int) -> bool:
        """Whether the run evaluates after training step ``step``."""
        interval = self.config.eval.interval
        return step == self.config.runner.max_steps or bool(interval and step % interval == 0)

    def checkpoint_of_finished_step(self) -> Path | None:
        """The checkpoint of the last finished step, written now unless it exists (None before any step)."""
        if self.finished_step == 0:
            return None
        existing = checkpoints.checkpoint_dir(self.run_dir, self.finished_step)
        return existing if existing.exists() else self.save(self.finished_step)

    def train_step(self, step: int, stop: StopSignals | None = None) -> dict[str, float]:
        """One training step; returns its metrics (names of docs/architecture.md). A stop signal
        abandons its rollouts (raising Abandon), and lets its update finish."""
        config, layout = self.config, self.layout
        timings: dict[str, float] = {}
        start = time.perf_counter()
        with stop.abandonable() if stop is not None else contextlib.nullcontext():
            self._sync_weights(step)
            timings["time/sync_weights"] = time.perf_counter() - start
            mark = time.perf_counter()
            epochs = []
            for epoch in range(config.rollout.rollout_epoch):
                epoch_start = time.perf_counter()
                options = training_options(config, step, epoch)
                seed = int(np.random.default_rng([config.runner.seed, step, epoch]).integers(2**31))
                video = (self.video_dir / f"train_step_{step + 1}.mp4"
                         if epoch == 0 and self.records_video(step) else None)
                sampling = "deterministic" if config.rollout.deterministic else "sample"
                epochs.append(run_episodes(self.shards, options, layout.chunk_steps, sampling, seed,
                                           video_path=None if video is None else str(video),
                                           video_info=config.runner.video_info))
                self.deadline.measured(time.perf_counter() - epoch_start)
            timings["time/generate_rollouts"] = time.perf_counter() - mark

        mark = time.perf_counter()
        batch, metrics = build_batch(concat_epochs(epochs), config.algorithm)
        # GRPO's group filter can leave nothing to learn from (every group all-fail or all-success).
        plan = [] if len(batch["weights"]) < layout.actor_workers else minibatch_plan(
            len(batch["weights"]), config.actor.global_batch_size, config.actor.micro_batch_size,
            layout.actor_workers, config.actor.update_epoch, config.runner.seed * 100003 + step)
        timings["time/cal_adv_and_returns"] = time.perf_counter() - mark

        mark = time.perf_counter()
        if plan:
            batch_ref = ray.put(batch)
            with rollout_offloaded(self.rollout, config.rollout.offload):
                per_rank = self.actor.get(self.actor.call("train", batch_ref, plan))
            for name in per_rank[0]:
                metrics[train_metric_name(name)] = float(np.mean([m[name] for m in per_rank]))
        timings["time/actor_training"] = time.perf_counter() - mark
        self.deadline.measured(timings["time/actor_training"])
        metrics["env/restarts"] = float(self.env_restarts - self.restarts_logged)
        self.restarts_logged = self.env_restarts
        if metrics["env/restarts"]:
            self.write_workers()
        for name in EPISODE_STATISTICS:
            metrics[f"env/{name}"] = float(np.mean(np.concatenate([e[name] for e in epochs]).astype(np.float64)))
        metrics.update(success_per_task(epochs))
        timings["time/step"] = time.perf_counter() - start
        return {**metrics, **timings}

    def _sync_weights(self, step: int) -> None:
        """The actor's weights to every rollout worker, as the policy of training step ``step``; an
        evaluation has already sent them when the step after it starts, and a large policy's broadcast
        is not free."""
        if self.synced_step == step:
            return
        gathered = self._actor_weight_refs()
        # The rollout workers take rank 0's answer from Ray's object store, fetched from the node that
        # holds it: the weights never pass through this process. The other ranks answer empty dicts.
        self.rollout.get(self.rollout.call("load_weights", gathered[0], step))
        self.actor.get(gathered[1:])
        self.synced_step = step

    def _actor_weight_refs(self) -> list[ray.ObjectRef]:
        """One ``weights`` call per actor rank that takes part: FSDP gathers the weights from every rank's
        shard, so all ranks are called (rank 0 answers them, the others an empty dict); a DDP rank holds
        them whole and answers alone."""
        ranks = self.actor.workers if self.config.actor.strategy == "fsdp" else self.actor.workers[:1]
        return [worker.weights.remote() for worker in ranks]

    def actor_weights(self) -> dict[str, torch.Tensor]:
        """Actor rank 0's weights, in this process."""
        return self.actor.get(self._actor_weight_refs())[0]

    def _evaluate(self, step: int, logger: MetricLogger) -> dict[str, Any]:
        """Evaluate the actor's policy after ``step`` updates. Its weights are synced first: the rollout
        workers hold the ones the last rollout sampled with, one update behind (or, on resume, the
        starting policy)."""
        config = self.config
        start = time.perf_counter()
        self._sync_weights(step)
        video_dir = self.video_dir / f"eval_step_{step}" if config.eval.video else None
        report = evaluate_config(config, self.eval_shards, self.eval_layout.chunk_steps, video_dir)
        add_training_env_splits(report, config, self.shards, self.layout.chunk_steps)
        if config.eval.calvin_chains:
            add_calvin_chains(report, config, self.eval_shards)
        report["metrics"]["time/eval"] = time.perf_counter() - start
        self.deadline.measured(report["metrics"]["time/eval"])
        logger.log(step, report["metrics"])
        return report

    @property
    def video_dir(self) -> Path:
        return Path(self.config.runner.video_dir) if self.config.runner.video_dir else self.run_dir / "videos"

    def records_video(self, step: int) -> bool:
        """Whether training step ``step`` (from 0) records its first rollout's video."""
        interval = self.config.rollout.video_interval
        return interval > 0 and (step + 1) % interval == 0

    def save(self, step: int) -> Path:
        """Checkpoint policy, optimizer and scheduler (RNG streams are derived from the step)."""
        return checkpoints.write_checkpoint(
            self.run_dir, step, lambda tmp: self.actor.get(self.actor.call("save", str(tmp))),
            {"seed": self.config.runner.seed, "version": step}, keep_last=self.config.runner.keep_last,
        )

    def close(self) -> None:
        """Stop the workers and the orphan watcher (console scripts leave the watcher to end with them), and
        give the stop signals their previous handlers back."""
        self.stop_signals.restore()
        for group in self.groups:
            group.kill()
        if self.gpus is not None:
            self.gpus.remove()
            self.gpus = None
        if self.reaper is not None:
            stop_reaper(self.reaper)


@contextlib.contextmanager
def rollout_offloaded(rollout: WorkerGroup, offload: bool) -> Iterator[None]:
    """With ``offload`` (``rollout.offload``), the rollout workers' policy waits on the CPU while the
    block (the actor's update) runs, and is back on its device for the weight sync and rollout after it."""
    if not offload:
        yield
        return
    rollout.get(rollout.call("offload"))
    yield
    rollout.get(rollout.call("onload"))


def actor_threads(config: VlarlConfig) -> int:
    """torch threads of an actor process: ``actor.torch_threads``, or ``runner.torch_threads`` when unset."""
    return config.runner.torch_threads if config.actor.torch_threads is None else config.actor.torch_threads
