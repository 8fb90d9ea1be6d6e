"""How a (split, episode_id) pair becomes a ManiSkill reset, for both kinds of task.

ManiSkill's own tasks draw their layout from the reset seed, so an episode is a seed
derived from ``(split stream, episode_id)``. PutOnPlate's episodes are explicit records
(``put_on_plate.episodes``) handed to the task through the reset options. Either way the
same ``(split, episode_id)`` gives the same initial state in every process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vlarl_envs.contract import validate_choice
from vlarl_envs.instructions import InstructionSet
from vlarl_envs.maniskill.put_on_plate.episodes import SPLIT_SIZES, SPLIT_STREAMS, make_episode


@dataclass(frozen=True)
class EpisodeStart:
    """What resetting to one episode needs.

    Attributes:
        seed: the ManiSkill reset seed.
        instruction: the episode's ``task_description``.
        info: keys added to the reset info (``episode_id``, ``split``, ...).
        record: PutOnPlate's episode record, passed on in ``options["episodes"]``.
    """

    seed: int
    instruction: str
    info: dict[str, Any]
    record: Any = None


def reset_arguments(starts: list[EpisodeStart]) -> dict[str, Any]:
    """``seed`` and ``options`` for one batched ManiSkill reset of these episodes."""
    options: dict[str, Any] = {}
    if starts[0].record is not None:
        options["episodes"] = [start.record for start in starts]
    return {"seed": [start.seed for start in starts], "options": options}


@dataclass(frozen=True)
class SeededEpisodes:
    """ManiSkill's own tasks: the seed is the episode.

    ``test`` draws seeds from a stream ``train`` never uses; ``semantic`` replays ``test``'s
    seeds with a held-out paraphrase, so the two differ only in language.
    """

    task: str
    instructions: InstructionSet
    env_id: str
    streams: dict[str, int] = field(default_factory=lambda: {"train": 0, "test": 1, "semantic": 1})

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.streams)

    def draw_episode_id(self, split: str, rng: np.random.Generator) -> int:
        return int(rng.integers(2**31))

    def start(self, split: str, episode_id: int) -> EpisodeStart:
        validate_choice(self.env_id, "split", split, self.streams)
        rng = np.random.default_rng([self.streams[split], int(episode_id)])
        seed = int(rng.integers(2**31))
        instruction = self.instructions.choose(self.task, split == "semantic", rng)
        return EpisodeStart(seed, instruction, {"episode_id": int(episode_id), "split": split, "task": self.task})


@dataclass(frozen=True)
class PutOnPlateEpisodes:
    """PutOnPlate: each split is a fixed list of ``SPLIT_SIZES[split]`` episode records."""

    env_id: str

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(SPLIT_STREAMS)

    def draw_episode_id(self, split: str, rng: np.random.Generator) -> int:
        return int(rng.integers(SPLIT_SIZES[validate_choice(self.env_id, "split", split, self.splits)]))

    def start(self, split: str, episode_id: int) -> EpisodeStart:
        validate_choice(self.env_id, "split", split, self.splits)
        if episode_id >= SPLIT_SIZES[split]:
            raise ValueError(
                f"{self.env_id}: split {split!r} has episode ids 0..{SPLIT_SIZES[split] - 1}, "
                f"got episode_id={episode_id}"
            )
        record = make_episode(split, int(episode_id))
        info = {
            "episode_id": int(episode_id),
            "split": split,
            "task": "PutOnPlate",
            "variation": record.variation,
            "target": record.target,
            "receptacle": record.receptacle,
        }
        return EpisodeStart(int(episode_id), record.instruction, info, record)
