"""Per-episode statistics in ``info["episode"]``: the figures the trainer logs under ``env/``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class EpisodeStatistics(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """At the end of every episode put ``info["episode"] = {success_once, success_at_end, return,
    episode_len, reward}``.

    ``success_once`` is whether success held at any step, ``success_at_end`` whether it holds
    on the last step (they differ only when episodes do not terminate on success),
    ``return`` is the sum of rewards, ``episode_len`` the number of wrapper steps (chunks
    when wrapping an ActionChunk env) and ``reward`` their mean reward (``return / episode_len``,
    RLinf's ``reward``). ``episode_so_far()`` gives the same figures for an episode that has not
    ended, for a caller that stops playing before the env ends it.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self._return = 0.0
        self._length = 0
        self._success_once = False
        self._success_now = False

    def reset(self, **kwargs):
        self._return = 0.0
        self._length = 0
        self._success_once = False
        self._success_now = False
        return self.env.reset(**kwargs)

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._length += 1
        self._success_now = bool(info["success"])
        self._success_once = self._success_once or self._success_now
        if terminated or truncated:
            info = dict(info)
            info["episode"] = self.episode_so_far()
        return observation, reward, terminated, truncated, info

    def episode_so_far(self) -> dict[str, Any]:
        """The statistics of the current episode up to the last step, as ``info["episode"]`` holds them."""
        return {
            "success_once": self._success_once,
            "success_at_end": self._success_now,
            "return": self._return,
            "episode_len": self._length,
            "reward": self._return / self._length if self._length else 0.0,
        }
