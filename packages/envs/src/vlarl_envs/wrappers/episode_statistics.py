"""Per-episode statistics in ``info["episode"]``: the figures the trainer logs under ``env/``."""

from __future__ import annotations

import gymnasium as gym


class EpisodeStatistics(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """At the end of every episode put ``info["episode"] = {success_once, success_at_end,
    return, episode_len}``.

    ``success_once`` is whether success held at any step, ``success_at_end`` whether it holds
    on the last step (they differ only when episodes do not terminate on success),
    ``return`` is the sum of rewards and ``episode_len`` the number of wrapper steps (chunks
    when wrapping an ActionChunk env).
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self._return = 0.0
        self._length = 0
        self._success_once = False

    def reset(self, **kwargs):
        self._return = 0.0
        self._length = 0
        self._success_once = False
        return self.env.reset(**kwargs)

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._length += 1
        self._success_once = self._success_once or bool(info["success"])
        if terminated or truncated:
            info = dict(info)
            info["episode"] = {
                "success_once": self._success_once,
                "success_at_end": bool(info["success"]),
                "return": self._return,
                "episode_len": self._length,
            }
        return observation, reward, terminated, truncated, info
