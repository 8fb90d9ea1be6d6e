"""One actor update of a recipe's policy with random weights, beside the dry run's estimate for the same
settings: seconds per optimizer step and, on a GPU, the CUDA peak against the estimated peak.

The update is the trainer's own (``ActorWorker.train`` on one rank): PPO's loss on the policy's own
samples, AdamW, the recipe's strategy, precision, gradient checkpointing and offload. Needs no simulator:
the observations are zero images and states of the sizes given. Each ``--variants`` entry is a set of
overrides measured on the same saved policy and batch:

    python benchmarks/actor_update.py --recipe libero_10_ppo_openpi --micro-batch 32 \\
        --variants "actor.offload=false" "actor.offload=true"
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from gymnasium import spaces

import vlarl_policies
from vlarl_trainer.config import load_config
from vlarl_trainer.rl.batch import minibatch_plan
from vlarl_trainer.rl.memory import estimate_actor_memory, observation_batch
from vlarl_trainer.rl.runner import actor_threads
from vlarl_trainer.rl.validation import Layout
from vlarl_trainer.rl.workers.actor_worker import ActorWorker
from vlarl_trainer.rl.workers.process import local_rendezvous

GIB = 2**30
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
INSTRUCTION = "put both the alphabet soup and the tomato sauce in the basket"


def observation_space(image_size: int, wrist: bool, state_dim: int) -> spaces.Dict:
    image = spaces.Box(0, 255, (image_size, image_size, 3), np.uint8)
    cameras = {"main_images": image, **({"wrist_images": image} if wrist else {})}
    return spaces.Dict({**cameras, "states": spaces.Box(-np.inf, np.inf, (state_dim,), np.float32),
                        "task_description": spaces.Text(256)})


def one_rank_layout(action_dim: int, state_dim: int) -> Layout:
    return Layout(placement={"env": [(0,)], "rollout": [(0,)], "actor": [(0,)]}, envs_per_stage=1, chunk_steps=1,
                  action_dim=action_dim, state_dim=state_dim)


def saved_policy(config, args, directory: Path) -> str:
    """The recipe's policy with random weights, in bf16 as published checkpoints are, saved once."""
    torch.manual_seed(0)
    policy = vlarl_policies.make(
        config.policy.name, preset=config.policy.preset, tokenizer_corpus=[INSTRUCTION], device=DEVICE,
        dtype="bfloat16", **{"action_dim": args.action_dim, "state_dim": args.state_dim,
                             "action_chunk": config.env.action_chunk, **config.policy.kwargs})
    return str(policy.save_pretrained(directory / "policy"))


def ppo_batch(policy_path: str, space: spaces.Dict, samples: int, micro_batch: int) -> dict:
    """``samples`` of the policy's own actions as a rollout stores them, acted a micro-batch at a time."""
    policy = vlarl_policies.from_pretrained(policy_path).to(DEVICE)
    outputs = []
    with torch.no_grad():
        for _ in range(samples // micro_batch):
            outputs.append(policy.act(observation_batch(space, micro_batch, INSTRUCTION)))
    forward_inputs = {key: torch.cat([o.forward_inputs[key].cpu() for o in outputs])
                      for key in outputs[0].forward_inputs}
    logprobs = torch.cat([o.logprobs.cpu() for o in outputs]).float()
    values = torch.cat([o.values.cpu() for o in outputs]).float() if outputs[0].values is not None else None
    generator = torch.Generator().manual_seed(0)
    del policy, outputs
    release_cached_memory()
    return {"forward_inputs": forward_inputs, "old_logprobs": logprobs,
            "advantages": torch.randn(samples, generator=generator),
            "returns": torch.randn(samples, generator=generator), "old_values": values,
            "weights": torch.ones(samples), "policy_weights": torch.ones(samples)}


def measure(recipe: str, overrides: list[str], policy_path: str, batch: dict, args) -> str:
    config = load_config([f"recipe={recipe}", f"actor.micro_batch_size={args.micro_batch}",
                          f"actor.global_batch_size={args.micro_batch * args.accumulation}", *overrides])
    space = observation_space(args.image_size, args.wrist, args.state_dim)
    estimate, parameters = estimate_actor_memory(config, one_rank_layout(args.action_dim, args.state_dim), space,
                                                 [INSTRUCTION])
    samples = len(batch["weights"])
    plan = minibatch_plan(samples, samples, args.micro_batch, 1, 1, 0)
    worker = ActorWorker(0, 1, local_rendezvous(), policy_path, config.actor, config.algorithm,
                         total_optimizer_steps=10, threads=actor_threads(config))
    worker.train(batch, plan)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    worker.train(batch, plan)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() if DEVICE == "cuda" else None
    worker.close()
    del worker
    release_cached_memory()
    actor = config.actor
    settings = (f"{actor.strategy}, {actor.precision}{', ckpt' if actor.gradient_checkpointing else ''}"
                f"{', offload' if actor.offload else ''}, {actor_threads(config)} torch thread(s)")
    return (f"| {config.policy.name} {parameters / 1e9:.2f} B | {settings} | {args.micro_batch} x "
            f"{args.accumulation} | {seconds:.1f} | {'-' if peak is None else f'{peak / GIB:.1f}'} | "
            f"{estimate.peak / GIB:.1f} | {'-' if peak is None else f'{peak / estimate.peak:.2f}'} |")


def release_cached_memory() -> None:
    gc.collect()
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", default="libero_10_ppo_openpi")
    parser.add_argument("--micro-batch", type=int, default=32)
    parser.add_argument("--accumulation", type=int, default=2, help="micro-batches per optimizer step")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--wrist", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--state-dim", type=int, default=8)
    parser.add_argument("--action-dim", type=int, default=7)
    parser.add_argument("--variants", nargs="+", default=["actor.offload=false", "actor.offload=true"],
                        help="space-separated key=value overrides per variant, measured one after another")
    args = parser.parse_args()
    device = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU"
    print(f"{device}, torch {torch.__version__}, recipe {args.recipe}\n")
    print("| policy | actor (one rank) | micro-batch x steps | s per update | CUDA peak (GiB) | estimated peak "
          "(GiB) | CUDA / estimate |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as scratch:
        config = load_config([f"recipe={args.recipe}"])
        policy_path = saved_policy(config, args, Path(scratch))
        release_cached_memory()
        batch = ppo_batch(policy_path, observation_space(args.image_size, args.wrist, args.state_dim),
                          args.micro_batch * args.accumulation, args.micro_batch)
        for variant in args.variants:
            print(measure(args.recipe, variant.split(), policy_path, batch, args), flush=True)


if __name__ == "__main__":
    main()
