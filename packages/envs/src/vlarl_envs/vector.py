"""Vector environments with gymnasium's SAME_STEP autoreset.

A finished sub-env is reset inside the same ``step`` call: the returned observation is the
new episode's first, and the finished episode's last observation and info sit in
``info["final_obs"]`` / ``info["final_info"]`` (masked by ``info["_final_obs"]``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
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
