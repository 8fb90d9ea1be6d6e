"""Reward modes: what the learner is paid, derived from ``info["success"]`` or the simulator."""

from __future__ import annotations

import gymnasium as gym

REWARD_MODES = ("sparse", "only_at_end", "dense")


class RewardMode(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Replace the simulator's reward according to ``mode``.

    - ``sparse``: 1 on the step where success first holds in the episode, else 0 (the seeds'
      relative reward: a success signal pays out once).
    - ``only_at_end``: 1 on the last step of an episode (terminated or truncated) if it ends
      in success, else 0.
    - ``dense``: the simulator's own shaped reward.
    """

    def __init__(self, env: gym.Env, mode: str = "sparse") -> None:
        if mode not in REWARD_MODES:
            raise ValueError(f"reward mode must be one of {REWARD_MODES}, got {mode!r}")
        gym.utils.RecordConstructorArgs.__init__(self, mode=mode)
        gym.Wrapper.__init__(self, env)
        self.mode = mode
        self._succeeded = False

    def reset(self, **kwargs):
        self._succeeded = False
        return self.env.reset(**kwargs)

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        success = bool(info["success"])
        if self.mode == "sparse":
            reward = float(success and not self._succeeded)
        elif self.mode == "only_at_end":
            reward = float(success and (terminated or truncated))
        self._succeeded = self._succeeded or success
        return observation, float(reward), terminated, truncated, info
