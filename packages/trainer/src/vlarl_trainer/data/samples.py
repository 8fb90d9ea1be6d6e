"""Training samples for SFT: the observation at a frame plus the next H actions of its episode.

A chunk that runs past its episode's last frame repeats that frame's action, and
``action_is_pad`` marks those repeats (LeRobot's ``<key>_is_pad`` convention), so a loss can
ignore them or, as the pi0 loss does, learn to hold the final action.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vlarl_trainer.data.reader import DemonstrationDataset


class ActionChunkSampler:
    """Builds SFT batches (the env contract with a batch axis, plus ``actions`` [B, H, A])."""

    def __init__(self, dataset: DemonstrationDataset, horizon: int) -> None:
        if horizon <= 0:
            raise ValueError(f"action horizon must be positive, got {horizon}")
        self.dataset = dataset
        self.horizon = horizon
        self.episode_stop = np.empty(dataset.num_frames, dtype=np.int64)
        for record in dataset.episodes:
            self.episode_stop[record.start:record.stop] = record.stop

    def __len__(self) -> int:
        return self.dataset.num_frames

    def action_chunks(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Actions float32 [B, H, A] from each frame on, and action_is_pad bool [B, H]."""
        wanted = frames[:, None] + np.arange(self.horizon)[None, :]
        last = self.episode_stop[frames][:, None] - 1
        return self.dataset.actions[np.minimum(wanted, last)], wanted > last

    def batch(self, frames: np.ndarray) -> dict[str, Any]:
        """The samples at ``frames`` (dataset indices) as one batch."""
        frames = np.asarray(frames, dtype=np.int64)
        dataset = self.dataset
        actions, is_pad = self.action_chunks(frames)
        batch: dict[str, Any] = {f"{camera}_images": images[frames] for camera, images in dataset.images.items()}
        batch["states"] = dataset.states[frames]
        batch["task_description"] = dataset.task_descriptions(frames)
        batch["actions"] = actions
        batch["action_is_pad"] = is_pad
        return batch

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, Any]:
        """A batch of frames drawn uniformly with replacement."""
        return self.batch(rng.integers(0, len(self), size=batch_size))
