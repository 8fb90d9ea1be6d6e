"""Env steps/s of the trainer's rollout with 1 and 2 pipeline stages, side by side in one run.

MetaWorld reach-v3 with 64 px images and a tiny pi0, env worker on CPU 0 and rollout worker
on CPU 1. With S stages the env worker steps one shard of n/S envs while the rollout worker
computes the next shard's actions, so the speed-up approaches 2 when an env step of a shard
costs what an act for it costs and both costs grow with the number of envs, as they do for a
published VLA. The tiny pi0's act is mostly per-call overhead (one act for 16 envs costs
little more than one for 8), so the benchmark widens its action expert (``--expert-width``)
until compute dominates, and the flow steps per act (``--denoise-steps``) balance its cost
against the env's. Both per-shard costs, and the act for all envs at once, are measured first
through Ray in the benchmark's own workers, and printed. Both configurations then alternate in
rounds on the same embedded Ray; the median round is reported.

    uv run python benchmarks/pipeline.py [--num-envs 32] [--expert-width 768] [--denoise-steps 2]
        [--chunk-steps 24] [--rounds 3]

32 envs by default: every call also pays a fixed cost (Ray's hops, the policy's per-call work),
which a shard of 16 envs spreads thin enough that both per-shard costs double with the shard
(16 -> 32 envs: env step 250 -> 503 ms, act 262 -> 483 ms), as the speed-up needs.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time

from vlarl_trainer.config import load_config
from vlarl_trainer.rl.cluster import start_ray
from vlarl_trainer.rl.rollout import run_episodes
from vlarl_trainer.rl.runner import Trainer
from vlarl_trainer.rl.training_episodes import training_options

ENV_ID = "vlarl/MetaWorld-reach-v3"
IMAGE_SIZE = 64


def call_costs(runner: Trainer, repeats: int = 8) -> tuple[float, float]:
    """(ms per env step, ms per act) for one shard of ``runner``, each timed alone through Ray
    in the workers that run the benchmark, so both include the same per-call overhead."""
    import ray  # after vlarl_trainer, which configures Ray's environment before its import
    env, policy = runner.shards.env.workers[0], runner.shards.rollout_worker(0)
    options = training_options(runner.config, 0, 0)[: runner.shards.envs_per_stage]
    ray.get(policy.begin.remote(0))
    observations = ray.get(env.reset.remote(0, options))
    env_times, act_times = [], []
    for _ in range(repeats + 2):
        start = time.perf_counter()
        actions = ray.get(policy.act.remote((0, 0), observations, "sample"))
        act_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        observations = ray.get(env.step.remote(0, actions))
        env_times.append(time.perf_counter() - start)
    return statistics.median(env_times[2:]) * 1e3, statistics.median(act_times[2:]) * 1e3


def trainer(stages: int, num_envs: int, chunk: int, chunk_steps: int, out: str, policy: str | None,
            denoise_steps: int, expert_width: int) -> Trainer:
    overrides = [
        "recipe=metaworld_10_ppo_openpi_tiny", f"env.id={ENV_ID}", f"env.num_envs={num_envs}",
        f"env.action_chunk={chunk}", f"env.max_steps={chunk * chunk_steps}",
        f"env.kwargs={{obs_mode: rgb, image_size: {IMAGE_SIZE}, horizon: {10**6}}}",
        f"actor.global_batch_size={num_envs}", f"actor.micro_batch_size={num_envs}",
        f"rollout.pipeline_stage_num={stages}", "cluster.component_placement={env: 0, rollout: 1, actor: 0}",
        f"runner.output_dir={out}", f"runner.name=stages_{stages}", "runner.progress=false",
        f"+policy.kwargs.num_steps={denoise_steps}", f"+policy.kwargs.expert_width={expert_width}",
        f"+policy.kwargs.expert_mlp_dim={4 * expert_width}",
    ]
    if policy is not None:
        overrides.append(f"policy.pretrained={policy}")
    return Trainer(load_config(overrides))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, default=32,
                        help="envs per configuration (2 shards of n/2 with 2 stages)")
    parser.add_argument("--expert-width", type=int, default=768,
                        help="width of the pi0 action expert (MLP 4x): large enough that an act's cost grows with "
                             "its envs")
    parser.add_argument("--denoise-steps", type=int, default=2,
                        help="pi0 flow steps per act: the knob that balances the policy's cost against the env's")
    parser.add_argument("--action-chunk", type=int, default=1, help="env sub-steps per policy call")
    parser.add_argument("--chunk-steps", type=int, default=24, help="policy calls per measured episode")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    # One render thread per env process (Mesa's llvmpipe starts one per core otherwise): the
    # env worker keeps to its own core while the rollout worker computes on the other.
    os.environ.setdefault("LP_NUM_THREADS", "1")
    start_ray(None, num_cpus=2)
    with tempfile.TemporaryDirectory() as out:
        build = functools.partial(trainer, num_envs=args.num_envs, chunk=args.action_chunk,
                                  chunk_steps=args.chunk_steps, out=out, denoise_steps=args.denoise_steps,
                                  expert_width=args.expert_width)
        one = build(1, policy=None)
        two = build(2, policy=str(one.run_dir / "initial_policy"))
        for runner in (two, one):
            env_ms, act_ms = call_costs(runner)
            print(f"per call for {runner.shards.envs_per_stage} envs, through Ray: env step {env_ms:.1f} ms, "
                  f"act ({args.denoise_steps} flow steps) {act_ms:.1f} ms")
        rates: dict[int, list[float]] = {1: [], 2: []}
        for round_index in range(args.rounds + 1):
            for stages, runner in ((1, one), (2, two)):
                options = training_options(runner.config, round_index, 0)
                start = time.perf_counter()
                run_episodes(runner.shards, options, args.chunk_steps, sampling="sample", seed=round_index)
                elapsed = time.perf_counter() - start
                if round_index > 0:  # the first round warms up both
                    rates[stages].append(args.num_envs * args.chunk_steps * args.action_chunk / elapsed)
        one.close()
        two.close()
    first, second = statistics.median(rates[1]), statistics.median(rates[2])
    print("| pipeline_stage_num | env steps/s |\n|---|---|")
    print(f"| 1 | {first:.1f} |\n| 2 | {second:.1f} |")
    print(f"2 stages / 1 stage: {second / first:.2f}")


if __name__ == "__main__":
    main()
