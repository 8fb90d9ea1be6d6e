"""vlarl_algos' PPO learner against Stable-Baselines3's PPO, side by side in one run.

Both learners train on the same environments (the same single gymnasium envs, each behind
the same episode recorder, vectorized without subprocesses), with the same
hyperparameters, seeds and network (two 64-64 tanh MLPs), on one torch thread. Runs
alternate between the learners, so changes in machine load hit both alike. For every run
it prints the env steps and wall-clock seconds until the mean over the last ``window``
finished episodes first reaches the threshold, the same mean at the end (the final
figure), and then the medians over seeds with their ratios.

Usage::

    uv run --locked python benchmarks/ppo_vs_sb3.py                   # Pendulum-v1 and MetaWorld reach-v3
    uv run --locked python benchmarks/ppo_vs_sb3.py --tasks pendulum --seeds 0 1
"""

import argparse
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv

from ppo_learner import PPOConfig, train_ppo


@dataclass
class Task:
    """One environment, its shared hyperparameters and what counts as solved."""

    name: str
    make_env: Callable[[], gym.Env]
    metric: str  # "return", or "success": the episode had a success step
    threshold: float
    window: int  # finished episodes averaged for the threshold and the final figure
    total_timesteps: int
    num_envs: int
    num_steps: int
    minibatch_size: int
    update_epochs: int
    learning_rate: float
    gamma: float
    gae_lambda: float = 0.95


def make_metaworld_reach() -> gym.Env:
    """reach-v3 with MetaWorld's dense reward; episodes run the full 200 steps.

    Ending episodes on success would cut short exactly the episodes that collect the most
    dense reward, so success is counted per episode (a success step at any time) instead.
    """
    import vlarl_envs  # noqa: F401  (registers the vlarl/ ids)
    from vlarl_envs.wrappers import StateOnlyObservation

    env = gym.make("vlarl/MetaWorld-reach-v3", obs_mode="state", reward_mode="dense", terminate_on_success=False)
    return StateOnlyObservation(env)


TASKS = {
    "pendulum": Task(
        name="Pendulum-v1", make_env=lambda: gym.make("Pendulum-v1"), metric="return", threshold=-400.0,
        window=20, total_timesteps=61_440, num_envs=4, num_steps=1024, minibatch_size=64, update_epochs=10,
        learning_rate=1e-3, gamma=0.9,
    ),
    "metaworld": Task(
        name="MetaWorld reach-v3", make_env=make_metaworld_reach, metric="return", threshold=750.0,
        window=20, total_timesteps=20_480, num_envs=4, num_steps=256, minibatch_size=64, update_epochs=10,
        learning_rate=1e-3, gamma=0.95,
    ),
}


@dataclass
class EpisodeLog:
    """Finished episodes of one run: (env steps so far, seconds since start, return, success)."""

    start: float = 0.0
    steps: int = 0
    reports_success: bool = False  # the env puts "success" in its info
    episodes: list[tuple[int, float, float, bool]] = field(default_factory=list)


class Recorder(gym.Wrapper):
    """Counts env steps and logs every finished episode into a log shared by a run's envs.

    At the end of an episode it sets ``info["episode"]`` to SB3 Monitor's ``{"r", "l", "t"}``,
    which SB3 reads for its logs (vlarl's own episode statistics use the same key).
    """

    def __init__(self, env: gym.Env, log: EpisodeLog) -> None:
        super().__init__(env)
        self.log = log
        self.episode_return, self.episode_len, self.success = 0.0, 0, False

    def reset(self, **kwargs):
        self.episode_return, self.episode_len, self.success = 0.0, 0, False
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.log.steps += 1
        self.episode_return += float(reward)
        self.episode_len += 1
        if "success" in info:
            self.log.reports_success = True
            self.success = self.success or bool(info["success"])
        if terminated or truncated:
            seconds = time.perf_counter() - self.log.start
            self.log.episodes.append((self.log.steps, seconds, self.episode_return, self.success))
            info = {**info, "episode": {"r": self.episode_return, "l": self.episode_len, "t": seconds}}
        return obs, reward, terminated, truncated, info


def run_ours(task: Task, seed: int, log: EpisodeLog) -> None:
    envs = gym.vector.SyncVectorEnv(
        [lambda: Recorder(task.make_env(), log) for _ in range(task.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    config = PPOConfig(
        total_timesteps=task.total_timesteps, num_steps=task.num_steps, minibatch_size=task.minibatch_size,
        update_epochs=task.update_epochs, learning_rate=task.learning_rate, gamma=task.gamma,
        gae_lambda=task.gae_lambda, seed=seed,
    )
    log.start = time.perf_counter()
    train_ppo(envs, config)
    envs.close()


def run_sb3(task: Task, seed: int, log: EpisodeLog) -> None:
    env = DummyVecEnv([lambda: Recorder(task.make_env(), log) for _ in range(task.num_envs)])
    model = PPO(
        "MlpPolicy", env, n_steps=task.num_steps, batch_size=task.minibatch_size, n_epochs=task.update_epochs,
        learning_rate=task.learning_rate, gamma=task.gamma, gae_lambda=task.gae_lambda, seed=seed, device="cpu",
    )
    log.start = time.perf_counter()
    model.learn(task.total_timesteps)
    env.close()


LEARNERS = {"ours": run_ours, "sb3": run_sb3}


@dataclass
class Outcome:
    steps_to_threshold: float  # inf when never reached
    seconds_to_threshold: float
    final: float  # the metric over the last window of episodes
    final_success: float  # the success rate over the same episodes
    seconds: float
    cpu_seconds: float  # process CPU time: less sensitive than wall-clock to other load on the machine
    steps: int


def score(task: Task, log: EpisodeLog, seconds: float, cpu_seconds: float) -> Outcome:
    """The first point where the windowed mean reaches the threshold, and the last window's mean."""
    column = 2 if task.metric == "return" else 3
    values = np.array([episode[column] for episode in log.episodes], dtype=np.float64)
    windowed = np.array([])
    if values.size >= task.window:
        windowed = np.convolve(values, np.ones(task.window) / task.window, mode="valid")
    reached = np.flatnonzero(windowed >= task.threshold)
    if reached.size:
        steps, at, _, _ = log.episodes[reached[0] + task.window - 1]
        steps = math.ceil(steps / task.num_envs) * task.num_envs  # env steps when that vector step ends
    else:
        steps, at = float("inf"), float("inf")
    final = float(windowed[-1]) if windowed.size else float("nan")
    last = log.episodes[-task.window :]
    final_success = float(np.mean([e[3] for e in last])) if log.reports_success and last else float("nan")
    return Outcome(steps, at, final, final_success, seconds, cpu_seconds, log.steps)


def env_alone_speed(task: Task, steps: int = 2048) -> float:
    """Env steps per second of the benchmark's vector env under random actions, no learner."""
    envs = gym.vector.SyncVectorEnv(
        [lambda: Recorder(task.make_env(), EpisodeLog()) for _ in range(task.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    envs.reset(seed=0)
    envs.action_space.seed(0)
    actions = [envs.action_space.sample() for _ in range(steps // task.num_envs)]
    start = time.perf_counter()
    for action in actions:
        envs.step(action)
    seconds = time.perf_counter() - start
    envs.close()
    return len(actions) * task.num_envs / seconds


def warm_up() -> None:
    """Pays the one-time import and allocation costs of both learners before anything is timed."""
    task = Task("warm-up", lambda: gym.make("Pendulum-v1"), "return", 0.0, 1, 256, 2, 64, 32, 1, 1e-3, 0.9)
    for learner in LEARNERS.values():
        learner(task, 0, EpisodeLog())


def fmt(value: float, digits: int = 0) -> str:
    """A number for the tables: inf is a threshold never reached, NaN a figure that does not apply."""
    if value == float("inf"):
        return "not reached"
    return "n/a" if np.isnan(value) else f"{value:,.{digits}f}"


def ratio(theirs: float, ours: float) -> str:
    """SB3's figure over ours, or n/a when either run never reached the threshold."""
    return "n/a" if np.isinf(theirs) or np.isinf(ours) else f"{theirs / ours:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=["pendulum", "metaworld"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--timesteps", type=int, help="override every task's env-step budget")
    parser.add_argument("--learners", nargs="+", choices=sorted(LEARNERS), default=list(LEARNERS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    begin = time.perf_counter()
    warm_up()

    summary = []
    for key in args.tasks:
        task = TASKS[key]
        if args.timesteps:
            task.total_timesteps = args.timesteps
        try:
            task.make_env().close()
        except ImportError as error:
            print(f"\n{task.name}: skipped, its environment does not import ({error})")
            continue
        unit = "return" if task.metric == "return" else "success rate"
        print(f"\n{task.name}: threshold {unit} >= {task.threshold} over the last {task.window} episodes, "
              f"{task.total_timesteps:,} env steps, {task.num_envs} envs x {task.num_steps} steps, "
              f"minibatch {task.minibatch_size}, {task.update_epochs} epochs, lr {task.learning_rate}, "
              f"gamma {task.gamma}")
        print(f"env alone, random actions: {env_alone_speed(task):,.0f} env steps/s (the ceiling for any learner)")
        print(f"{'learner':8} {'seed':>4} {'steps to thr':>13} {'s to thr':>11} {'final':>8} {'success':>8} "
              f"{'total s':>8} {'CPU s':>8} {'steps/s':>8}")
        outcomes: dict[str, list[Outcome]] = {name: [] for name in args.learners}
        for index, seed in enumerate(args.seeds):
            order = args.learners if index % 2 == 0 else list(reversed(args.learners))
            for name in order:
                log = EpisodeLog()
                start, cpu_start = time.perf_counter(), time.process_time()
                LEARNERS[name](task, seed, log)
                outcome = score(task, log, time.perf_counter() - start, time.process_time() - cpu_start)
                outcomes[name].append(outcome)
                print(f"{name:8} {seed:>4} {fmt(outcome.steps_to_threshold):>13} "
                      f"{fmt(outcome.seconds_to_threshold, 1):>11} {fmt(outcome.final, 1):>8} "
                      f"{fmt(outcome.final_success, 2):>8} "
                      f"{outcome.seconds:>8.1f} {outcome.cpu_seconds:>8.1f} {outcome.steps / outcome.seconds:>8.0f}",
                      flush=True)
        summary.append((task, outcomes))

    print(f"\nMedians over seeds {' '.join(map(str, args.seeds))}; total {time.perf_counter() - begin:.0f} s\n")
    print("| task | learner | env steps to threshold | wall-clock to threshold (s) | final | final success "
          "| wall-clock, whole run (s) | CPU time, whole run (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for task, outcomes in summary:
        medians = {
            name: [statistics.median(getattr(o, attr) for o in runs)
                   for attr in ("steps_to_threshold", "seconds_to_threshold", "final", "final_success", "seconds",
                                "cpu_seconds")]
            for name, runs in outcomes.items()
        }
        for name, label in (("ours", "vlarl_algos"), ("sb3", "Stable-Baselines3")):
            if name in medians:
                steps, seconds, final, success, total, cpu = medians[name]
                print(f"| {task.name} | {label} | {fmt(steps)} | {fmt(seconds, 1)} | {fmt(final, 1)} "
                      f"| {fmt(success, 2)} | {total:.1f} | {cpu:.1f} |")
        if len(medians) == 2:
            ratios = [ratio(medians["sb3"][i], medians["ours"][i]) for i in (0, 1, 4, 5)]
            print(f"| {task.name} | SB3 / ours | {ratios[0]} | {ratios[1]} | | | {ratios[2]} | {ratios[3]} |")


if __name__ == "__main__":
    main()
