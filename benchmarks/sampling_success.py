"""A saved policy's success with deterministic actions beside its success as RL samples it.

Evaluation scores deterministic actions; PPO learns from sampled ones (pi0's flow-SDE noise, OpenVLA's
temperature). Where the sampled policy succeeds far less often, RL's rollouts hold few successes to
learn from even though the evaluation looks fair. This plays the same episodes (one split, episode ids
``first``..``first + episodes - 1``) once deterministically and once for each sampling setting given,
in one run, and prints the success rate of each side by side.

    uv run --locked python benchmarks/sampling_success.py <policy dir> --env-id vlarl/GSEnv-PutCubeOnPlate-v0 \\
        --env-kwargs '{"image_size": 128}' --action-chunk 5 --split test --episodes 64 \\
        noise_level=0.5 noise_level=0.2 noise_level=0.2,start_noise_scale=0
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

import vlarl_policies
from vlarl_envs import family_of
from vlarl_trainer.rl.workers.env_worker import policy_inputs


def play(vec, policy, options: list[dict], deterministic: bool, max_chunks: int) -> list[bool]:
    """Each episode's success_once, playing ``options`` in rounds of the vector env's envs."""
    successes = []
    for start in range(0, len(options), vec.num_envs):
        round_options = options[start:start + vec.num_envs]
        round_options += round_options[-1:] * (vec.num_envs - len(round_options))
        batch, _ = vec.reset(round_options)
        for _ in range(max_chunks):
            with torch.no_grad():
                actions = policy.act(policy_inputs(batch), deterministic=deterministic).actions.cpu().numpy()
            batch, _, done, _ = vec.step(actions)
            if done.all():
                break
        played = vec.episode_statistics()[:len(options) - start]
        successes += [bool(episode["success_once"]) for episode in played]
    return successes


def parse_setting(text: str) -> tuple[str, dict]:
    """``name=value[,name=value...]`` as its own label and the config change it asks for."""
    setting = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if not name or not value:
            raise argparse.ArgumentTypeError(
                f"expected a sampling setting as name=value[,name=value] (noise_level=0.2,start_noise_scale=0), "
                f"got {text!r}")
        setting[name] = json.loads(value)
    return text, setting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("policy",
                        help="a save_pretrained directory (an SFT checkpoint, a run's checkpoints/step_N/policy)")
    parser.add_argument("settings", nargs="+", type=parse_setting,
                        help="sampling settings to compare, each name=value[,name=value] "
                             "(the config's sampling_fields)")
    parser.add_argument("--env-id", required=True)
    parser.add_argument("--env-kwargs", type=json.loads, default={})
    parser.add_argument("--action-chunk", type=int, default=5)
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--max-chunks", type=int, default=20, help="chunks an episode may take (max_steps / chunk)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--first", type=int, default=0, help="the first episode id")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    policy = vlarl_policies.from_pretrained(args.policy).eval()
    fields = type(policy.config).sampling_fields
    unknown = sorted({name for _, setting in args.settings for name in setting} - set(fields))
    if unknown:
        parser.error(f"{policy.config.type} samples with {list(fields)}; {unknown} are not among them")
    vec = family_of(args.env_id).make_episode_envs(args.env_id, args.num_envs, action_chunk=args.action_chunk,
                                                   **args.env_kwargs)
    options = [{"episode_id": episode, "split": args.split}
               for episode in range(args.first, args.first + args.episodes)]
    saved = policy.config
    print(f"{args.env_id} {args.split} episodes {args.first}-{args.first + args.episodes - 1}, {args.policy}")
    print(f"{'sampling':<40} {'success':>8} {'episodes':>9} {'seconds':>8}")
    try:
        for label, setting in [("deterministic", None), *args.settings]:
            policy.config = saved if setting is None else saved.replace(**setting)
            torch.manual_seed(args.seed)
            started = time.perf_counter()
            successes = play(vec, policy, options, setting is None, args.max_chunks)
            print(f"{label:<40} {np.mean(successes):>8.3f} {f'{sum(successes)}/{len(successes)}':>9} "
                  f"{time.perf_counter() - started:>8.0f}", flush=True)
    finally:
        vec.close()


if __name__ == "__main__":
    main()
