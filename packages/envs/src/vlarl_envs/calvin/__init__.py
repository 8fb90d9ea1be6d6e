"""CALVIN: language-conditioned tasks on calvin_env's play tables (ABC for training, D for evaluation), and
CALVIN's long-horizon chain protocol. Importing this package never imports calvin_env."""

from vlarl_envs.calvin.chains import (
    Chain,
    evaluate_chains,
    evaluation_chain,
    evaluation_chains,
    format_summary,
    play_chain,
    summarize,
)
from vlarl_envs.calvin.registration import CALVIN_SCENE_SETS, calvin_env_id
from vlarl_envs.calvin.tasks import CALVIN_TASKS, TASK_NAMES, initial_conditions, start_states

__all__ = [
    "CALVIN_SCENE_SETS",
    "CALVIN_TASKS",
    "TASK_NAMES",
    "Chain",
    "calvin_env_id",
    "evaluate_chains",
    "evaluation_chain",
    "evaluation_chains",
    "format_summary",
    "initial_conditions",
    "play_chain",
    "start_states",
    "summarize",
]
