"""Episode videos with the instruction, step, reward and success drawn under each frame."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import imageio.v2 as imageio
import numpy as np
from PIL import Image, ImageDraw, ImageFont

VIDEO_WIDTH = 256
"""Frames are scaled up to this width so the caption stays legible under 64-128 px images."""
CAPTION_HEIGHT = 64


def caption_frame(image: np.ndarray, lines: list[str]) -> np.ndarray:
    """The image scaled to VIDEO_WIDTH with a caption band of ``lines`` under it."""
    height, width = image.shape[:2]
    scaled_height = max(16, int(round(height * VIDEO_WIDTH / width / 16)) * 16)
    picture = Image.fromarray(image).resize((VIDEO_WIDTH, scaled_height), Image.NEAREST)
    canvas = Image.new("RGB", (VIDEO_WIDTH, scaled_height + CAPTION_HEIGHT), (20, 20, 20))
    canvas.paste(picture, (0, 0))
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default()
    for row, line in enumerate(lines):
        draw.text((4, scaled_height + 2 + 15 * row), line, fill=(235, 235, 235), font=font)
    return np.asarray(canvas)


def wrap_words(text: str, width: int = 40) -> list[str]:
    """Split an instruction into caption lines of at most ``width`` characters."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}".strip()
    return lines + ([current] if current else [])


class RecordVideo(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Write an mp4 per recorded episode into ``video_dir``.

    Frames come from ``obs["main_images"]`` (or ``env.render()`` when the observation has no
    image). Each file is written under a temporary name and linked to its name when complete, and
    the numbering continues after files already in the folder (or made meanwhile), so nothing is
    overwritten.

    Args:
        env: the env to record.
        video_dir: output folder (created when missing).
        episode_trigger: episode index -> record it? Default: every episode.
        fps: frames per second of the mp4.
        name_prefix: file names are ``{name_prefix}-{index:05d}.mp4``.
    """

    def __init__(
        self,
        env: gym.Env,
        video_dir: str | os.PathLike,
        episode_trigger: Callable[[int], bool] | None = None,
        fps: int = 10,
        name_prefix: str = "episode",
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, video_dir=str(video_dir), fps=fps, name_prefix=name_prefix)
        gym.Wrapper.__init__(self, env)
        self.video_dir = Path(video_dir)
        self.video_dir.mkdir(parents=True, exist_ok=True)
        self.episode_trigger = episode_trigger or (lambda _: True)
        self.fps = fps
        self.name_prefix = name_prefix
        pattern = re.compile(rf"{re.escape(name_prefix)}-(\d+)\.mp4$")
        existing = [int(m.group(1)) for p in self.video_dir.iterdir() if (m := pattern.match(p.name))]
        self._episode_index = max(existing, default=-1) + 1
        self._frames: list[np.ndarray] | None = None
        self._instruction = ""
        self._return = 0.0
        self._step = 0
        self.written: list[Path] = []

    def _frame(self, observation) -> np.ndarray:
        if isinstance(observation, dict) and "main_images" in observation:
            return np.asarray(observation["main_images"])
        frame = self.env.render()
        if frame is None:
            raise ValueError("RecordVideo needs obs_mode='rgb' or render_mode='rgb_array'")
        return np.asarray(frame)

    def _capture(self, observation, reward: float | None, success: bool) -> None:
        reward_text = "-" if reward is None else f"{reward:.2f} (return {self._return:.2f})"
        lines = wrap_words(self._instruction)[:2]
        lines.append(f"step {self._step}  reward {reward_text}  success {'yes' if success else 'no'}")
        self._frames.append(caption_frame(self._frame(observation), lines))

    def reset(self, **kwargs):
        observation, info = self.env.reset(**kwargs)
        recording = self.episode_trigger(self._episode_index)
        self._frames = [] if recording else None
        self._instruction = str(observation.get("task_description", "")) if isinstance(observation, dict) else ""
        self._return = 0.0
        self._step = 0
        if recording:
            self._capture(observation, None, False)
        return observation, info

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._step += 1
        if self._frames is not None:
            self._capture(observation, float(reward), bool(info.get("success", False)))
            if terminated or truncated:
                self._write()
        if terminated or truncated:
            self._episode_index += 1
        return observation, reward, terminated, truncated, info

    def _write(self) -> None:
        """Write the mp4 under a name of its own, then link it to the next free ``{prefix}-{index}.mp4``: a link
        fails rather than replace a file, so a file another writer made meanwhile (another env recording
        into the same folder) moves this one to the next index instead of being overwritten."""
        descriptor, partial = tempfile.mkstemp(suffix=".partial.mp4", prefix=".", dir=self.video_dir)
        os.close(descriptor)
        try:
            imageio.mimwrite(partial, self._frames, fps=self.fps, macro_block_size=16)
            while True:
                path = self.video_dir / f"{self.name_prefix}-{self._episode_index:05d}.mp4"
                try:
                    os.link(partial, path)
                    break
                except FileExistsError:
                    self._episode_index += 1
        finally:
            os.unlink(partial)
        self.written.append(path)
        self._frames = None

    def close(self):
        self._frames = None
        super().close()
