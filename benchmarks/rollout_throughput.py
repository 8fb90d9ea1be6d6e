"""Episodes per hour of the trainer's rollout and evaluation beside a plain loop, on the same envs and policy.

    python benchmarks/rollout_throughput.py --env vlarl/MetaWorld-MT10-v3
    python benchmarks/rollout_throughput.py --env vlarl/LIBERO-Spatial-v0 --recipe libero_spatial_ppo_openpi_tiny
    python benchmarks/rollout_throughput.py --env vlarl/MetaWorld-MT10-v3 env.num_envs=40 rollout.pipeline_stage_num=1

Three measurements, one after another in one run, of the same number of episodes from the recipe's policy at
its random start (so episodes run to their horizon):

- a plain loop in this process: the family's episode env (``make_episode_envs``, the env the trainer's env
  workers step) and ``policy.act``, torch's default threads, no Ray, one stage;
- the trainer's rollout: one training step's episodes (``env.num_envs`` x ``rollout.rollout_epoch``) through
  its workers, placement and pipeline stages, in ``Trainer.train_step``, whose update's seconds print too;
- the trainer's evaluation of as many episodes (``eval.sampling``), through its evaluation workers.

Each prints episodes per hour and env steps per second (chunks played x ``env.action_chunk``); the plain
loop also splits its time into the env (simulation and rendering) and the policy. The last line is
``trainer / plain loop: <ratio>``, the trainer's rollout episodes per hour over the plain loop's. Overrides
are the trainer's ``key=value``.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time

import numpy as np
import torch

import vlarl_policies
from vlarl_envs import family_of
from vlarl_trainer.config import load_config
from vlarl_trainer.rl.evaluation import evaluate_config
from vlarl_trainer.rl.runner import Trainer
from vlarl_trainer.rl.training_episodes import training_options
from vlarl_trainer.rl.workers.env_worker import policy_inputs
from vlarl_trainer.rl.workers.rollout_worker import SAMPLING_MODES


def plain_loop(config, policy_path: str, options: list[list[dict]]) -> dict[str, float]:
    """Every round of reset options played by one episode env and the policy in this process."""
    policy = vlarl_policies.from_pretrained(policy_path).eval()
    env = family_of(config.env.id).make_episode_envs(config.env.id, config.env.num_envs,
                                                     action_chunk=config.env.action_chunk, **config.env.kwargs)
    generator = torch.Generator().manual_seed(config.runner.seed)
    env_seconds = policy_seconds = 0.0
    steps = 0
    start = time.perf_counter()
    for round_options in options:
        mark = time.perf_counter()
        batch, _ = env.reset(round_options)
        env_seconds += time.perf_counter() - mark
        done = np.zeros(env.num_envs, bool)
        while not done.all():
            mark = time.perf_counter()
            with torch.no_grad():
                actions = policy.act(policy_inputs(batch), generator=generator, **SAMPLING_MODES["sample"]).actions
            policy_seconds += time.perf_counter() - mark
            mark = time.perf_counter()
            batch, _, done, _ = env.step(actions.numpy())
            env_seconds += time.perf_counter() - mark
        steps += sum(int(episode["episode_len"]) for episode in env.episode_statistics()) * config.env.action_chunk
    seconds = time.perf_counter() - start
    env.close()
    return {"seconds": seconds, "episodes": sum(len(o) for o in options), "env_steps": steps,
            "env_share": env_seconds / seconds, "policy_share": policy_seconds / seconds}


def trainer_step(trainer: Trainer) -> tuple[dict[str, float], float]:
    """One training step through the trainer's workers: its rollout (``time/generate_rollouts``, one step's
    episodes) and the seconds of its update (``time/actor_training``)."""
    config = trainer.config
    metrics = trainer.train_step(0)
    episodes = config.env.num_envs * config.rollout.rollout_epoch
    steps = round(metrics["env/episode_len"] * episodes) * config.env.action_chunk
    rollout = {"seconds": metrics["time/generate_rollouts"], "episodes": episodes, "env_steps": steps}
    return rollout, metrics["time/actor_training"]


def trainer_evaluation(trainer: Trainer) -> dict[str, float]:
    config = trainer.config
    start = time.perf_counter()
    report = evaluate_config(config, trainer.eval_shards, trainer.eval_layout.chunk_steps)
    episodes = report["episodes"]
    return {"seconds": time.perf_counter() - start, "episodes": len(episodes),
            "env_steps": int(sum(episode["episode_len"] for episode in episodes)) * config.env.action_chunk}


def row(name: str, measured: dict[str, float]) -> str:
    per_hour = measured["episodes"] / measured["seconds"] * 3600
    shares = (f"{measured['env_share']:.0%} env, {measured['policy_share']:.0%} policy"
              if "env_share" in measured else "-")
    return (f"| {name} | {measured['episodes']} | {measured['seconds']:.1f} | {per_hour:,.0f} | "
            f"{measured['env_steps'] / measured['seconds']:.0f} | {shares} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="vlarl/MetaWorld-MT10-v3")
    parser.add_argument("--recipe", default="metaworld_10_ppo_openpi_tiny")
    parser.add_argument("overrides", nargs="*", help="the trainer's key=value overrides")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as output_dir:
        base = load_config([f"recipe={args.recipe}", f"env.id={args.env}", *args.overrides])
        tasks = len(family_of(args.env).tasks(args.env, base.env.kwargs))
        episodes = base.env.num_envs * base.rollout.rollout_epoch
        config = load_config([f"recipe={args.recipe}", f"env.id={args.env}", *args.overrides,
                              f"runner.output_dir={output_dir}", "runner.name=throughput", "runner.progress=false",
                              f"eval.episodes_per_task={math.ceil(episodes / tasks)}", "eval.splits=[train]",
                              "eval.also_sampling=[]"])
        trainer = Trainer(config)
        try:
            rollout, update_seconds = trainer_step(trainer)
            evaluation = trainer_evaluation(trainer)
            options = [training_options(config, 0, epoch) for epoch in range(config.rollout.rollout_epoch)]
            plain = plain_loop(config, trainer.policy_path, options)
        finally:
            trainer.close()
    print(f"{args.env}, recipe {args.recipe} {' '.join(args.overrides)}: {config.env.num_envs} envs, "
          f"{config.rollout.pipeline_stage_num} stage(s), placement {dict(config.cluster.component_placement)}, "
          f"torch threads {torch.get_num_threads()} here")
    print("\n| measured | episodes | seconds | episodes per hour | env steps per second | plain loop's time |")
    print("|---|---|---|---|---|---|")
    print(row("plain loop (one process)", plain))
    print(row("trainer rollout", rollout))
    print(row("trainer evaluation", evaluation))
    print(f"\ntrainer update after the rollout: {update_seconds:.1f} s "
          f"({update_seconds / (update_seconds + rollout['seconds']):.0%} of the step)")
    ratio = (rollout["episodes"] / rollout["seconds"]) / (plain["episodes"] / plain["seconds"])
    print(f"\ntrainer / plain loop: {ratio:.2f}")


if __name__ == "__main__":
    main()
