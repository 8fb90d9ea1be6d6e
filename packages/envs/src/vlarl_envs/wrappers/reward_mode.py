"""Reward modes: what the learner is paid, derived from ``info["success"]`` or the simulator.

``step_reward`` is the one implementation: the single-env ``RewardMode`` wrapper and the batched
ManiSkill env both call it, on numpy scalars or on torch tensors of a batch.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from vlarl_envs.wrappers.action_chunk import REPLAN

REWARD_MODES = ("sparse", "only_at_end", "dense", "shaped", "progress")

REWARD_MODE_ALIASES = {"only_success": "sparse", "raw": "dense"}
"""RLinf's reward names that mean one of ours. RLinf's ManiSkill ``only_success`` pays R = success as
a relative reward (r_t = R_t - R_{t-1}): 1 on the step success first holds, as ``sparse`` does; it
would also pay -1 on a step where success is lost again, which ``sparse`` does not (with episodes
that end on success the two agree). RLinf's ``raw`` is the simulator's reward, our ``dense``."""


def resolve_reward_mode(mode: str) -> str:
    """Our name of a reward mode, RLinf's aliases included; a ValueError listing both otherwise."""
    mode = REWARD_MODE_ALIASES.get(mode, mode)
    if mode not in REWARD_MODES:
        raise ValueError(f"reward mode must be one of {REWARD_MODES} (or RLinf's {sorted(REWARD_MODE_ALIASES)}), "
                         f"got {mode!r}")
    return mode


def step_reward(mode: str, success: Any, succeeded: Any, dense: Any, done: Any, potential: Any) -> tuple[Any, Any]:
    """The reward of one (sub-)step under ``mode``, elementwise over numpy or torch values.

    Args:
        mode: one of ``REWARD_MODES``.
        success: whether success holds after this step (bool: Python, numpy or torch).
        succeeded: whether it held at an earlier step of the episode (bool).
        dense: the simulator's dense reward scaled to [0, 1] (``shaped``, ``progress``) or as it
            comes (``dense``).
        done: whether this step ends the episode (bool).
        potential: the potential the previous step left (0 at an episode's start).

    Returns:
        The reward, and the potential the next step starts from (0 after an episode's end).
    """
    # "x ^ True" negates Python bools, numpy bools and torch bool tensors alike ("~True" is -2).
    first_success = success & (succeeded ^ True)
    if mode == "sparse":
        return first_success * 1.0, potential
    if mode == "only_at_end":
        return (success & done) * 1.0, potential
    if mode == "dense":
        return dense * 1.0, potential
    next_potential = dense * (done ^ True)
    paid = next_potential if mode == "shaped" else dense
    return first_success + paid - potential, next_potential


class RewardMode(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Replace the simulator's reward according to ``mode``.

    - ``sparse``: 1 on the step where success first holds in the episode, else 0 (RLinf's
      relative reward: a success signal pays out once; RLinf's ``only_success``).
    - ``only_at_end``: 1 on the last step of an episode (terminated or truncated) if it ends
      in success, else 0.
    - ``dense``: the simulator's own shaped reward (RLinf's ``raw``).
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

    A step whose info sets ``replan`` ends its goal as an episode's end would: the next goal (a CALVIN
    chain's next task) is paid as a new episode's first would be, so a chain's ``sparse`` return counts
    its tasks completed.
    """

    def __init__(self, env: gym.Env, mode: str = "sparse", dense_reward_max: float = 1.0) -> None:
        mode = resolve_reward_mode(mode)
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
        scale = 1.0 if self.mode == "dense" else self.dense_reward_max
        replan = bool(info.get(REPLAN))
        reward, self._potential = step_reward(self.mode, success, self._succeeded, float(reward) / scale,
                                              bool(terminated or truncated or replan), self._potential)
        self._succeeded = (self._succeeded or success) and not replan
        return observation, float(reward), terminated, truncated, info
