"""Env steps/s of the trainer's rollout with 1 and 2 pipeline stages, side by side in one run.

The env cost of one policy call (n envs x C sub-steps) is balanced against the policy cost
(one ``act`` for n envs) by choosing the action chunk C from costs measured first, in this
process. Both configurations then alternate in rounds on the same embedded Ray; the median
round is reported.

    uv run python benchmarks/pipeline.py [--num-envs 4] [--rounds 3] [--chunk-steps 8]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import gymnasium as gym
import numpy as np
import torch

import vlarl_envs  # noqa: F401
import vlarl_policies
from vlarl_trainer.cluster import start_ray
from vlarl_trainer.config import load_config
from vlarl_trainer.rollout import run_episodes
from vlarl_trainer.runner import Trainer, training_options

ENV_ID = "vlarl/MetaWorld-reach-v3"
IMAGE_SIZE = 64


def measured_costs(num_envs: int) -> tuple[float, float]:
    """(seconds per env sub-step for n envs, seconds per act for n envs), in this process."""
    torch.set_num_threads(1)
    envs = [gym.make(ENV_ID, image_size=IMAGE_SIZE, horizon=10**6) for _ in range(num_envs)]
    observations = [env.reset(seed=i)[0] for i, env in enumerate(envs)]
    action = np.zeros(4, np.float32)
    for env in envs:
        env.step(action)
    start = time.perf_counter()
    for _ in range(10):
        for env in envs:
            env.step(action)
    env_time = (time.perf_counter() - start) / 10
    policy = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4, action_chunk=1)
    batch = {
        "main_images": np.stack([o["main_images"] for o in observations]),
        "states": np.stack([o["states"] for o in observations]),
        "task_description": [o["task_description"] for o in observations],
    }
    policy.act(batch)
    start = time.perf_counter()
    for _ in range(5):
        policy.act(batch)
    policy_time = (time.perf_counter() - start) / 5
    for env in envs:
        env.close()
    return env_time, policy_time


def trainer(stages: int, num_envs: int, chunk: int, chunk_steps: int, out: str, policy: str | None) -> Trainer:
    overrides = [
        "recipe=metaworld_10_ppo_openpi_tiny", f"env.id={ENV_ID}", f"env.num_envs={num_envs}",
        f"env.action_chunk={chunk}", f"env.max_steps={chunk * chunk_steps}",
        f"env.kwargs={{obs_mode: rgb, image_size: {IMAGE_SIZE}, horizon: {10**6}}}",
        f"actor.global_batch_size={num_envs}", f"actor.micro_batch_size={num_envs}",
        f"rollout.pipeline_stage_num={stages}", "cluster.component_placement={env: 0, rollout: 1, actor: 0}",
        f"runner.output_dir={out}", f"runner.name=stages_{stages}", "runner.progress=false",
    ]
    if policy is not None:
        overrides.append(f"policy.pretrained={policy}")
    return Trainer(load_config(overrides))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, default=4, help="envs per configuration (2 shards of n/2 with 2 stages)")
    parser.add_argument("--chunk-steps", type=int, default=8, help="policy calls per measured episode")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    env_time, policy_time = measured_costs(args.num_envs // 2)
    chunk = max(1, round(policy_time / env_time))
    print(f"per shard of {args.num_envs // 2} envs: env sub-step {env_time * 1e3:.1f} ms, policy act "
          f"{policy_time * 1e3:.1f} ms -> action chunk {chunk} (env {chunk * env_time * 1e3:.1f} ms per call)")
    start_ray(None, num_cpus=2)
    with tempfile.TemporaryDirectory() as out:
        one = trainer(1, args.num_envs, chunk, args.chunk_steps, out, None)
        two = trainer(2, args.num_envs, chunk, args.chunk_steps, out, str(one.run_dir / "initial_policy"))
        rates: dict[int, list[float]] = {1: [], 2: []}
        for round_index in range(args.rounds + 1):
            for stages, runner in ((1, one), (2, two)):
                options = training_options(runner.config, round_index, 0)
                start = time.perf_counter()
                run_episodes(runner.shards, options, args.chunk_steps, deterministic=False, seed=round_index)
                elapsed = time.perf_counter() - start
                if round_index > 0:  # the first round warms up both
                    rates[stages].append(args.num_envs * args.chunk_steps * chunk / elapsed)
        one.close()
        two.close()
    first, second = statistics.median(rates[1]), statistics.median(rates[2])
    print("| pipeline_stage_num | env steps/s |\n|---|---|")
    print(f"| 1 | {first:.1f} |\n| 2 | {second:.1f} |")
    print(f"2 stages / 1 stage: {second / first:.2f}")


if __name__ == "__main__":
    main()
