"""Where a LIBERO chunk's time goes: frames with the geoms out of view left out against full ones, and chunks
with and without the wrist camera.

    python benchmarks/libero_frames.py                 # the first 3 tasks of LIBERO-Spatial at 64 px
    python benchmarks/libero_frames.py --tasks 10 --image-size 128

For each task: one env at the image size, a few random actions, then, side by side on the same scene,
each camera's frame as the env renders it (``vlarl_envs.libero.simulator.render_camera``, which hides the
geoms outside the camera's view) and robosuite's full render, checked equal; then one chunk's physics
(``--chunk`` simulator steps). Last, two envs of the task step whole chunks in turn (``action_chunk``), one
with both cameras and one made with ``wrist_camera=False`` (what the CPU recipes play: their policies read the
front camera alone). It prints milliseconds per frame and per chunk and the ratios, never a verdict: the
machine's load moves the absolute figures, not much the ratios measured in turn.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import gymnasium as gym
import numpy as np

from vlarl_envs import family_of
from vlarl_envs.libero.simulator import MAIN_CAMERA, WRIST_CAMERA, render_camera

ENV_ID = "vlarl/LIBERO-Spatial-v0"


def milliseconds(function, repeats: int) -> float:
    function()
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - start) / repeats * 1000


def measure_task(task: str, image_size: int, chunk: int, repeats: int) -> dict[str, float]:
    env = gym.make(ENV_ID, image_size=image_size, tasks=[task])
    env.reset(options={"episode_id": 0, "split": "test"})
    rng = np.random.default_rng(0)
    for action in rng.uniform(-1, 1, (3, 7)).astype(np.float32):
        env.step(action)
    sim = env.unwrapped.simulator.sim
    figures = {}
    for camera in (MAIN_CAMERA, WRIST_CAMERA):
        culled = render_camera(sim, camera, image_size, image_size)
        full = np.ascontiguousarray(sim.render(image_size, image_size, camera_name=camera)[::-1, ::-1])
        if not np.array_equal(culled, full):
            raise AssertionError(f"{task} {camera}: the frame without unseen geoms differs from the full one")
        figures[f"{camera} culled"] = milliseconds(partial(render_camera, sim, camera, image_size, image_size),
                                                   repeats)
        figures[f"{camera} full"] = milliseconds(partial(sim.render, image_size, image_size, camera_name=camera),
                                                 repeats)
    simulator = env.unwrapped.simulator
    zero = np.zeros(7)
    figures["physics per chunk"] = milliseconds(lambda: [simulator.step(zero) for _ in range(chunk)], 3)
    env.close()
    figures.update(chunk_with_and_without_wrist(task, image_size, chunk, repeats))
    return figures


def chunk_with_and_without_wrist(task: str, image_size: int, chunk: int, repeats: int) -> dict[str, float]:
    """Milliseconds per whole env step of ``chunk`` actions, with both cameras and with the front one alone,
    the two envs stepping in turn from the same episode."""
    envs = {wrist: gym.make(ENV_ID, image_size=image_size, tasks=[task], action_chunk=chunk, wrist_camera=wrist)
            for wrist in (True, False)}
    actions = np.random.default_rng(1).uniform(-1, 1, (repeats, chunk, 7)).astype(np.float32)
    seconds = dict.fromkeys(envs, 0.0)
    for env in envs.values():
        env.reset(options={"episode_id": 0, "split": "test"})
    for action in actions:
        for wrist, env in envs.items():
            start = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            seconds[wrist] += time.perf_counter() - start
            if terminated or truncated:
                env.reset(options={"episode_id": 0, "split": "test"})
    for env in envs.values():
        env.close()
    return {"chunk, both cameras": seconds[True] / repeats * 1000,
            "chunk, front camera": seconds[False] / repeats * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3, help="the first N tasks of LIBERO-Spatial")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--chunk", type=int, default=5, help="simulator steps per rendered observation")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rows = [measure_task(task, args.image_size, args.chunk, args.repeats)
            for task in family_of(ENV_ID).tasks(ENV_ID)[:args.tasks]]
    mean = {key: float(np.mean([row[key] for row in rows])) for key in rows[0]}
    for key, value in mean.items():
        print(f"{key}: {value:.1f} ms")
    frames_full = mean[f"{MAIN_CAMERA} full"] + mean[f"{WRIST_CAMERA} full"]
    frames_culled = mean[f"{MAIN_CAMERA} culled"] + mean[f"{WRIST_CAMERA} culled"]
    physics = mean["physics per chunk"]
    print(f"{MAIN_CAMERA} full / culled: {mean[f'{MAIN_CAMERA} full'] / mean[f'{MAIN_CAMERA} culled']:.2f}")
    print(f"{WRIST_CAMERA} full / culled: {mean[f'{WRIST_CAMERA} full'] / mean[f'{WRIST_CAMERA} culled']:.2f}")
    print(f"frames' share of a chunk, culled: {frames_culled / (frames_culled + physics):.2f}")
    print(f"chunk full / culled: {(frames_full + physics) / (frames_culled + physics):.2f}")
    print(f"chunk both cameras / front camera: {mean['chunk, both cameras'] / mean['chunk, front camera']:.2f}")


if __name__ == "__main__":
    main()
