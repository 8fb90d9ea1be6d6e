"""Rollout worker: an inference copy of the policy that acts for env shards and keeps what
``evaluate_actions`` will need (forward inputs, log-probs, values) until the driver collects it.

With ``rollout.offload`` the driver parks the policy on the CPU while the actor updates (``offload``)
and brings it back before the next weight load or rollout (``onload``), so an actor sharing the GPU
has that memory for its update; RLinf's rollout ``enable_offload``."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import torch

from vlarl_trainer.rl.workers.policy_loading import load_policy
from vlarl_trainer.rl.workers.process import WorkerProcess

SAMPLING_MODES = {
    "sample": {"deterministic": False},
    "deterministic": {"deterministic": True},
    "zero_start": {"deterministic": True, "zero_start": True},
}
"""How the policy picks its actions, as ``act``'s keywords: ``sample`` explores as the training rollouts do
(flow-SDE or flow-noise at the run's noise level, OpenVLA's temperature); ``deterministic`` is RLinf's
evaluation (the most likely tokens; pi0's plain ODE from random start noise); ``zero_start`` is pi0's ODE
from zero start noise (the same chunk every time; token policies: as ``deterministic``)."""


class RolloutWorker(WorkerProcess):
    def __init__(self, policy_path: str, threads: int) -> None:
        self.prepare_process()
        self.policy = load_policy(policy_path, threads).eval()
        self.device = self.policy.device
        """Where the policy acts; ``offload`` parks it on the CPU in between."""
        self.version = -1
        self.generator = torch.Generator()
        self.episode_generators: dict[Any, list[torch.Generator]] = {}
        self.buffers: dict[Any, dict[str, list]] = {}
        self.keep_outputs = True

    def offload(self) -> None:
        """Move the policy to the CPU and hand the GPU memory it held back to the device: the caching
        allocator would otherwise keep it for this process, out of the actor's reach. On a machine
        without CUDA the policy lives on the CPU already, and this does nothing."""
        if self.device.type == "cpu":
            return
        self.policy.to("cpu")
        torch.cuda.empty_cache()

    def onload(self) -> None:
        """Move the policy back to its device after ``offload``; nothing to do on a machine without CUDA."""
        if self.device.type == "cpu":
            return
        self.policy.to(self.device)

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> int:
        """Take the actor's weights (a broadcast object shared by every rollout worker); ``version`` is
        the training step they are for, which also sets the policy's sampling schedule."""
        self.policy.load_state_dict(state_dict)
        self.policy.set_global_step(version)
        self.version = version
        return version

    def begin(self, seed: int, keep_outputs: bool = True,
              episode_seeds: dict[Any, list[int]] | None = None) -> None:
        """Start a rollout: fresh buffers and a sampling generator seeded for reproducibility. Without
        ``keep_outputs`` (an evaluation) the policy's outputs are not kept: a CALVIN chain's hundreds of
        chunk steps would hold every step's images. ``episode_seeds`` {shard key: one seed per env} gives
        every env of those shards a generator of its own, so what an episode draws depends on its seed
        alone, not on the envs it shares a batch with (an evaluation's episodes)."""
        self.generator.manual_seed(seed)
        self.episode_generators = {key: [torch.Generator().manual_seed(s) for s in seeds]
                                   for key, seeds in (episode_seeds or {}).items()}
        self.buffers = defaultdict(lambda: defaultdict(list))
        self.keep_outputs = keep_outputs

    def _generators(self, key: Any) -> torch.Generator | list[torch.Generator]:
        """What shard ``key`` draws from: its envs' own generators, or the rollout's shared one."""
        return self.episode_generators.get(key, self.generator)

    @torch.no_grad()
    def act(self, key: Any, obs: dict[str, Any], sampling: str = "sample") -> np.ndarray:
        """Actions ``[n, C, A]`` for one shard under a ``SAMPLING_MODES`` mode; the outputs are kept under
        ``key``."""
        output = self.policy.act(obs, generator=self._generators(key), **SAMPLING_MODES[sampling])
        if not self.keep_outputs:
            return output.actions.numpy()
        buffer = self.buffers[key]
        buffer["forward_inputs"].append(output.forward_inputs)
        buffer["logprobs"].append(output.logprobs)
        if output.values is not None:
            buffer["values"].append(output.values)
        return output.actions.numpy()

    @torch.no_grad()
    def bootstrap(self, key: Any, obs: dict[str, Any]) -> None:
        """The value of the observation after the last step (GAE's ``values[T]``)."""
        if self.policy.value_head is None or not self.keep_outputs:
            return
        output = self.policy.act(obs, deterministic=True, generator=self._generators(key))
        self.buffers[key]["values"].append(output.values)

    def trajectory(self, key: Any) -> dict[str, Any]:
        """Time-stacked outputs of shard ``key``: forward inputs ``{k: [T, n, ...]}``, log-probs
        ``[T, n, C, A]`` and values ``[T + 1, n]`` (None without a value head)."""
        buffer = self.buffers.pop(key)
        steps = buffer["forward_inputs"]
        return {
            "forward_inputs": {name: torch.stack([s[name] for s in steps]) for name in steps[0]},
            "logprobs": torch.stack(buffer["logprobs"]),
            "values": torch.stack(buffer["values"]) if buffer.get("values") else None,
        }
