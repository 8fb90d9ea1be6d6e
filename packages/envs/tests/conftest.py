"""A tiny deterministic env under the vlarl contract, for testing wrappers without a simulator.

It walks a counter: success holds from step ``success_from`` on; the simulator's reward is
the step index.
"""

import gymnasium as gym
import numpy as np
import pytest

from vlarl_envs.contract import observation_space, validate_action


class CounterEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, success_from=3, horizon=6, terminate_on_success=False, image_size=16, replan_at=()):
        """``replan_at``: steps that end the current goal (``info["replan"]``) and start a new one, which
        succeeds ``success_from`` steps later."""
        self.success_from = success_from
        self.replan_at = frozenset(replan_at)
        self.goal_start = 0
        self.horizon = horizon
        self.terminate_on_success = terminate_on_success
        self.observation_space = observation_space("rgb", image_size, np.zeros(1), np.full(1, 100.0))
        self.action_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self.steps = 0
        self.received = []

    def _obs(self):
        image = np.full(self.observation_space["main_images"].shape, self.steps * 10, np.uint8)
        return {"main_images": image, "states": np.array([self.steps], np.float32), "task_description": "count up"}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = self.goal_start = 0
        return self._obs(), {"success": False}

    def step(self, action):
        self.received.append(validate_action("toy", action, self.action_space))
        self.steps += 1
        success = self.steps - self.goal_start >= self.success_from
        terminated = success and self.terminate_on_success
        truncated = self.steps >= self.horizon and not terminated
        info = {"success": success}
        if self.steps in self.replan_at:
            info["replan"] = True
            self.goal_start = self.steps
        return self._obs(), float(self.steps), terminated, truncated, info


@pytest.fixture
def counter_env():
    """The CounterEnv class, to build with per-test arguments."""
    return CounterEnv
