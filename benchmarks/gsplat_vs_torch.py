"""gsplat against vlarl's PyTorch rasterizer on GSEnv's own scenes: speed and image agreement.

GSEnv PutCubeOnPlate's splat scene at 64, 128 and 224 px (the env's decimation for each size, its
camera, its backdrop), with the bodies at poses the scripted expert reaches, is rendered by
``SceneRenderer.render`` (bodies over the cached table over the backdrop: what the env observes)
through gsplat on CUDA, the PyTorch rasterizer on CUDA and the PyTorch rasterizer on the CPU, for
batches of 1, 16 and 64 images. It prints the median milliseconds per call and per image of each
backend, side by side in one run, the ratios against gsplat, and how far the uint8 images of the
PyTorch rasterizer lie from gsplat's (mean and maximum absolute difference in levels of 255, the
share of channel values more than 2 levels apart, PSNR).

    uv run --locked python benchmarks/gsplat_vs_torch.py                       # needs CUDA and gsplat
    uv run --locked python benchmarks/gsplat_vs_torch.py --export scenes.pt    # any machine with GSEnv
    python benchmarks/gsplat_vs_torch.py --scenes scenes.pt                    # a GPU machine without SAPIEN

``--export`` writes the scenes and poses (a few MB) where ManiSkill runs, so that a GPU machine
that lacks the simulator can render them; that run needs only torch, gsplat and vlarl_envs.splats.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

import torch

from vlarl_envs.splats.backends import make_rasterizer
from vlarl_envs.splats.camera import PinholeCamera
from vlarl_envs.splats.gaussians import Gaussians
from vlarl_envs.splats.scene import RigidBody, SceneRenderer, SplatScene

SIZES = (64, 128, 224)
BATCHES = (1, 16, 64)
CPU_BATCHES = (1, 16)
"""The CPU rasterizer's batches: 64 images at 224 px take it seconds a call."""


def export_scenes(path: str, frames: int, every: int) -> None:
    """Writes GSEnv's splat scene at each of ``SIZES`` (as the env builds it), the camera at that size,
    and the body poses of ``frames`` states the scripted expert passes through, one every ``every`` steps."""
    import gymnasium as gym

    import vlarl_envs  # noqa: F401  (registers the ids)
    from vlarl_envs.gsenv import GSENV_ID
    from vlarl_envs.gsenv.assets import BuildSettings, ensure_assets
    from vlarl_envs.gsenv.bodies import BodyTracker, auto_decimation, splat_scene
    from vlarl_envs.gsenv.capture import load_capture
    from vlarl_envs.gsenv.expert import pick_and_place_action
    from vlarl_envs.gsenv.layout import camera_intrinsics
    from vlarl_envs.gsenv.task import CAMERA_NAME

    env = gym.make(GSENV_ID, obs_mode="state")
    task = env.unwrapped.task
    observation, _ = env.reset(options={"episode_id": 0})
    capture = load_capture(ensure_assets(task, BuildSettings()))
    scenes = {size: splat_scene(task, capture, auto_decimation(size)) for size in SIZES}
    tracker = BodyTracker(task, scenes[SIZES[0]])
    extrinsic = task._sensors[CAMERA_NAME].get_params()["extrinsic_cv"][0]
    poses, episode, step = [], 0, 0
    while len(poses) < frames:
        if step % every == 0:
            poses.append(tracker.poses()[0])
        observation, _, terminated, truncated, _ = env.step(pick_and_place_action(observation))
        step += 1
        if terminated or truncated:
            episode += 1
            observation, _ = env.reset(options={"episode_id": episode})
    env.close()
    payload = {"poses": torch.stack(poses), "episodes": episode + 1}
    for size, scene in scenes.items():
        camera = PinholeCamera.from_extrinsic(size, size, camera_intrinsics(size, size), extrinsic)
        backdrop = None if scene.backdrop is None else (scene.backdrop * 255).round().to(torch.uint8)
        payload[size] = {"scene": dataclasses.replace(scene, backdrop=None), "backdrop": backdrop, "camera": camera}
    torch.save(payload, path)
    print(f"wrote {path}: {len(poses)} states from {episode + 1} expert episodes, scenes at {SIZES} px "
          f"({', '.join(f'{scenes[size].gaussian_count():,}' for size in SIZES)} Gaussians)")


def load_scenes(path: str) -> tuple[torch.Tensor, dict[int, tuple[SplatScene, PinholeCamera]]]:
    """The cached scenes, unpickling nothing but tensors, containers and the splat dataclasses."""
    with torch.serialization.safe_globals([SplatScene, RigidBody, Gaussians, PinholeCamera]):
        payload = torch.load(path, weights_only=True)
    scenes = {}
    for size in SIZES:
        entry = payload[size]
        backdrop = None if entry["backdrop"] is None else entry["backdrop"].float() / 255
        scenes[size] = (dataclasses.replace(entry["scene"], backdrop=backdrop), entry["camera"])
    return payload["poses"], scenes


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_renders(renderer: SceneRenderer, poses: torch.Tensor, repeats: int) -> tuple[float, torch.Tensor]:
    """Median milliseconds of ``renderer.render(poses)`` after one warm-up call, and its images on the CPU."""
    images = renderer.render(poses)
    synchronize(renderer.device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        renderer.render(poses)
        synchronize(renderer.device)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, images.cpu()


def agreement(reference: torch.Tensor, other: torch.Tensor) -> str:
    """Mean and max absolute difference (levels of 255), share of values over 2 levels apart, PSNR."""
    difference = (reference.int() - other.int()).abs().float()
    mse = (difference**2).mean().item()
    psnr = float("inf") if mse == 0 else 10 * torch.log10(torch.tensor(255.0**2 / mse)).item()
    return (f"{difference.mean().item():.3f} | {difference.max().item():.0f} | "
            f"{(difference > 2).float().mean().item() * 100:.2f}% | {psnr:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export", help="write the scenes and poses to this file and stop")
    parser.add_argument("--scenes", help="read scenes and poses written by --export instead of building them")
    parser.add_argument("--frames", type=int, default=max(BATCHES), help="expert states to render (--export)")
    parser.add_argument("--every", type=int, default=3, help="expert steps between recorded states (--export)")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per setting on CUDA")
    parser.add_argument("--cpu-repeats", type=int, default=3, help="timed calls per setting on the CPU")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch CPU threads")
    args = parser.parse_args()
    if args.export:
        export_scenes(args.export, args.frames, args.every)
        return
    if not torch.cuda.is_available():
        raise SystemExit("gsplat_vs_torch: gsplat needs CUDA, and torch sees no CUDA device here")
    torch.set_num_threads(args.threads)
    if args.scenes is None:
        temporary = "gsplat_vs_torch_scenes.pt"
        export_scenes(temporary, args.frames, args.every)
        args.scenes = temporary
    poses, scenes = load_scenes(args.scenes)
    if poses.shape[0] < max(BATCHES):
        raise SystemExit(
            f"gsplat_vs_torch: {args.scenes} holds {poses.shape[0]} states, the batches need {max(BATCHES)}"
        )
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    print("| image | Gaussians | batch | gsplat CUDA ms (per image) | torch CUDA ms (per image) "
          "| torch CPU ms (per image) | torch CUDA / gsplat | torch CPU / gsplat |")
    print("|---|---|---|---|---|---|---|---|")
    agreements, cpu_agreements = [], []
    for size, (scene, camera) in scenes.items():
        renderers = {
            "gsplat": SceneRenderer(scene, camera, make_rasterizer("gsplat", "cuda")),
            "torch_cuda": SceneRenderer(scene, camera, make_rasterizer("torch", "cuda")),
            "torch_cpu": SceneRenderer(scene, camera, make_rasterizer("torch", "cpu")),
        }
        for batch in BATCHES:
            batch_poses = poses[:batch]
            times, images = {}, {}
            for name, renderer in renderers.items():
                if name == "torch_cpu" and batch not in CPU_BATCHES:
                    continue
                repeats = args.cpu_repeats if name == "torch_cpu" else args.repeats
                times[name], images[name] = time_renders(renderer, batch_poses, repeats)
            cells = [f"{times[name]:.2f} ({times[name] / batch:.2f})" if name in times else "-" for name in renderers]
            ratios = [f"{times[name] / times['gsplat']:.1f}x" if name in times else "-"
                      for name in ("torch_cuda", "torch_cpu")]
            print(f"| {size}x{size} | {scene.gaussian_count():,} | {batch} | " + " | ".join(cells + ratios) + " |")
            if batch == max(BATCHES):
                agreements.append((size, batch, "torch on CUDA", images["gsplat"], images["torch_cuda"]))
            if batch == max(CPU_BATCHES):
                cpu_agreements.append((size, batch, "torch on the CPU", images["gsplat"], images["torch_cpu"]))
    print("\nImage agreement with gsplat (uint8 images of the same states)")
    print("| image | images | rasterizer | mean abs diff | max abs diff | values > 2 levels apart | PSNR (dB) |")
    print("|---|---|---|---|---|---|---|")
    for size, batch, rasterizer, reference, other in agreements + cpu_agreements:
        print(f"| {size}x{size} | {batch} | {rasterizer} | {agreement(reference, other)} |")


if __name__ == "__main__":
    main()
