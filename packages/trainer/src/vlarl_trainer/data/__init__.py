"""Demonstrations in the LeRobot dataset format (v3.0): collect, write, read, sample for SFT.

    summary = collect_demonstrations("vlarl/MetaWorld-reach-v3", 10, "datasets/reach")
    dataset = load_dataset("datasets/reach")                  # arrays named after the env contract
    batch = ActionChunkSampler(dataset, horizon=8).sample(32, np.random.default_rng(0))
"""

from vlarl_trainer.data.collector import CollectionSummary, collect_demonstrations
from vlarl_trainer.data.layout import CODEBASE_VERSION
from vlarl_trainer.data.reader import DemonstrationDataset, EpisodeRecord, load_dataset
from vlarl_trainer.data.samples import ActionChunkSampler
from vlarl_trainer.data.writer import Episode, LeRobotDatasetWriter

__all__ = [
    "CODEBASE_VERSION",
    "ActionChunkSampler",
    "CollectionSummary",
    "DemonstrationDataset",
    "Episode",
    "EpisodeRecord",
    "LeRobotDatasetWriter",
    "collect_demonstrations",
    "load_dataset",
]
