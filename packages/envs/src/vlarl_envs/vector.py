"""Vector environments: gymnasium's, with SAME_STEP autoreset, and the one-episode-per-env kind
that RL rollouts step.

``make_vec``: a finished sub-env is reset inside the same ``step`` call: the returned
observation is the new episode's first, and the finished episode's last observation and info
sit in ``info["final_obs"]`` / ``info["final_info"]`` (masked by ``info["_final_obs"]``).

``make_episode_envs``: ``EpisodeEnvs``, whose envs reset with options of their own and
stop at the end of their episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

VECTORIZATION_MODES = ("async", "sync")


def make_vec(
    env_id: str,
    num_envs: int,
    vectorization_mode: str = "async",
    context: str | None = "forkserver",
    **env_kwargs: Any,
) -> VectorEnv:
    """``num_envs`` copies of ``env_id``, each in its own subprocess (``async``) or in this one.

    Args:
        env_id: a registered id, e.g. ``vlarl/MetaWorld-MT10-v3``.
        num_envs: number of sub-environments.
        vectorization_mode: "async" (one subprocess per env) or "sync".
        context: multiprocessing start method for "async"; forkserver keeps simulator and
            GL state of this process out of the workers.
        **env_kwargs: passed to ``gym.make`` for every sub-env.

    Reset with ``seed=s`` seeds the sub-envs with s, s+1, ...; pass
    ``options={"episode_id": k}`` per sub-env through ``vec.call`` or reset them one by one
    for replayable evaluation.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if vectorization_mode not in VECTORIZATION_MODES:
        raise ValueError(f"vectorization_mode must be one of {VECTORIZATION_MODES}, got {vectorization_mode!r}")
    gym.spec(env_id)  # an unknown id fails here, in this process, with gymnasium's hint
    # Subprocess workers start without this process's registry: the "module:" prefix makes
    # gym.make import vlarl_envs (and so register the ids) in each of them.
    importable_id = env_id if ":" in env_id else f"vlarl_envs:{env_id}"
    factories = [lambda: gym.make(importable_id, **env_kwargs) for _ in range(num_envs)]
    if vectorization_mode == "sync":
        return SyncVectorEnv(factories, autoreset_mode=AutoresetMode.SAME_STEP)
    return AsyncVectorEnv(factories, autoreset_mode=AutoresetMode.SAME_STEP, context=context)


class EpisodeEnvs:
    """N envs that each play one episode per reset: what RL rollouts and evaluations step.

    Not a gymnasium ``VectorEnv`` (hence the name): there is no autoreset, and ``reset`` and ``step``
    take and return per-env lists. Every env resets with options of its own
    (episode id, task, split), so a rollout chooses each env's initial state; an env whose episode
    ended is no longer stepped (its last observation stays, its reward is 0), so a batch of episodes
    costs no more simulation than the episodes themselves. Episode statistics are each env's own
    ``info["episode"]`` (the contract's EpisodeStatistics), or its ``episode_so_far`` for an episode
    still running when the caller stops.

    Observations come batched: arrays gain a leading env axis, ``task_description`` is a list.
    """

    def __init__(self, envs: Sequence[gym.Env]) -> None:
        if not envs:
            raise ValueError("EpisodeEnvs needs at least one env")
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self._observations: list[dict[str, Any]] = []
        self._done = np.zeros(self.num_envs, bool)
        self._episodes: list[dict[str, Any] | None] = [None] * self.num_envs

    def reset(self, options: Sequence[dict[str, Any]], idle: Sequence[bool] | None = None
              ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Start one episode per env, env ``i`` with ``options[i]``; returns the batch and each env's info.

        An env marked ``idle`` resets, so the batch holds an observation for it, but starts done: it is
        never stepped and plays nothing (the last round of an evaluation leaves envs over)."""
        if len(options) != self.num_envs:
            raise ValueError(f"expected reset options for each of {self.num_envs} envs, got {len(options)}")
        idle = idle_mask(idle, self.num_envs)
        self._observations, infos = [], []
        for env, env_options in zip(self.envs, options):
            observation, info = env.reset(options=env_options)
            self._observations.append(observation)
            infos.append(info)
        self._complete(list(range(self.num_envs)))
        self._done = idle
        self._episodes = [None] * self.num_envs
        return stack_observations(self._observations), infos

    def step(self, actions: np.ndarray) -> tuple[dict[str, Any], np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step every env still in its episode with its row of ``actions``.

        Returns:
            The batch, rewards ``[N]`` float32 (0 where an episode had ended), whether each env's
            episode has ended ``[N]`` (once true, true until the next reset), and each stepped env's
            info (``{}`` for the others).
        """
        rewards = np.zeros(self.num_envs, np.float32)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        stepped = []
        for index, env in enumerate(self.envs):
            if self._done[index]:
                continue
            stepped.append(index)
            observation, reward, terminated, truncated, info = env.step(actions[index])
            self._observations[index] = observation
            rewards[index] = reward
            infos[index] = info
            if terminated or truncated:
                self._done[index] = True
                self._episodes[index] = info["episode"]
        self._complete(stepped)
        return stack_observations(self._observations), rewards, self._done.copy(), infos

    def _complete(self, indices: list[int]) -> None:
        """Add what the envs ``indices``, just reset or stepped, left out of their observations: nothing
        here; a subclass whose envs defer their images renders them all at once (GSEnv's)."""

    def episode_statistics(self) -> list[dict[str, Any]]:
        """Each env's ``info["episode"]``, or the statistics so far of an episode that has not ended."""
        return [episode if episode is not None else env.get_wrapper_attr("episode_so_far")()
                for env, episode in zip(self.envs, self._episodes)]

    def close(self) -> None:
        for env in self.envs:
            env.close()


def idle_mask(idle: Sequence[bool] | None, num_envs: int) -> np.ndarray:
    """``idle`` as a bool array of ``num_envs`` (all false for None), or a ValueError naming the sizes."""
    if idle is None:
        return np.zeros(num_envs, bool)
    mask = np.array(idle, bool).reshape(-1)
    if mask.shape != (num_envs,):
        raise ValueError(f"expected an idle flag for each of {num_envs} envs, got {len(mask)}")
    return mask


def stack_observations(observations: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Single-env observations as one batch: arrays stacked on a new first axis, instructions a list."""
    return {key: [obs[key] for obs in observations] if key == "task_description"
            else np.stack([obs[key] for obs in observations]) for key in observations[0]}


def make_episode_envs(env_id: str, num_envs: int, **env_kwargs: Any) -> EpisodeEnvs:
    """``num_envs`` single envs of ``env_id`` in this process, as ``EpisodeEnvs``."""
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    return EpisodeEnvs([gym.make(env_id, **env_kwargs) for _ in range(num_envs)])
