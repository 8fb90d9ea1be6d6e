"""Natural-language instructions: one canonical sentence per task plus paraphrases.

The canonical sentence is what training sees; paraphrases are held out for the
out-of-distribution (``semantic``) split, so a policy that memorised the training strings
can be told apart from one that reads them. A family whose benchmark fixes one sentence per task
and has no ``semantic`` split (LIBERO) keeps tasks without paraphrases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from vlarl_envs.contract import INSTRUCTION_SPACE


@dataclass(frozen=True)
class InstructionSet:
    """Instructions of a task family.

    Attributes:
        sentences: task name -> (canonical, paraphrase, paraphrase, ...); the paraphrases may be
            none where the family has no ``semantic`` split.
    """

    sentences: Mapping[str, Sequence[str]]

    def __post_init__(self) -> None:
        for task, options in self.sentences.items():
            if len(options) < 1:
                raise ValueError(f"task {task!r} needs a canonical instruction")
            for sentence in options:
                if not INSTRUCTION_SPACE.contains(sentence):
                    raise ValueError(f"instruction {sentence!r} of task {task!r} is outside the instruction charset")

    def canonical(self, task: str) -> str:
        return self.sentences[task][0]

    def paraphrases(self, task: str) -> tuple[str, ...]:
        return tuple(self.sentences[task][1:])

    def choose(self, task: str, paraphrase: bool, rng: np.random.Generator) -> str:
        """The canonical sentence, or a paraphrase drawn with ``rng`` when ``paraphrase``."""
        if not paraphrase:
            return self.canonical(task)
        options = self.paraphrases(task)
        if not options:
            raise ValueError(f"task {task!r} has no paraphrases to choose from")
        return options[int(rng.integers(len(options)))]
