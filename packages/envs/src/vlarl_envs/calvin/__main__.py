"""CALVIN's evaluation chains from the command line: print them, or play them with random actions, a check of
the protocol's plumbing and speed (a policy scores through ``vlarl_envs.calvin.evaluate_chains``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from vlarl_envs.calvin.chains import evaluate_chains, evaluation_chains, format_summary, summarize


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--show", type=int, default=0, help="print the first N chains")
    parser.add_argument("--play", type=int, default=0, help="play the first N chains with uniform random actions")
    parser.add_argument("--env-id", default="vlarl/CALVIN-D-v0")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0, help="seed of the random actions")
    args = parser.parse_args(argv)
    for index, chain in enumerate(evaluation_chains(args.show)):
        start = ", ".join(f"{key}={value}" for key, value in chain.initial_condition.items())
        print(f"{index}: {' -> '.join(chain.tasks)}  [{start}]")
    if args.play:
        import gymnasium as gym

        env = gym.make(f"vlarl_envs:{args.env_id}", image_size=args.image_size)
        rng = np.random.default_rng(args.seed)
        lengths = evaluate_chains(env, lambda observation: rng.uniform(-1, 1, 7).astype(np.float32), args.play)
        env.close()
        print(f"lengths {lengths}")
        print(format_summary(summarize(lengths)))


if __name__ == "__main__":
    main()
