"""Per-episode statistics in ``info["episode"]``: the figures the trainer logs under ``env/``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


def episode_figures(episode_return: Any, length: Any, success_once: Any, success_at_end: Any) -> dict[str, Any]:
    """``info["episode"]`` from an episode's counters, elementwise over Python, numpy or torch values, so
    that the single env's wrapper and a batched env (ManiSkill's) report the same figures.

    ``reward`` is ``return / episode_len``, and 0 for an episode of no steps."""
    # "length + (length == 0)" divides by 1 where length is 0 (the return is 0 there) for every type.
    return {
        "success_once": success_once,
        "success_at_end": success_at_end,
        "return": episode_return,
        "episode_len": length,
        "reward": episode_return / (length + (length == 0)),
    }


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
        return episode_figures(self._return, self._length, self._success_once, self._success_now)
