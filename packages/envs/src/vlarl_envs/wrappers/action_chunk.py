"""Action chunks: a policy emits C actions at once and the env runs them as C sub-steps."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class ActionChunk(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Take actions of shape ``(C, A)`` and execute them one after another.

    The step returns the last observation, the summed reward and the any-over-chunk
    termination flags. Sub-steps after an episode ends are not executed. For action-level
    credit assignment, ``info["chunk_rewards"]`` (C,) holds each sub-step's reward and
    ``info["chunk_dones"]`` (C,) whether the episode ended at that sub-step (both zero for
    sub-steps that did not run); ``info["chunk_steps"]`` counts the sub-steps that ran.
    """

    def __init__(self, env: gym.Env, chunk: int) -> None:
        if chunk < 1:
            raise ValueError(f"action chunk must be >= 1, got {chunk}")
        gym.utils.RecordConstructorArgs.__init__(self, chunk=chunk)
        gym.Wrapper.__init__(self, env)
        inner = env.action_space
        if not isinstance(inner, spaces.Box) or len(inner.shape) != 1:
            raise ValueError(f"ActionChunk needs a 1-D Box action space, got {inner}")
        self.chunk = chunk
        self.action_space = spaces.Box(
            np.broadcast_to(inner.low, (chunk, *inner.shape)),
            np.broadcast_to(inner.high, (chunk, *inner.shape)),
            dtype=inner.dtype,
        )

    def step(self, actions):
        actions = np.asarray(actions)
        if actions.shape != self.action_space.shape:
            raise ValueError(
                f"{self.env.spec.id if self.env.spec else type(self.env.unwrapped).__name__}: "
                f"expected an action chunk of shape {self.action_space.shape}, got shape {actions.shape}"
            )
        chunk_rewards = np.zeros(self.chunk, dtype=np.float32)
        chunk_dones = np.zeros(self.chunk, dtype=bool)
        total_reward = 0.0
        terminated = truncated = False
        for index in range(self.chunk):
            observation, reward, terminated, truncated, info = self.env.step(actions[index])
            chunk_rewards[index] = reward
            total_reward += float(reward)
            if terminated or truncated:
                chunk_dones[index] = True
                break
        info = dict(info)
        info["chunk_rewards"] = chunk_rewards
        info["chunk_dones"] = chunk_dones
        info["chunk_steps"] = index + 1
        return observation, total_reward, terminated, truncated, info
