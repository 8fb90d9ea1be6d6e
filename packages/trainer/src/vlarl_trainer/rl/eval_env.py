"""The env an evaluation plays, as a pure function of the config: read by the evaluator, the trainer and
the config's validation alike, so that none of them imports another for it; with the checks of what it can
score (``eval.splits``, ``eval.calvin_chains``) that both the evaluator and the validation run."""

from __future__ import annotations

import dataclasses

from vlarl_trainer.config import VlarlConfig

CHAIN_COUNTING_REWARD_MODES = ("sparse", "only_at_end", "shaped")
"""The reward modes under which a chain episode's return is its length: each pays 1 per task completed
(``shaped``'s potential terms cancel within each task)."""


def evaluation_env(config: VlarlConfig) -> VlarlConfig:
    """The tree an evaluation plays: ``env.*``, or another env where ``eval.env_id`` / ``eval.env_kwargs`` /
    ``eval.num_envs`` name one (ML45-test after training on ML45-train, a policy trained on splats scored
    with another renderer). ``eval.env_kwargs`` update the training env's keywords."""
    num_envs = config.env.num_envs if config.eval.num_envs is None else config.eval.num_envs
    if config.eval.env_id is None and not config.eval.env_kwargs and num_envs == config.env.num_envs:
        return config
    env = dataclasses.replace(config.env, id=config.eval.env_id or config.env.id,
                              kwargs={**config.env.kwargs, **config.eval.env_kwargs}, num_envs=num_envs)
    return dataclasses.replace(config, env=env)


def env_tasks(config: VlarlConfig) -> list[str]:
    """The tasks of ``env.id`` with ``env.kwargs``, as its family names them (one for a single-task id)."""
    from vlarl_envs import family_of

    return list(family_of(config.env.id).tasks(config.env.id, config.env.kwargs))


def check_eval_splits(config: VlarlConfig) -> None:
    """A ValueError naming the ``eval.splits`` entries the evaluation env does not have (checked before any
    worker starts, and again by every evaluation)."""
    from vlarl_envs import family_of

    env_id = evaluation_env(config).env.id
    splits = family_of(env_id).splits(env_id)
    unknown = [split for split in config.eval.splits if split not in splits]
    if unknown:
        raise ValueError(f"eval.splits: {env_id} has no split(s) {unknown}; expected any of {list(splits)}")


def check_calvin_chains(config: VlarlConfig) -> None:
    """``eval.calvin_chains`` asks for a count of CALVIN's chains on a CALVIN evaluation env: the chains are
    CALVIN's tasks and start states, which no other family can play."""
    from vlarl_envs import family_of
    from vlarl_envs.calvin.chains import NUM_CHAINS
    from vlarl_envs.wrappers.reward_mode import resolve_reward_mode

    count = config.eval.calvin_chains
    if not count:
        return
    if not 0 < count <= NUM_CHAINS:
        raise ValueError(f"eval.calvin_chains must lie in 0..{NUM_CHAINS} (0: none, {NUM_CHAINS}: the benchmark), "
                         f"got {count}")
    scored = evaluation_env(config).env
    if family_of(scored.id).name != "CALVIN":
        raise ValueError(f"eval.calvin_chains={count} plays CALVIN's evaluation chains, but the evaluation env is "
                         f"{scored.id}; score them on vlarl/CALVIN-D-v0 (env.id or eval.env_id)")
    reward_mode = resolve_reward_mode(scored.kwargs.get("reward_mode", "sparse"))
    if reward_mode not in CHAIN_COUNTING_REWARD_MODES:
        raise ValueError(f"eval.calvin_chains reads a chain's length from its return, which counts the tasks "
                         f"completed under reward_mode {list(CHAIN_COUNTING_REWARD_MODES)}; the evaluation env "
                         f"has {reward_mode!r} (set eval.env_kwargs.reward_mode=sparse)")
