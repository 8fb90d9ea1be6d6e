"""Time act / evaluate_actions of every policy (pi0, pi0.5, OpenVLA, OpenVLA-OFT) and count their parameters; prints
Markdown tables.

    uv run --locked python benchmarks/policy_speed.py --threads 1            # tiny, CPU
    uv run --locked python benchmarks/policy_speed.py --threads 1 2 --batch 100 --policies pi0   # the trainer's
                                                                              # actor micro-batch, 1 vs 2 threads
    uv run --locked python benchmarks/policy_speed.py --preset base --device cuda --dtype bfloat16
    uv run --locked python benchmarks/policy_speed.py --threads 1 --policies pi0 --gradient-checkpointing

``act`` runs under no_grad as a rollout worker calls it; ``evaluate_actions`` runs with gradients as the
actor calls it, and ``evaluate + backward`` adds the backward pass of a PPO-style loss. Times are
medians over ``--repeats`` calls after ``--warmup`` calls, as wall-clock and as process CPU time. Parameter
counts build each preset on the meta device, so the published size costs no memory. With several
``--threads`` values every policy is timed at each in turn, in one process, and the last table gives each
value's wall-clock speed-up over the first. A per-sample table divides each policy's wall-clock times by
the batch, side by side in the same run: OpenVLA decodes C * A tokens one by one (C = 1 as published),
OpenVLA-OFT a chunk of C = 8 in one pass, pi0 a chunk of its ``action_chunk`` by flow matching.

``--gradient-checkpointing`` times ``evaluate + backward`` once more with ``set_gradient_checkpointing(True)``
and prints both times, their ratio and the activations each keeps for the backward pass (the bytes
autograd saves, parameters left out: a measure that works on the CPU too), plus the peak memory of
one call each on CUDA.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import torch

import vlarl_policies
from vlarl_policies.registry import preset_config
from vlarl_policies.tokenizer import PromptTokenizer

POLICIES = ("pi0", "pi05", "openvla", "openvla_oft")
INSTRUCTION = "pick up the red cube and put it on the plate"


def observation_batch(batch: int, image_size: int, state_dim: int, wrist: bool) -> dict:
    rng = np.random.default_rng(0)
    obs = {
        "main_images": rng.integers(0, 256, (batch, image_size, image_size, 3), dtype=np.uint8),
        "states": rng.uniform(-1, 1, (batch, state_dim)).astype(np.float32),
        "task_description": [INSTRUCTION] * batch,
    }
    if wrist:
        obs["wrist_images"] = rng.integers(0, 256, (batch, image_size, image_size, 3), dtype=np.uint8)
    return obs


def median_seconds(function, warmup: int, repeats: int, device: torch.device) -> tuple[float, float]:
    """Median wall-clock and process CPU seconds per call (CPU time is robust to other load on the cores)."""
    for _ in range(warmup):
        function()
    wall, cpu = [], []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize()
        wall.append(time.perf_counter() - start_wall)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def parameter_count(name: str, preset: str) -> int:
    cls, config = preset_config(name, preset, action_dim=7, state_dim=8)
    tokenizer = PromptTokenizer.train(["pick up the cube"], vocab_size=300)
    with torch.device("meta"):
        policy = cls(config, tokenizer)
    return sum(p.numel() for p in policy.parameters())


def time_policy(name: str, args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    device = torch.device(args.device)
    torch.manual_seed(0)
    policy = vlarl_policies.make(name, preset=args.preset, action_dim=7, state_dim=8, dtype=args.dtype,
                                 device=device, tokenizer_corpus=[INSTRUCTION])
    config = policy.config
    obs = observation_batch(args.batch, config.image_size, 8, wrist=len(config.camera_keys) > 1)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    rollout = policy.act(obs)

    def evaluate() -> None:
        policy.evaluate_actions(rollout.forward_inputs)

    def evaluate_backward() -> None:
        out = policy.evaluate_actions(rollout.forward_inputs)
        (-out.logprobs.sum(dim=(1, 2)).mean() + out.values.square().mean()).backward()
        policy.zero_grad(set_to_none=True)

    result = {
        "act": median_seconds(lambda: policy.act(obs), args.warmup, args.repeats, device),
        "evaluate": median_seconds(evaluate, args.warmup, args.repeats, device),
        "evaluate_backward": median_seconds(evaluate_backward, args.warmup, args.repeats, device),
    }
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**30
        result["peak_memory_gib"] = (peak, peak)
    if args.gradient_checkpointing:
        result["checkpointing"] = checkpointing_trade_off(policy, evaluate_backward, args, device)
    return result


def checkpointing_trade_off(policy, evaluate_backward, args: argparse.Namespace, device: torch.device
                            ) -> dict[str, dict[str, Any]]:
    """``evaluate + backward`` without and with gradient checkpointing: median (wall-clock, CPU) seconds,
    MiB of activations kept for the backward pass and, on CUDA, the peak GiB of one call."""
    trade_off: dict[str, dict[str, Any]] = {}
    for enabled in (False, True):
        policy.set_gradient_checkpointing(enabled)
        measured = {"seconds": median_seconds(evaluate_backward, args.warmup, args.repeats, device),
                    "activations_mib": saved_activation_bytes(policy, evaluate_backward) / 2**20}
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
            evaluate_backward()
            torch.cuda.synchronize()
            measured["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
        trade_off["checkpointed" if enabled else "plain"] = measured
    policy.set_gradient_checkpointing(False)
    return trade_off


def saved_activation_bytes(policy, function) -> int:
    """Bytes of the distinct tensors autograd saves for the backward pass while ``function`` runs,
    parameters left out: the activation memory gradient checkpointing trades for compute."""
    parameters = {p.untyped_storage().data_ptr() for p in policy.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        function()
    return sum(saved.values())


def print_speedups(results: dict, policies: list[str], threads: list[int]) -> None:
    """Wall-clock time at the first threads value divided by the time at each other value."""
    print(f"\n| policy | threads | speed-up over {threads[0]} thread(s): act | evaluate | evaluate + backward |")
    print("|---|---|---|---|---|")
    for name in policies:
        base = results[(name, threads[0])]
        for count in threads[1:]:
            ratios = [base[key][0] / results[(name, count)][key][0] for key in ("act", "evaluate", "evaluate_backward")]
            print(f"| {name} | {count} | " + " | ".join(f"{ratio:.2f}x" for ratio in ratios) + " |")


def print_per_sample(results: dict, args: argparse.Namespace) -> None:
    """Wall-clock milliseconds per sample of the batch, and each policy's time over the first policy's."""
    print(f"\n| policy | threads | act per sample (ms) | evaluate + backward per sample (ms) | "
          f"act / {args.policies[0]}'s | evaluate + backward / {args.policies[0]}'s |")
    print("|---|---|---|---|---|---|")
    for (name, threads), result in results.items():
        base = results[(args.policies[0], threads)]
        act, train = result["act"][0], result["evaluate_backward"][0]
        print(f"| {name} {args.preset} | {threads} | {1000 * act / args.batch:.2f} | {1000 * train / args.batch:.2f} | "
              f"{act / base['act'][0]:.2f}x | {train / base['evaluate_backward'][0]:.2f}x |")


def print_checkpointing(results: dict, args: argparse.Namespace) -> None:
    """evaluate + backward without and with gradient checkpointing, side by side, and their ratios."""
    cuda = args.device.startswith("cuda")
    print("\n| policy | threads | evaluate + backward (ms wall / CPU) | with checkpointing (ms wall / CPU) | "
          "time ratio (wall / CPU) | "
          "activations kept (MiB) | with checkpointing (MiB) | activation ratio |" +
          (" peak memory (GiB) | with checkpointing (GiB) |" if cuda else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if cuda else ""))
    for (name, threads), result in results.items():
        plain, checkpointed = result["checkpointing"]["plain"], result["checkpointing"]["checkpointed"]
        ratios = [with_it / without for with_it, without in zip(checkpointed["seconds"], plain["seconds"])]
        row = (f"| {name} {args.preset} | {threads} | {cell(plain['seconds'])} | {cell(checkpointed['seconds'])} | "
               f"{ratios[0]:.2f}x / {ratios[1]:.2f}x | "
               f"{plain['activations_mib']:.1f} | {checkpointed['activations_mib']:.1f} | "
               f"{checkpointed['activations_mib'] / plain['activations_mib']:.2f}x |")
        if cuda:
            row += f" {plain['peak_memory_gib']:.2f} | {checkpointed['peak_memory_gib']:.2f} |"
        print(row)


def cell(seconds: tuple[float, float]) -> str:
    return f"{1000 * seconds[0]:.1f} / {1000 * seconds[1]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads()])
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--gradient-checkpointing", action="store_true",
                        help="also time evaluate + backward with set_gradient_checkpointing(True)")
    args = parser.parse_args()

    cuda = args.device.startswith("cuda")
    print(f"preset={args.preset} device={args.device} dtype={args.dtype} batch={args.batch} "
          f"threads={' '.join(map(str, args.threads))} torch={torch.__version__}")
    print("\n| policy | threads | act (ms wall / CPU) | evaluate (ms wall / CPU) "
          "| evaluate + backward (ms wall / CPU) |" + (" peak memory (GiB) |" if cuda else ""))
    print("|---|---|---|---|---|" + ("---|" if cuda else ""))
    results: dict[tuple[str, int], dict[str, tuple[float, float]]] = {}
    for name in args.policies:
        for threads in args.threads:
            torch.set_num_threads(threads)
            result = results[(name, threads)] = time_policy(name, args)
            row = f"| {name} {args.preset} | {threads} | {cell(result['act'])} | {cell(result['evaluate'])} | " \
                  f"{cell(result['evaluate_backward'])} |"
            if "peak_memory_gib" in result:
                row += f" {result['peak_memory_gib'][0]:.1f} |"
            print(row, flush=True)
    if len(args.threads) > 1:
        print_speedups(results, args.policies, args.threads)
    print_per_sample(results, args)
    if args.gradient_checkpointing:
        print_checkpointing(results, args)

    print("\n| policy | tiny parameters | published (base) parameters |")
    print("|---|---|---|")
    for name in POLICIES:
        print(f"| {name} | {parameter_count(name, 'tiny'):,} | {parameter_count(name, 'base'):,} |")


if __name__ == "__main__":
    main()
