"""GSEnv's Gaussian-splat rendering on a CPU, measured side by side in one run.

1. The PyTorch rasterizer alone: time per frame of the whole PutCubeOnPlate scene (robot,
   cube, plate and table, background not cached) with 20k and 100k Gaussians at 128 and
   224 px, through the env's camera.
2. GSEnv rgb steps/s with splat images next to the same env rendered by ManiSkill's own
   rasterizer (``renderer="maniskill"``: same scene, camera and resolution), and state-only
   steps/s (the physics alone). The scripted expert acts; runs alternate in rounds and the
   median round is reported, by wall clock and by this process's CPU time (every thread,
   lavapipe's included), so both see the same machine load.
3. Alignment: at the real camera's 640x480, the IoU of the cube and plate splat silhouettes
   with ManiSkill's own segmentation masks, per episode.

    uv run --locked python benchmarks/gs_render.py [--threads 2] [--size 128] [--steps 30] [--rounds 5]

The first run builds the 20k and 100k splat assets into the user cache (a minute each).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import gymnasium as gym
import torch

import vlarl_envs  # noqa: F401  (registers the ids)
from vlarl_envs.gsenv import GSENV_ID
from vlarl_envs.gsenv.assets import BuildSettings, ensure_assets
from vlarl_envs.gsenv.bodies import BodyTracker, splat_scene
from vlarl_envs.gsenv.capture import load_capture
from vlarl_envs.gsenv.expert import pick_and_place_action
from vlarl_envs.gsenv.layout import camera_intrinsics
from vlarl_envs.gsenv.task import CAMERA_NAME
from vlarl_envs.splats.backends import TorchRasterizer
from vlarl_envs.splats.camera import PinholeCamera
from vlarl_envs.splats.gaussians import Gaussians
from vlarl_envs.splats.sh import sh_to_rgb

DEFAULT_BUDGET = BuildSettings()


def scaled_settings(total: int) -> BuildSettings:
    """Asset budgets in the default proportions, adding up to about ``total`` Gaussians."""
    parts = ("robot_gaussians", "cube_gaussians", "plate_gaussians", "table_gaussians")
    default_total = sum(getattr(DEFAULT_BUDGET, name) for name in parts)
    return BuildSettings(**{name: round(getattr(DEFAULT_BUDGET, name) * total / default_total) for name in parts})


def world_gaussians(task, settings: BuildSettings, size: int) -> tuple[Gaussians, PinholeCamera]:
    """Every Gaussian of the scene placed in the world at the task's current poses, and the camera."""
    scene = splat_scene(task, load_capture(ensure_assets(task, settings)))
    extrinsic = task._sensors[CAMERA_NAME].get_params()["extrinsic_cv"][0]
    camera = PinholeCamera.from_extrinsic(size, size, camera_intrinsics(size, size), extrinsic)
    poses = BodyTracker(task, scene).poses()[0]
    placed = [body.gaussians.transformed(poses[i] @ body.asset_to_body) for i, body in enumerate(scene.bodies)]
    return Gaussians.concat([*placed, scene.background]), camera


def time_frames(rasterizer, gaussians: Gaussians, camera: PinholeCamera, repeats: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds per frame."""
    colours = sh_to_rgb(gaussians.sh)[None]  # the built assets have view-independent colour
    arguments = (
        gaussians.means[None], gaussians.quats[None], gaussians.scales[None], gaussians.opacities[None], colours,
        camera.world_to_camera[None], camera.intrinsics[None], camera.width, camera.height,
    )  # fmt: skip
    rasterizer.rasterize(*arguments)
    wall, cpu = [], []
    for _ in range(repeats):
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        rasterizer.rasterize(*arguments)
        wall.append(time.perf_counter() - start_wall)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3


def rasterizer_table(task, repeats: int) -> None:
    rasterizer = TorchRasterizer()
    print("CPU rasterizer, whole scene, background not cached (median ms per frame: wall / CPU)")
    print(f"{'Gaussians':>10} {'size':>5} {'wall ms':>9} {'CPU ms':>9}")
    for total in (20_000, 100_000):
        for size in (128, 224):
            gaussians, camera = world_gaussians(task, scaled_settings(total), size)
            wall, cpu = time_frames(rasterizer, gaussians, camera, repeats)
            print(f"{len(gaussians):>10} {size:>5} {wall:>9.1f} {cpu:>9.1f}")


def expert_stepper(env: gym.Env):
    observation, _ = env.reset(options={"episode_id": 0})
    state = {"observation": observation, "episode": 0}

    def step() -> None:
        observation, _, terminated, truncated, _ = env.step(pick_and_place_action(state["observation"]))
        if terminated or truncated:
            state["episode"] += 1
            observation, _ = env.reset(options={"episode_id": state["episode"]})
        state["observation"] = observation

    return step


def steps_table(size: int, steps: int, rounds: int) -> None:
    envs = {
        "GSEnv rgb (splats)": gym.make(GSENV_ID, image_size=size),
        "ManiSkill rgb (same scene)": gym.make(GSENV_ID, image_size=size, renderer="maniskill"),
        "state only (physics)": gym.make(GSENV_ID, obs_mode="state"),
    }
    steppers = {name: expert_stepper(env) for name, env in envs.items()}
    for step in steppers.values():
        step()
    samples = {name: ([], []) for name in envs}
    for _ in range(rounds):
        for name, step in steppers.items():
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(steps):
                step()
            samples[name][0].append(steps / (time.perf_counter() - start_wall))
            samples[name][1].append(steps / (time.process_time() - start_cpu))
    print(f"\nSteps/s at {size}x{size}, median of {rounds} rounds of {steps} expert steps")
    print(f"{'env':<28} {'wall':>8} {'per CPU s':>10}")
    for name, (wall, cpu) in samples.items():
        print(f"{name:<28} {statistics.median(wall):>8.1f} {statistics.median(cpu):>10.1f}")
    splat, maniskill = (statistics.median(samples[name][0]) for name in list(envs)[:2])
    print(f"GSEnv / ManiSkill rgb steps/s (wall): {splat / maniskill:.2f}")
    for env in envs.values():
        env.close()


def silhouette_table(episodes: int) -> None:
    """IoU of the splat silhouettes with the simulator's segmentation, at 640x480."""
    env = gym.make(GSENV_ID, render_mode="rgb_array", obs_mode="state")
    print("\nSilhouette IoU with ManiSkill's segmentation at 640x480 (cube and plate; each alone)")
    print(f"{'episode':>7} {'both':>6} {'cube':>6} {'plate':>6} {'cube px (sim)':>14}")
    for episode_id in range(episodes):
        env.reset(options={"episode_id": episode_id})
        scores, visible = [], {}
        for names in (["cube", "plate"], ["cube"], ["plate"]):
            splat, simulator = env.unwrapped.alignment_masks(names)
            scores.append((splat & simulator).sum() / (splat | simulator).sum())
            visible[names[0]] = int(simulator.sum())
        cube_pixels = visible["cube"]
        print(f"{episode_id:>7} " + " ".join(f"{score:>6.3f}" for score in scores) + f" {cube_pixels:>14}")
    env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--size", type=int, default=128, help="image side for the steps/s comparison")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=15, help="frames timed per rasterizer setting")
    parser.add_argument("--iou-episodes", type=int, default=8, help="episodes of the silhouette check")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}, CPUs: {os.cpu_count()}, load average: {os.getloadavg()}")
    timing_env = gym.make(GSENV_ID, obs_mode="state")
    timing_env.reset(options={"episode_id": 0})
    with torch.no_grad():
        rasterizer_table(timing_env.unwrapped.task, args.repeats)
    timing_env.close()
    steps_table(args.size, args.steps, args.rounds)
    silhouette_table(args.iou_episodes)


if __name__ == "__main__":
    main()
