"""Reward modes: what the learner is paid, derived from ``info["success"]`` or the simulator."""

from __future__ import annotations

import gymnasium as gym

REWARD_MODES = ("sparse", "only_at_end", "dense", "shaped", "progress")


class RewardMode(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Replace the simulator's reward according to ``mode``.

    - ``sparse``: 1 on the step where success first holds in the episode, else 0 (RLinf's
      relative reward: a success signal pays out once).
    - ``only_at_end``: 1 on the last step of an episode (terminated or truncated) if it ends
      in success, else 0.
    - ``dense``: the simulator's own shaped reward.
    - ``shaped``: ``sparse`` plus potential-based shaping ``phi(s') - phi(s)`` (Ng, Harada and
      Russell, 1999), where ``phi`` is the simulator's dense reward on the step that reached the
      state, divided by ``dense_reward_max``, and 0 before the first step and on the step that
      ends the episode. The shaping telescopes, so every episode's undiscounted return equals its
      sparse return and policies rank as under ``sparse``; yet each step is paid for progress,
      which a critic that has not learned yet cannot supply. ``dense`` with termination on
      success instead pays a policy to hover short of success.
    - ``progress``: ``shaped`` without the drop to 0 on the step that ends the episode, so an
      episode's undiscounted return is its sparse return plus ``phi`` of the state it ends in.
      Under ``shaped`` an episode that never succeeds returns 0 however close it came, so once
      the critic has learned, a task the policy never solves gives no gradient; here it is paid
      for how far it got. ``phi`` lies in [0, 1], so success (1 + ``phi``) still outranks
      hovering short of it.
    """

    def __init__(self, env: gym.Env, mode: str = "sparse", dense_reward_max: float = 1.0) -> None:
        if mode not in REWARD_MODES:
            raise ValueError(f"reward mode must be one of {REWARD_MODES}, got {mode!r}")
        if not dense_reward_max > 0:
            raise ValueError(f"dense_reward_max must be > 0, got {dense_reward_max!r}")
        gym.utils.RecordConstructorArgs.__init__(self, mode=mode, dense_reward_max=dense_reward_max)
        gym.Wrapper.__init__(self, env)
        self.mode = mode
        self.dense_reward_max = float(dense_reward_max)
        self._succeeded = False
        self._potential = 0.0

    def reset(self, **kwargs):
        self._succeeded = False
        self._potential = 0.0
        return self.env.reset(**kwargs)

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        success = bool(info["success"])
        if self.mode == "sparse":
            reward = float(success and not self._succeeded)
        elif self.mode == "only_at_end":
            reward = float(success and (terminated or truncated))
        elif self.mode in ("shaped", "progress"):
            ends_shaping = self.mode == "shaped" and (terminated or truncated)
            potential = 0.0 if ends_shaping else float(reward) / self.dense_reward_max
            reward = float(success and not self._succeeded) + potential - self._potential
            self._potential = potential
        self._succeeded = self._succeeded or success
        return observation, float(reward), terminated, truncated, info
