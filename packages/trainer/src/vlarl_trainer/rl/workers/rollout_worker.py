"""Rollout worker: an inference copy of the policy that acts for env shards and keeps what
``evaluate`` will need (forward inputs, log-probs, values) until the driver collects it.

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


class RolloutWorker(WorkerProcess):
    def __init__(self, policy_path: str, threads: int) -> None:
        self.enable_stack_dumps()
        self.policy = load_policy(policy_path, threads).eval()
        self.device = self.policy.device
        """Where the policy acts; ``offload`` parks it on the CPU in between."""
        self.version = -1
        self.generator = torch.Generator()
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

    def begin(self, seed: int, keep_outputs: bool = True) -> None:
        """Start a rollout: fresh buffers and a sampling generator seeded for reproducibility. Without
        ``keep_outputs`` (an evaluation) the policy's outputs are not kept: a CALVIN chain's hundreds of
        chunk steps would hold every step's images."""
        self.generator.manual_seed(seed)
        self.buffers = defaultdict(lambda: defaultdict(list))
        self.keep_outputs = keep_outputs

    @torch.no_grad()
    def act(self, key: Any, obs: dict[str, Any], deterministic: bool = False) -> np.ndarray:
        """Actions ``[n, C, A]`` for one shard; the outputs are kept under ``key``."""
        output = self.policy.act(obs, deterministic=deterministic, generator=self.generator)
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
        output = self.policy.act(obs, deterministic=True, generator=self.generator)
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
