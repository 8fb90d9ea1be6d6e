"""Env families: what each family of vlarl ids gives the tools built on the envs.

A family (MetaWorld, ManiSkill, GSEnv, ...) owns the ids that start with its prefix and declares
once what a collector, a trainer or an evaluator needs to know about them:

- ``tasks``: the tasks an id holds with the given ``gym.make`` keywords (MetaWorld's suite ids take
  ``tasks=[...]``, a subset of the suite), without building a simulator;
- ``splits``: the ``options["split"]`` values an id accepts, training's first;
- ``instructions``: an id's instruction set (canonical sentences and held-out paraphrases);
- ``expert``: the scripted expert of a task, or None (what vlarl-collect records);
- ``group``: the group an evaluation episode is reported in besides its task and split
  (MetaWorld's difficulty, PutOnPlate's variation), or None;
- ``make_vec``: N envs of one id as a gymnasium ``VectorEnv`` (SAME_STEP autoreset): batched in one
  process where the simulator batches (ManiSkill's GPU simulation, GSEnv's one-call splat render),
  subprocesses otherwise;
- ``make_episode_envs``: N envs of one id as ``EpisodeEnvs`` (one episode per env and reset,
  per-env reset options), what the trainer's env workers step;
- ``robot_type`` and ``feature_names``: what a LeRobot dataset calls the robot, states and actions.

Adding a family is one module that builds its ``EnvFamily`` and one ``register_family`` call in
``vlarl_envs/__init__.py``. Nothing here imports a simulator: a hook that needs the simulator's package names
it with ``deferred("module:function")``, imported on the hook's first call.

    >>> family = family_of("vlarl/MetaWorld-MT10-v3")      # doctest: +SKIP
    >>> family.tasks("vlarl/MetaWorld-MT10-v3")[:2], family.group("reach-v3", "test", 0)   # doctest: +SKIP
    (('reach-v3', 'push-v3'), 'easy')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv

from vlarl_envs.instructions import InstructionSet
from vlarl_envs.vector import EpisodeEnvs, make_episode_envs, make_vec

Expert = Callable[[Mapping[str, Any]], np.ndarray]
"""obs -> action in [-1, 1]; built fresh for every episode, so it may keep state."""


@dataclass(frozen=True)
class EnvFamily:
    """One family of vlarl ids; see the module docstring for what each field serves."""

    name: str
    tasks: Callable[..., tuple[str, ...]]
    """``tasks(env_id, env_kwargs=None)``."""
    splits: Callable[[str], tuple[str, ...]]
    instructions: Callable[[str], InstructionSet]
    batched: bool = False
    """Whether N envs simulate in one process (the id's own ``vector_entry_point``) rather than one per subprocess."""
    make_vec: Callable[..., VectorEnv] | None = None
    """``make_vec(env_id, num_envs, **gym_make_kwargs)``; by default ``entry_point_vec`` where ``batched``, else
    ``vlarl_envs.vector.make_vec``."""
    make_episode_envs: Callable[..., EpisodeEnvs] = make_episode_envs
    """``make_episode_envs(env_id, num_envs, **gym_make_kwargs)``; by default single envs in one process."""
    expert: Callable[[str], Expert | None] = lambda task: None
    group: Callable[[str, str, int], str | None] = lambda task, split, episode_id: None
    robot_type: str = "unknown"
    feature_names: Mapping[str, Sequence[str]] = field(default_factory=dict)
    id_prefix: str = ""
    """Every id of the family starts with it; by default ``vlarl/<name>-``."""
    extra: str = ""
    """The pip extra that installs its simulator, ``pip install 'vlarl-envs[<extra>]'``; by default the name in
    lower case."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "id_prefix", self.id_prefix or f"vlarl/{self.name}-")
        object.__setattr__(self, "extra", self.extra or self.name.lower())
        if self.make_vec is None:
            object.__setattr__(self, "make_vec", entry_point_vec if self.batched else make_vec)

    def owns(self, env_id: str) -> bool:
        return bare_id(env_id).startswith(self.id_prefix)

    def make_expert(self, task: str) -> Expert:
        """The task's scripted expert; a ValueError when the family has none for it."""
        expert = self.expert(task)
        if expert is None:
            raise ValueError(f"no scripted expert for {self.name} task {task!r}")
        return expert


FAMILIES: dict[str, EnvFamily] = {}


def bare_id(env_id: str) -> str:
    """``vlarl_envs:vlarl/X-v0`` -> ``vlarl/X-v0``: gymnasium's module prefix dropped."""
    return env_id.split(":", 1)[-1]


def register_family(family: EnvFamily) -> None:
    """Add a family; its id prefix must not overlap another family's."""
    for other in FAMILIES.values():
        if family.id_prefix.startswith(other.id_prefix) or other.id_prefix.startswith(family.id_prefix):
            raise ValueError(f"family {family.name!r} ids {family.id_prefix!r}* overlap family {other.name!r} "
                             f"ids {other.id_prefix!r}*")
    FAMILIES[family.name] = family


def family_of(env_id: str) -> EnvFamily:
    """The family owning ``env_id``; a ValueError listing the families when none does."""
    for family in FAMILIES.values():
        if family.owns(env_id):
            return family
    raise ValueError(f"env id {env_id!r} belongs to no vlarl env family; expected an id starting with one of "
                     f"{sorted(family.id_prefix for family in FAMILIES.values())}")


def entry_point_vec(env_id: str, num_envs: int, **env_kwargs: Any) -> VectorEnv:
    """The id's own ``vector_entry_point`` (``gym.make_vec``): a family that batches in one process."""
    import gymnasium as gym

    return gym.make_vec(bare_id(env_id), num_envs=num_envs, vectorization_mode="vector_entry_point", **env_kwargs)


def registered_kwargs(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The keywords an id was registered with (its task or suite), read from gymnasium's registry, updated with
    ``env_kwargs``, those a ``gym.make`` call adds."""
    import gymnasium as gym

    return {**gym.spec(bare_id(env_id)).kwargs, **(env_kwargs or {})}


def deferred(entry_point: str) -> Callable[..., Any]:
    """The function ``entry_point`` (``module:name``) names, imported on the first call, so that declaring a
    family imports nothing of its simulator (experts, batched vector envs)."""
    module, _, name = entry_point.partition(":")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call
