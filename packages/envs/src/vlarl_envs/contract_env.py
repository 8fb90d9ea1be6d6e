"""``ContractEnv``: what every vlarl simulator env does the same way, so that a family writes only its simulator.

Each family's env (MetaWorld, ManiSkill, GSEnv, LIBERO, CALVIN) subclasses it. As ManiSkill's ``BaseEnv`` does for
its tasks, the base runs ``reset`` and ``step`` and calls the family's hooks at fixed points. The base owns what
docs/architecture.md fixes for every family: the checks of the shared arguments, the reset options and how they
choose an episode (a missing ``episode_id`` drawn from the seeded generator), the validation of actions, the info
keys, termination on success, truncation at the horizon, deferred images (``DefersImages``) and ``render``.

A family implements:

- ``_reset_to_episode(split, episode_id, task)``: put the simulator in the episode's initial state (loading what
  the episode needs, a task's or a scene's simulator, on first use);
- ``_step_simulator(action)``: advance it by one validated action; the reward and the step's info, whose
  ``success`` the base terminates on;
- ``_observe()``: ``states``, ``task_description`` and ``privileged_state`` of the current state;
- ``_render_images()``: the current state's ``main_images`` (and ``wrist_images`` where ``renders_wrist``);

and sets ``tasks`` and ``splits`` before calling ``ContractEnv.__init__``, which checks ``split`` against them. It
may override ``check_split``, ``_draw_episode_id``, ``_terminated``, ``_render_main_image`` and
``_reset_from_options`` (CALVIN's chains take reset options of their own).
"""

from __future__ import annotations

import abc
from collections.abc import Collection
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from vlarl_envs.contract import (
    check_obs_mode,
    image_shape,
    observation_space,
    validate_action,
    validate_choice,
    validate_options,
)


class ContractEnv(gym.Env, abc.ABC):
    """A simulator env under the vlarl contract; subclasses implement the hooks of the module docstring."""

    metadata = {"render_modes": ["rgb_array"]}
    tasks: Collection[str] = ()
    """The tasks ``options["task"]`` may name (a single-task family's one)."""
    splits: tuple[str, ...] = ()
    """The splits ``split`` and ``options["split"]`` may name, training's first."""
    extra_reset_options: tuple[str, ...] = ()
    """Reset options the family takes beyond the contract's (``_reset_from_options`` reads them)."""

    def __init__(
        self,
        env_id: str,
        *,
        image_size: int | tuple[int, int],
        horizon: int,
        obs_mode: str = "rgb",
        terminate_on_success: bool = True,
        split: str = "train",
        render_mode: str | None = None,
        wrist_camera: bool = True,
    ) -> None:
        """
        Args:
            env_id: the registered id, named in every error.
            image_size: camera resolution, int or (H, W); each family has its default.
            horizon: steps before truncation; each family has its default.
            obs_mode: "rgb" (images + state) or "state".
            terminate_on_success: end the episode on the first success step.
            split: default split for resets without ``options["split"]``.
            render_mode: None or "rgb_array" (``render()`` returns the main camera image).
            wrist_camera: render ``wrist_images`` where the family has a hand camera; False leaves them out of
                observations and space, so a policy that reads ``main_images`` alone costs no hand-camera frame.
        """
        if not self.tasks:
            raise ValueError(f"{env_id}: expected at least one task, got none")
        check_obs_mode(obs_mode)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"{env_id}: render_mode must be None or 'rgb_array', got {render_mode!r}")
        if horizon <= 0:
            raise ValueError(f"{env_id}: horizon must be positive, got {horizon}")
        self.env_id = env_id
        self.obs_mode = obs_mode
        self.image_size = image_shape(image_size)[:2]
        self.horizon = int(horizon)
        self.terminate_on_success = terminate_on_success
        self.render_mode = render_mode
        self.wrist_camera = bool(wrist_camera)
        self.split = self.check_split(split)
        self.defer_images = False
        """While true, ``reset`` and ``step`` leave the images out; ``complete_observation`` adds them
        (see ``vlarl_envs.wrappers.DefersImages``)."""
        self._elapsed = 0
        self._budget = self.horizon
        """Steps the current goal gets before truncation: ``horizon``, unless a reset sets another (CALVIN's
        chains give each of their tasks ``steps_per_task``)."""
        self._started = False
        self._last_image: np.ndarray | None = None

    def _declare_spaces(self, action_dim: int, state_low: np.ndarray, state_high: np.ndarray,
                        privileged_state: int | spaces.Box, hand_camera: bool = False) -> None:
        """The contract's spaces: normalized ``action_dim`` actions, ``states`` within the bounds,
        ``privileged_state`` (a Box, or its dimension for an unbounded one) and ``wrist_images`` where the
        family has a ``hand_camera`` and ``wrist_camera`` asks for it (``renders_wrist``)."""
        self.renders_wrist = hand_camera and self.wrist_camera
        if isinstance(privileged_state, int):
            privileged_state = spaces.Box(-np.inf, np.inf, (privileged_state,), np.float32)
        self.observation_space = observation_space(self.obs_mode, self.image_size, state_low, state_high,
                                                   wrist_camera=self.renders_wrist,
                                                   extra={"privileged_state": privileged_state})
        self.action_space = spaces.Box(-1.0, 1.0, (action_dim,), np.float32)

    def check_split(self, split: str) -> str:
        """``split``, or a ValueError naming the splits."""
        return validate_choice(self.env_id, "split", split, self.splits)

    def _renders(self) -> bool:
        """Whether the env ever makes images: rgb observations or ``render()``."""
        return self.obs_mode == "rgb" or self.render_mode == "rgb_array"

    def _images_due(self) -> bool:
        """Whether the observation being made needs its images now (rgb and not deferred), so a simulator that
        renders while it steps (ManiSkill's cameras) can skip that render otherwise."""
        return self.obs_mode == "rgb" and not self.defer_images

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = validate_options(self.env_id, options, extra=self.extra_reset_options)
        self._budget = self.horizon
        info = {"success": False, **self._reset_from_options(options)}
        info["is_success"] = info["success"]
        self._elapsed = 0
        self._started = True
        return self._observation(), info

    def _reset_from_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """Reset to the episode the contract's options choose; the reset's info beyond ``is_success``."""
        split = self.check_split(options.get("split", self.split))
        task = validate_choice(self.env_id, "task", options["task"], self.tasks) if "task" in options else None
        episode_id = options.get("episode_id")
        if episode_id is None:
            episode_id = self._draw_episode_id(split)
        return {"episode_id": int(episode_id), "split": split, **self._reset_to_episode(split, int(episode_id), task)}

    def _draw_episode_id(self, split: str) -> int:
        """The episode of a reset without ``episode_id``, drawn from the generator ``reset(seed=...)`` seeds."""
        return int(self.np_random.integers(2**31))

    @abc.abstractmethod
    def _reset_to_episode(self, split: str, episode_id: int, task: str | None) -> dict[str, Any]:
        """Put the simulator in the initial state of ``(split, episode_id)``, of ``task`` where given, else of the
        task the episode draws. Returns the reset's info: ``task`` and the family's own keys, and ``success``
        where the initial state can already satisfy the goal (False if left out)."""

    def step(self, action):
        if not self._started:
            raise RuntimeError(f"{self.env_id}: call reset() before step()")
        action = validate_action(self.env_id, action, self.action_space)
        self._elapsed += 1
        reward, info = self._step_simulator(action)
        info["is_success"] = info["success"]
        terminated = self._terminated(info)
        truncated = not terminated and self._elapsed >= self._budget
        return self._observation(), reward, terminated, truncated, info

    @abc.abstractmethod
    def _step_simulator(self, action: np.ndarray) -> tuple[float, dict[str, Any]]:
        """Advance the simulator by one action (float32 in [-1, 1]); its reward and the step's info, with
        ``success`` (bool) and the family's own keys. ``self._elapsed`` counts this step already."""

    def _terminated(self, info: dict[str, Any]) -> bool:
        """Whether the step that produced ``info`` ends the episode: its success, unless ``terminate_on_success``
        is off."""
        return info["success"] and self.terminate_on_success

    def _observation(self) -> dict[str, Any]:
        self._last_image = None
        observation = self._images() if self._images_due() else {}
        observation.update(self._observe())
        return observation

    @abc.abstractmethod
    def _observe(self) -> dict[str, Any]:
        """``states``, ``task_description`` and ``privileged_state`` of the current state."""

    @abc.abstractmethod
    def _render_images(self) -> dict[str, np.ndarray]:
        """The current state's ``main_images``, and ``wrist_images`` where the robot has a hand camera."""

    def _images(self) -> dict[str, np.ndarray]:
        images = self._render_images()
        self._last_image = images["main_images"]
        return images

    def complete_observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        """``DefersImages``: ``observation`` with the images of the current state, as a step without deferral
        returns it."""
        if self.obs_mode != "rgb" or "main_images" in observation:
            return observation
        return {**self._images(), **observation}

    def render(self):
        if self.render_mode != "rgb_array" or not self._started:
            return None
        if self._last_image is None:
            self._last_image = self._render_main_image()
        return self._last_image

    def _render_main_image(self) -> np.ndarray:
        """The main camera's image of the current state, for ``render()`` where the observation has none."""
        return self._render_images()["main_images"]

    def close(self):
        self._started = False
        super().close()
