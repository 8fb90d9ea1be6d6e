"""Action chunks: a policy emits C actions at once and the env runs them as C sub-steps."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

REPLAN = "replan"
"""The info key with which an env asks for a new chunk before the current one is spent."""


@runtime_checkable
class DefersImages(Protocol):
    """A simulator env that can leave the images out of a step's observation and add them later.

    A chunk drops the observations of all its sub-steps but the last, and on a CPU rendering
    those images costs several times the physics (MetaWorld: ~15 ms a frame against ~1.5 ms a
    step). While ``defer_images`` is true, ``step`` returns observations without images;
    ``complete_observation`` then renders them from the current state, which is the state the
    step left, so the completed observation equals the one the step would have returned.
    """

    defer_images: bool

    def complete_observation(self, observation: dict[str, Any]) -> dict[str, Any]: ...


class ActionChunk(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Take actions of shape ``(C, A)`` and execute them one after another.

    The step returns the last observation, the summed reward and the any-over-chunk
    termination flags. Sub-steps after an episode ends are not executed, nor those after a sub-step
    whose info sets ``replan``: the env's goal changed there (a CALVIN chain's next task), so the rest
    of a chunk planned for the old one is dropped, as calvin empties its models' action queues
    between a chain's tasks. For action-level
    credit assignment, ``info["chunk_rewards"]`` (C,) holds each sub-step's reward and
    ``info["chunk_dones"]`` (C,) whether the episode ended at that sub-step (both zero for
    sub-steps that did not run); ``info["chunk_steps"]`` counts the sub-steps that ran.

    When the simulator env below implements :class:`DefersImages`, only the returned
    observation's images are rendered. Wrappers between the two must then leave images alone.
    Where the caller has set ``defer_images`` already (a vector env that renders all its envs'
    images in one call), the chunk leaves it set and returns the observation without images.
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
        simulator = self.env.unwrapped
        defers_images = isinstance(simulator, DefersImages) and not simulator.defer_images
        if defers_images:
            simulator.defer_images = True
        try:
            for index in range(self.chunk):
                observation, reward, terminated, truncated, info = self.env.step(actions[index])
                chunk_rewards[index] = reward
                total_reward += float(reward)
                if terminated or truncated:
                    chunk_dones[index] = True
                    break
                if info.get(REPLAN):
                    break
        finally:
            if defers_images:
                simulator.defer_images = False
        if defers_images:
            observation = simulator.complete_observation(observation)
        info = dict(info)
        info["chunk_rewards"] = chunk_rewards
        info["chunk_dones"] = chunk_dones
        info["chunk_steps"] = index + 1
        return observation, total_reward, terminated, truncated, info
