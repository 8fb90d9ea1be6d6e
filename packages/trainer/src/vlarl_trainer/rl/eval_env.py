"""The env an evaluation plays, as a pure function of the config: read by the evaluator, the trainer and
the config's validation alike, so that none of them imports another for it."""

from __future__ import annotations

import dataclasses

from vlarl_trainer.config import VlarlConfig


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
