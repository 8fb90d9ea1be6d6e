"""A flat-Box view for libraries that cannot take Dict or Text spaces (e.g. Stable-Baselines3)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class StateOnlyObservation(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Observe only a float32 vector: ``privileged_state`` where the env has it (it holds the
    object and goal positions a state-based learner needs), else ``states``.

    Use with ``obs_mode="state"`` so no camera is rendered.
    """

    def __init__(self, env: gym.Env, key: str | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, key=key)
        gym.ObservationWrapper.__init__(self, env)
        available = env.observation_space.spaces
        if key is None:
            key = "privileged_state" if "privileged_state" in available else "states"
        if key not in available or not isinstance(available[key], spaces.Box):
            raise ValueError(
                f"StateOnlyObservation: expected a Box key such as 'states', got {key!r} of {list(available)}"
            )
        self.key = key
        self.observation_space = available[key]

    def observation(self, observation):
        return np.asarray(observation[self.key], dtype=np.float32)
