"""GSEnv's RL step on a CPU: what the trainer's env workers step, measured side by side in one run.

One RL step is one ``EpisodeEnvs.step`` of 16 envs with chunks of 5 actions (80 env steps,
16 images). At each image size (64, 128, 224 px) four vector envs take the same random chunks:

- splat, one call: the family's ``make_episode_envs`` (``SplatEpisodeEnvs``): each env steps
  its physics, then the 16 images render in one rasterizer call;
- splat, per env: the default ``EpisodeEnvs`` of single GSEnvs: each env renders its own image
  once per chunk (``DefersImages``);
- ManiSkill: ``renderer="maniskill"`` (the default vector env: ManiSkill's rasterizer renders each
  env's camera once per chunk);
- physics: ``obs_mode="state"``, no images: the physics and wrappers alone.

Rounds alternate the four (the machine may be busy with other work: all see the same load) and
the median round is reported: ms per RL step, env steps/s and its ratio to ManiSkill's, and the
render's share (the step less the physics). For the one-call env the render call is also timed
directly. Torch runs one thread by default: on 2 cores shared with another job, 2 threads made
every splat render about 40x slower (OpenMP threads waiting on a busy core).

    uv run python benchmarks/gsenv_rl_step.py [--sizes 64 128 224] [--envs 16] [--chunk 5] [--steps 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

import vlarl_envs
from vlarl_envs.gsenv import GSENV_ID
from vlarl_envs.vector import make_episode_envs

KINDS = ("splat, one call", "splat, per env", "ManiSkill", "physics")


def build(kind: str, size: int, num_envs: int, chunk: int):
    kwargs = dict(action_chunk=chunk)
    if kind == "splat, one call":
        return vlarl_envs.family_of(GSENV_ID).make_episode_envs(GSENV_ID, num_envs, image_size=size, **kwargs)
    if kind == "splat, per env":
        return make_episode_envs(GSENV_ID, num_envs, image_size=size, **kwargs)
    if kind == "ManiSkill":
        return make_episode_envs(GSENV_ID, num_envs, image_size=size, renderer="maniskill", **kwargs)
    return make_episode_envs(GSENV_ID, num_envs, obs_mode="state", **kwargs)


def timed_render(vec) -> list[float]:
    """Wrap the one-call env's image completion to record its seconds per call."""
    seconds, complete = [], vec._complete

    def timed(indices):
        start = time.perf_counter()
        complete(indices)
        seconds.append(time.perf_counter() - start)

    vec._complete = timed
    return seconds


def measure(size: int, args, physics) -> dict[str, tuple[float, float | None]]:
    """Median seconds per RL step of each kind at ``size``, and the one-call env's median render
    seconds per RL step."""
    vecs = {kind: build(kind, size, args.envs, args.chunk) for kind in KINDS[:3]}
    vecs["physics"] = physics
    renders = timed_render(vecs[KINDS[0]])
    samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
    render_samples: list[float] = []
    rng = np.random.default_rng(0)
    for round_index in range(args.rounds + 1):  # round 0 warms up (splat tables, ManiSkill's shaders)
        options = [{"split": "train", "episode_id": round_index * args.envs + i} for i in range(args.envs)]
        actions = rng.uniform(-1, 1, (args.steps, args.envs, args.chunk, 7)).astype(np.float32)
        for kind, vec in vecs.items():
            vec.reset(options)
            renders.clear()
            start = time.perf_counter()
            for chunk in actions:
                vec.step(chunk)
            if round_index:
                samples[kind].append((time.perf_counter() - start) / args.steps)
                if kind == KINDS[0]:
                    render_samples.append(sum(renders) / args.steps)
    for kind in KINDS[:3]:
        vecs[kind].close()
    return {kind: (statistics.median(values), statistics.median(render_samples) if kind == KINDS[0] else None)
            for kind, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 224])
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--chunk", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="timed RL steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (see the module docstring)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}, CPUs: {os.cpu_count()}, load average: {os.getloadavg()}")
    print(f"{args.envs} envs, chunks of {args.chunk}; "
          f"median of {args.rounds} interleaved rounds of {args.steps} RL steps")
    started = time.perf_counter()
    physics = build("physics", 0, args.envs, args.chunk)
    frames = args.envs * args.chunk
    print(f"\n{'size':>4} {'env':<16} {'ms/RL step':>10} {'env steps/s':>11} {'x ManiSkill':>11} {'render ms':>9}"
          f" {'render %':>8}")
    for size in args.sizes:
        results = measure(size, args, physics)
        physics_seconds = results["physics"][0]
        maniskill = results["ManiSkill"][0]
        for kind, (seconds, render_call) in results.items():
            render = seconds - physics_seconds if kind != "physics" else 0.0
            note = f"  (render call alone: {render_call * 1e3:.0f} ms)" if render_call is not None else ""
            print(f"{size:>4} {kind:<16} {seconds * 1e3:>10.0f} {frames / seconds:>11.0f} {maniskill / seconds:>11.2f}"
                  f" {render * 1e3:>9.0f} {100 * render / seconds:>7.0f}%{note}")
    physics.close()
    print(f"\ntotal {time.perf_counter() - started:.0f} s, load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
