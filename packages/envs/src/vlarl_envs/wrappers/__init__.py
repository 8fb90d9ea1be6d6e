"""Wrappers, applied in the contract's order: reward mode -> action chunk -> episode statistics -> video."""

from vlarl_envs.wrappers.action_chunk import REPLAN, ActionChunk, DefersImages
from vlarl_envs.wrappers.episode_statistics import EpisodeStatistics, episode_figures
from vlarl_envs.wrappers.record_video import RecordVideo
from vlarl_envs.wrappers.reward_mode import REWARD_MODE_ALIASES, REWARD_MODES, RewardMode, step_reward
from vlarl_envs.wrappers.state_only import StateOnlyObservation

__all__ = ["REPLAN", "REWARD_MODES", "REWARD_MODE_ALIASES", "ActionChunk", "DefersImages", "EpisodeStatistics",
           "RecordVideo", "RewardMode", "StateOnlyObservation", "episode_figures", "step_reward"]
