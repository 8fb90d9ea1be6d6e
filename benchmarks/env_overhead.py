"""What the vlarl contract costs per step, measured side by side in one run.

For each family: raw simulator steps/s, vlarl-wrapped steps/s (``gym.make`` of the vlarl id with
every contract wrapper) and their ratio, in wall-clock time, for state observations and for
128x128 rgb; then the vector env's throughput with 1 and 2 subprocess workers. Raw and wrapped
runs alternate in short blocks and the median block is reported, so both see the same machine
load; run it on an otherwise idle machine all the same.

    uv run python benchmarks/env_overhead.py [--family metaworld|maniskill|put_on_plate|libero|calvin]
        [--steps 2000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

import gymnasium as gym
import numpy as np

import vlarl_envs

METAWORLD_TASK = "reach-v3"
MANISKILL_TASK = "PickCube"
LIBERO_ID = "vlarl/LIBERO-Spatial-v0"
CALVIN_ID = "vlarl/CALVIN-D-v0"
IMAGE_SIZE = 128
PUT_ON_PLATE_ID = "vlarl/ManiSkill-PutOnPlate-v0"
PUT_ON_PLATE_IMAGE_SIZE = 64
"""The CPU recipe's (maniskill_ppo_openpi_tiny) image size."""
CHUNK = 5
CALVIN_IMAGE_SIZE = 64
"""CALVIN on a CPU trains at 64 px: pybullet's renderers cost most of its step."""


def steps_per_second(step: Callable[[], None], steps: int) -> float:
    """Wall-clock steps per second of ``steps`` calls."""
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - start)


def alternate(runners: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    """Run each measurement once per round, interleaved; the median over rounds."""
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            samples[name].append(run())
    return {name: statistics.median(values) for name, values in samples.items()}


def looping_stepper(env: gym.Env, action: np.ndarray) -> Callable[[], None]:
    """A step function that resets whenever an episode ends."""
    env.reset(seed=0)

    def step() -> None:
        result = env.step(action)
        if result[2] or result[3]:
            env.reset()

    return step


def metaworld_pair(obs_mode: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """(raw step, wrapped step) over one simulator instance: the raw side steps (and renders)
    the very MetaWorld env the vlarl env holds, so both run the same physics and camera."""
    env = gym.make(f"vlarl/MetaWorld-{METAWORLD_TASK}", obs_mode=obs_mode, image_size=IMAGE_SIZE, horizon=10**9)
    wrapped_step = looping_stepper(env, np.zeros(4, np.float32))
    simulator = env.unwrapped.simulator
    action = np.zeros(4, np.float32)

    def raw_step() -> None:
        simulator.step(action)
        if obs_mode == "rgb":
            simulator.render()

    return raw_step, wrapped_step


def vector_throughput(env_id: str, num_envs: int, steps: int, **env_kwargs) -> float:
    vec = vlarl_envs.make_vec(env_id, num_envs, **env_kwargs)
    vec.reset(seed=0)
    actions = np.zeros(vec.action_space.shape, np.float32)
    for _ in range(5):
        vec.step(actions)
    rate = steps_per_second(lambda: vec.step(actions), steps) * num_envs
    vec.close()
    return rate


def report_overhead(family: str, mode: str, rates: dict[str, float]) -> None:
    raw, wrapped = rates["raw"], rates["wrapped"]
    print(f"| {family} | {mode} | {raw:,.0f} | {wrapped:,.0f} | {wrapped / raw:.3f} |")


def metaworld_rows(steps: int, rounds: int) -> None:
    for mode, rendering, n in (("state", False, steps), (f"rgb {IMAGE_SIZE}x{IMAGE_SIZE}", True, steps // 20)):
        raw_step, wrapped_step = metaworld_pair("rgb" if rendering else "state")
        rates = alternate(
            {"raw": partial(steps_per_second, raw_step, n), "wrapped": partial(steps_per_second, wrapped_step, n)},
            rounds,
        )
        report_overhead("MetaWorld reach-v3", mode, rates)


def metaworld_vector_rows(steps: int) -> None:
    env_id = f"vlarl/MetaWorld-{METAWORLD_TASK}"
    for mode, kwargs, n in (
        ("state", {"obs_mode": "state"}, steps),
        (f"rgb {IMAGE_SIZE}x{IMAGE_SIZE}", {"obs_mode": "rgb", "image_size": IMAGE_SIZE}, steps // 10),
    ):
        one = vector_throughput(env_id, 1, n, **kwargs)
        two = vector_throughput(env_id, 2, n, **kwargs)
        print(f"| MetaWorld reach-v3 | {mode} | {one:,.0f} | {two:,.0f} | {two / one:.2f} |")


def maniskill_pair(obs_mode: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """(raw step, wrapped step) of two PickCube simulators built alike: raw is ``gym.make`` of
    ManiSkill's own id with the observation mode, controller, robot, reward and cameras the
    vlarl env uses; wrapped is ``gym.make`` of the vlarl id. Both start from the same initial
    state (the raw env is reset with the seed of the wrapped env's episode), so they simulate
    the same contacts; neither truncates, and zero actions never succeed."""
    from vlarl_envs.maniskill.tasks import MANISKILL_TASKS, load_maniskill

    load_maniskill()  # registers ManiSkill's own ids
    task = MANISKILL_TASKS[MANISKILL_TASK]
    raw_env = gym.make(
        task.maniskill_id,
        max_episode_steps=10**9,
        robot_uids=task.robot_uids,
        obs_mode="rgb+state" if obs_mode == "rgb" else "state",
        control_mode="pd_ee_delta_pose",
        reward_mode="normalized_dense",
        sensor_configs=dict(width=IMAGE_SIZE, height=IMAGE_SIZE, shader_pack="minimal"),
    )
    wrapped_env = gym.make(task.env_id, obs_mode=obs_mode, image_size=IMAGE_SIZE, horizon=10**9)
    wrapped_env.reset(options={"episode_id": 0})
    raw_env.reset(seed=wrapped_env.unwrapped.setup.episodes.start("train", 0).seed)
    action = np.zeros(7, np.float32)
    return lambda: raw_env.step(action), lambda: wrapped_env.step(action)


def maniskill_rows(steps: int, rounds: int) -> None:
    for mode, obs_mode, n in (("state", "state", steps // 4), (f"rgb {IMAGE_SIZE}x{IMAGE_SIZE}", "rgb", steps // 40)):
        raw_step, wrapped_step = maniskill_pair(obs_mode)
        rates = alternate(
            {"raw": partial(steps_per_second, raw_step, n), "wrapped": partial(steps_per_second, wrapped_step, n)},
            rounds,
        )
        report_overhead(f"ManiSkill {MANISKILL_TASK}-v1", mode, rates)


def maniskill_vector_rows(steps: int) -> None:
    """Subprocess workers (ManiSkill's CPU backend holds one env per process)."""
    env_id = f"vlarl/ManiSkill-{MANISKILL_TASK}-v1"
    for mode, kwargs, n in (
        ("state", {"obs_mode": "state"}, steps // 4),
        (f"rgb {IMAGE_SIZE}x{IMAGE_SIZE}", {"obs_mode": "rgb", "image_size": IMAGE_SIZE}, steps // 40),
    ):
        one = vector_throughput(env_id, 1, n, **kwargs)
        two = vector_throughput(env_id, 2, n, **kwargs)
        print(f"| ManiSkill {MANISKILL_TASK}-v1 | {mode} | {one:,.0f} | {two:,.0f} | {two / one:.2f} |")


def put_on_plate_rows(steps: int, rounds: int) -> None:
    """PutOnPlate at the CPU recipe's 64 px: raw against wrapped steps, then a chunk of 5 actions that
    renders once (the env defers images) against five single steps that each render."""
    raw_step, wrapped_step = put_on_plate_pair()
    n = steps // 20
    rates = alternate(
        {"raw": lambda: steps_per_second(raw_step, n), "wrapped": lambda: steps_per_second(wrapped_step, n)}, rounds)
    report_overhead("ManiSkill PutOnPlate-v0", f"rgb {PUT_ON_PLATE_IMAGE_SIZE}x{PUT_ON_PLATE_IMAGE_SIZE}", rates)
    chunked = gym.make(PUT_ON_PLATE_ID, image_size=PUT_ON_PLATE_IMAGE_SIZE, horizon=10**9, action_chunk=CHUNK)
    single = gym.make(PUT_ON_PLATE_ID, image_size=PUT_ON_PLATE_IMAGE_SIZE, horizon=10**9)
    for env in (chunked, single):
        env.reset(options={"episode_id": 0})
    chunk = np.zeros((CHUNK, 7), np.float32)

    def single_steps() -> None:
        for action in chunk:
            single.step(action)

    per_chunk = alternate({"chunk": lambda: steps_per_second(lambda: chunked.step(chunk), n // CHUNK),
                           "single": lambda: steps_per_second(single_steps, n // CHUNK)}, rounds)
    rendered_once, rendered_each = CHUNK * per_chunk["chunk"], CHUNK * per_chunk["single"]
    print(f"| ManiSkill PutOnPlate-v0 | rgb {PUT_ON_PLATE_IMAGE_SIZE}x{PUT_ON_PLATE_IMAGE_SIZE}, chunks of {CHUNK}: "
          f"raw = every step rendered, wrapped = the chunk's last | {rendered_each:,.0f} | {rendered_once:,.0f} | "
          f"{rendered_once / rendered_each:.3f} |")


def put_on_plate_pair() -> tuple[Callable[[], None], Callable[[], None]]:
    """(raw step, wrapped step): the ManiSkill simulator inside a vlarl PutOnPlate env stepped directly
    (ManiSkill's own ``step``, both cameras rendered), and a second env through every contract wrapper;
    both from episode 0's layout."""
    raw_env = gym.make(PUT_ON_PLATE_ID, image_size=PUT_ON_PLATE_IMAGE_SIZE, horizon=10**9)
    wrapped_env = gym.make(PUT_ON_PLATE_ID, image_size=PUT_ON_PLATE_IMAGE_SIZE, horizon=10**9)
    for env in (raw_env, wrapped_env):
        env.reset(options={"episode_id": 0})
    simulator = raw_env.unwrapped.simulator
    action = np.zeros(7, np.float32)
    return lambda: simulator.step(action), lambda: wrapped_env.step(action)


def put_on_plate_vector_rows(steps: int) -> None:
    """Subprocess workers at 64 px, each step rendering (chunks of one)."""
    n = steps // 20
    one = vector_throughput(PUT_ON_PLATE_ID, 1, n, image_size=PUT_ON_PLATE_IMAGE_SIZE)
    two = vector_throughput(PUT_ON_PLATE_ID, 2, n, image_size=PUT_ON_PLATE_IMAGE_SIZE)
    print(f"| ManiSkill PutOnPlate-v0 | rgb {PUT_ON_PLATE_IMAGE_SIZE}x{PUT_ON_PLATE_IMAGE_SIZE} | {one:,.0f} | "
          f"{two:,.0f} | {two / one:.2f} |")


def libero_env(obs_mode: str, **env_kwargs) -> gym.Env:
    """The vlarl LIBERO-Spatial env on its first task, never truncating (zero actions never succeed)."""
    task = vlarl_envs.family_of(LIBERO_ID).tasks(LIBERO_ID)[0]
    return gym.make(LIBERO_ID, obs_mode=obs_mode, image_size=IMAGE_SIZE, horizon=10**9, tasks=[task], **env_kwargs)


def libero_pair(obs_mode: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """(raw step, wrapped step) over one simulator instance: the raw side steps LIBERO's
    OffScreenRenderEnv that the vlarl env holds and renders its two cameras with the same settings."""
    from vlarl_envs.libero.simulator import MAIN_CAMERA, WRIST_CAMERA

    env = libero_env(obs_mode)
    wrapped_step = looping_stepper(env, np.zeros(7, np.float32))
    simulator = env.unwrapped.simulator
    action = np.zeros(7)

    def raw_step() -> None:
        simulator.step(action)
        if obs_mode == "rgb":
            for camera in (MAIN_CAMERA, WRIST_CAMERA):
                simulator.sim.render(IMAGE_SIZE, IMAGE_SIZE, camera_name=camera)

    return raw_step, wrapped_step


def libero_as_openpi_builds_it() -> Callable[[], None]:
    """A step of LIBERO's OffScreenRenderEnv with its defaults, as openpi's example builds it:
    robosuite renders both cameras in every step, with shadows, reflections and multisampling."""
    from vlarl_envs.libero.simulator import load_simulator_modules
    from vlarl_envs.libero.suites import LIBERO_SUITES, suite_tasks

    envs, _ = load_simulator_modules()
    task = suite_tasks(LIBERO_SUITES["Spatial"].name)[0]
    simulator = envs.OffScreenRenderEnv(bddl_file_name=str(task.bddl_file), camera_heights=IMAGE_SIZE,
                                        camera_widths=IMAGE_SIZE, ignore_done=True)
    simulator.reset()
    simulator.set_init_state(task.init_states[0])
    action = np.zeros(7)
    return lambda: simulator.step(action)


def libero_rows(steps: int, rounds: int) -> None:
    rgb = f"rgb {IMAGE_SIZE}x{IMAGE_SIZE}, 2 cameras"
    for mode, obs_mode, n in (("state", "state", steps // 10), (rgb, "rgb", steps // 25)):
        raw_step, wrapped_step = libero_pair(obs_mode)
        runners = {"raw": partial(steps_per_second, raw_step, n), "wrapped": partial(steps_per_second, wrapped_step, n)}
        if obs_mode == "rgb":
            upstream_step = libero_as_openpi_builds_it()
            runners["upstream"] = partial(steps_per_second, upstream_step, n)
        rates = alternate(runners, rounds)
        report_overhead("LIBERO-Spatial", mode, rates)
        if obs_mode == "rgb":
            report_overhead("LIBERO-Spatial", f"{rgb}; raw = OffScreenRenderEnv defaults",
                            {"raw": rates["upstream"], "wrapped": rates["wrapped"]})


def libero_vector_rows(steps: int) -> None:
    for mode, kwargs, n in (
        ("state", {"obs_mode": "state"}, steps // 10),
        (f"rgb {IMAGE_SIZE}x{IMAGE_SIZE}, 2 cameras", {"obs_mode": "rgb", "image_size": IMAGE_SIZE}, steps // 25),
    ):
        task = vlarl_envs.family_of(LIBERO_ID).tasks(LIBERO_ID)[0]
        one = vector_throughput(LIBERO_ID, 1, n, horizon=10**9, tasks=[task], **kwargs)
        two = vector_throughput(LIBERO_ID, 2, n, horizon=10**9, tasks=[task], **kwargs)
        print(f"| LIBERO-Spatial | {mode} | {one:,.0f} | {two:,.0f} | {two / one:.2f} |")


def calvin_env(obs_mode: str, **env_kwargs) -> gym.Env:
    """The vlarl CALVIN-D env on open_drawer, never truncating (zero actions never open the drawer)."""
    return gym.make(CALVIN_ID, obs_mode=obs_mode, image_size=CALVIN_IMAGE_SIZE, horizon=10**9, tasks=["open_drawer"],
                    **env_kwargs)


def calvin_pair(obs_mode: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """(raw step, wrapped step) over one simulator instance. With images, the raw side is calvin's own
    ``PlayTableSimEnv.step`` (robot, physics, both cameras, the info its task oracle reads); with states,
    the same without the cameras."""
    from vlarl_envs.calvin.simulator import step_physics

    env = calvin_env(obs_mode)
    wrapped_step = looping_stepper(env, np.zeros(7, np.float32))
    simulator = env.unwrapped.simulator
    action = np.array([0, 0, 0, 0, 0, 0, 1.0])

    def raw_step() -> None:
        if obs_mode == "rgb":
            simulator.step(action)
        else:
            step_physics(simulator, action)
            simulator.get_info()

    return raw_step, wrapped_step


def calvin_rows(steps: int, rounds: int) -> None:
    rgb = f"rgb {CALVIN_IMAGE_SIZE}x{CALVIN_IMAGE_SIZE}, 2 cameras"
    for mode, obs_mode, n in (("state", "state", steps // 10), (rgb, "rgb", steps // 25)):
        raw_step, wrapped_step = calvin_pair(obs_mode)
        rates = alternate(
            {"raw": partial(steps_per_second, raw_step, n), "wrapped": partial(steps_per_second, wrapped_step, n)},
            rounds,
        )
        report_overhead("CALVIN-D", mode, rates)


def calvin_vector_rows(steps: int) -> None:
    for mode, kwargs, n in (
        ("state", {"obs_mode": "state"}, steps // 10),
        (f"rgb {CALVIN_IMAGE_SIZE}x{CALVIN_IMAGE_SIZE}, 2 cameras", {"obs_mode": "rgb"}, steps // 25),
    ):
        settings = {"image_size": CALVIN_IMAGE_SIZE, "horizon": 10**9, "tasks": ["open_drawer"], **kwargs}
        one = vector_throughput(CALVIN_ID, 1, n, **settings)
        two = vector_throughput(CALVIN_ID, 2, n, **settings)
        print(f"| CALVIN-D | {mode} | {one:,.0f} | {two:,.0f} | {two / one:.2f} |")


FAMILIES = {
    "metaworld": (metaworld_rows, metaworld_vector_rows),
    "maniskill": (maniskill_rows, maniskill_vector_rows),
    "put_on_plate": (put_on_plate_rows, put_on_plate_vector_rows),
    "libero": (libero_rows, libero_vector_rows),
    "calvin": (calvin_rows, calvin_vector_rows),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", choices=sorted(FAMILIES), action="append")
    parser.add_argument("--steps", type=int, default=500, help="state steps per measurement (rgb: a twentieth)")
    parser.add_argument("--rounds", type=int, default=41, help="interleaved raw/wrapped blocks; the median is kept")
    args = parser.parse_args()
    families = args.family or sorted(FAMILIES)
    print("| env | observation | raw steps/s | wrapped steps/s | wrapped/raw |")
    print("|---|---|---|---|---|")
    for family in families:
        FAMILIES[family][0](args.steps, args.rounds)
    print()
    print("| env | observation | 1 worker steps/s | 2 workers steps/s | 2/1 |")
    print("|---|---|---|---|---|")
    for family in families:
        FAMILIES[family][1](args.steps)


if __name__ == "__main__":
    main()
