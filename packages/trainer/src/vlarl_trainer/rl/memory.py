"""What a run will hold in memory, estimated before Ray starts (``vlarl-train --dry-run``).

Parameters, gradients and optimizer state are counted exactly from the policy's parameter shapes,
the precision and FSDP's sharding. Activations are the tensors ``evaluate_actions`` keeps for the backward
pass on one micro-batch, counted by running ``evaluate_actions`` on fake tensors (shapes and dtypes, no
data) with the policy's ``example_forward_inputs`` (what ``act`` would store, without sampling), so the
published sizes cost no memory. Branches that depend on values take the costlier side: every check passes.
Gradients and optimizer state are counted for the parameters that graph reaches, found without a backward pass.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from vlarl_trainer.config import VlarlConfig
from vlarl_trainer.rl.validation import Layout

GIB = 2**30
ADAM_MOMENTS = 2
"""AdamW keeps two moments per parameter (``exp_avg``, ``exp_avg_sq``) in the parameter's dtype."""
ADAM_STEP_BYTES = 4
"""...and one float32 step count per parameter tensor."""


@dataclass(frozen=True)
class ActorRankMemory:
    """Bytes one actor rank holds while it updates, and between updates."""

    parameters: int
    gradients: int
    optimizer: int
    activations: int
    """Saved for backward by one micro-batch's ``evaluate_actions``."""
    gradient_buckets: int
    """DDP's reducer: a flat copy of every trainable parameter's gradient, all-reduced bucket by bucket."""
    gathered: int
    """FSDP: whole parameters while they compute, the root's throughout and two layers' at a time (the
    one computing and the one prefetched), in the compute dtype."""
    offloaded: bool
    states_on_host: bool
    """FSDP with offload keeps the shards, their gradients and the optimizer state in CPU memory."""

    @property
    def states(self) -> int:
        return self.parameters + self.gradients + self.optimizer

    @property
    def peak(self) -> int:
        on_device = 0 if self.states_on_host else self.states
        return on_device + self.activations + self.gradient_buckets + self.gathered

    @property
    def between_updates(self) -> int:
        """Offload moves parameters and optimizer state to CPU once the update ends."""
        return 0 if self.offloaded else self.parameters + self.optimizer


def state_bytes(tensors: list[torch.Tensor], ranks: int, sharded: bool) -> int:
    """Bytes of one rank's copy of ``tensors``, each in its own dtype: whole, or FSDP2's dim-0 shard
    (padded to ``ceil(rows / ranks)`` rows, the size of rank 0's shard)."""
    total = 0
    for tensor in tensors:
        shape = tensor.shape
        numel = math.prod(shape)
        if sharded and ranks > 1 and len(shape) > 0:
            numel = math.ceil(shape[0] / ranks) * math.prod(shape[1:])
        total += numel * tensor.element_size()
    return total


def actor_rank_memory(policy: torch.nn.Module, config: VlarlConfig, ranks: int, activations: int,
                      updated: list[torch.Tensor]) -> ActorRankMemory:
    """The exact parameter, gradient and optimizer bytes of one rank of ``ranks``, for a policy built in
    the dtype the actor trains it in.

    ``updated`` are the parameters the loss reaches: only they get gradients and AdamW state, both in
    the parameter's dtype. ``actor.strategy``: ``fsdp`` shards all three, ``ddp`` over several ranks
    adds its gradient buckets.
    """
    sharded = config.actor.strategy == "fsdp"
    trainable = [p for p in policy.parameters() if p.requires_grad]
    return ActorRankMemory(
        parameters=state_bytes(list(policy.parameters()), ranks, sharded),
        gradients=state_bytes(updated, ranks, sharded),
        optimizer=ADAM_MOMENTS * state_bytes(updated, ranks, sharded) + ADAM_STEP_BYTES * len(updated),
        activations=activations,
        gradient_buckets=state_bytes(trainable, 1, False) if ranks > 1 and not sharded else 0,
        gathered=gathered_bytes(policy, config.actor.precision) if sharded else 0,
        offloaded=config.actor.offload,
        states_on_host=sharded and config.actor.offload,
    )


def gathered_bytes(policy: torch.nn.Module, precision: str) -> int:
    """What FSDP2 holds whole while computing: the root unit's parameters (those outside every layer unit
    of ``sharding.shard_units``) and the two largest layer units, in the dtype the layers compute in."""
    from vlarl_trainer.rl.workers.sharding import shard_units

    units = shard_units(policy)
    in_units = {id(parameter) for unit in units for parameter in unit.parameters()}
    root = sum(parameter.numel() for parameter in policy.parameters() if id(parameter) not in in_units)
    sizes = sorted((sum(parameter.numel() for parameter in unit.parameters()) for unit in units), reverse=True)
    element = 2 if precision in ("bf16-mixed", "bf16-pure") else 4
    return element * (root + sum(sizes[:2]))


class AssumeChecksPass(TorchDispatchMode):
    """Answers every read of a fake tensor's value: true for a condition, zero for a number. Fake tensors
    have no values, and initializers and policies read a few computed from weights (finite checks)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        tensor = args[0] if args else None
        if func is torch.ops.aten._local_scalar_dense.default and isinstance(tensor, FakeTensor):
            if tensor.dtype == torch.bool:
                return True
            return 0.0 if tensor.is_floating_point() else 0
        return func(*args, **(kwargs or {}))


@contextmanager
def fake_mode() -> Iterator[None]:
    """Tensors made inside have shapes and dtypes but no storage; reads of their values are answered."""
    with FakeTensorMode(allow_non_fake_inputs=True), AssumeChecksPass():
        yield


def with_fake_parameters(policy: torch.nn.Module) -> torch.nn.Module:
    """``policy`` (built on the meta device) with fake CPU tensors for its parameters and buffers, tied
    parameters kept tied. An op on them gives fake tensors too, outside any mode, while the policy's input
    processing, which reads values (camera masks, token counts), runs on real tensors."""
    replaced: dict[int, torch.Tensor] = {}

    def fake(tensor: torch.Tensor) -> torch.Tensor:
        if id(tensor) not in replaced:
            empty = torch.empty(tensor.shape, dtype=tensor.dtype)
            replaced[id(tensor)] = (torch.nn.Parameter(empty, requires_grad=tensor.requires_grad)
                                    if isinstance(tensor, torch.nn.Parameter) else empty)
        return replaced[id(tensor)]

    with fake_mode():
        for module in policy.modules():
            for slots in (module._parameters, module._buffers):
                for name, tensor in slots.items():
                    if tensor is not None:
                        slots[name] = fake(tensor)
    return policy


def observation_batch(observation_space: Any, batch: int, instruction: str) -> dict[str, Any]:
    """A batch of zero observations with the env's keys, shapes and dtypes."""
    from gymnasium import spaces

    obs: dict[str, Any] = {}
    for key, space in observation_space.spaces.items():
        if isinstance(space, spaces.Text):
            obs[key] = (instruction,) * batch
        else:
            obs[key] = np.zeros((batch, *space.shape), dtype=space.dtype)
    return obs


def saved_activation_bytes(policy: torch.nn.Module, forward_inputs: dict[str, torch.Tensor], precision: str,
                           compute_entropy: bool, compute_values: bool) -> tuple[int, list[torch.Tensor]]:
    """Bytes of the tensors autograd keeps from ``evaluate_actions`` for the backward pass (each storage counted
    once, the parameters, which autograd keeps too, left out), and the parameters a backward pass from
    its outputs reaches."""
    parameter_storages = {p.untyped_storage()._cdata for p in policy.parameters()}
    kept: dict[int, int] = {}

    def keep(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage._cdata not in parameter_storages:
            kept[storage._cdata] = storage.nbytes()
        return tensor

    autocast = torch.autocast(policy.device.type, dtype=torch.bfloat16, enabled=precision == "bf16-mixed")
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor), autocast:
        output = policy.evaluate_actions(forward_inputs, compute_entropy=compute_entropy, compute_values=compute_values)
    outputs = [tensor for tensor in (output.logprobs, output.entropy, output.values) if tensor is not None]
    return sum(kept.values()), parameters_reached(outputs, policy)


def parameters_reached(outputs: list[torch.Tensor], policy: torch.nn.Module) -> list[torch.Tensor]:
    """The trainable parameters of ``policy`` that a backward pass from ``outputs`` gives a gradient: the
    leaves of the outputs' autograd graph, found by walking the graph rather than running the backward,
    which through fake tensors takes longer than the forward (its recomputed checkpointed layers too)."""
    leaves: set[int] = set()
    seen: set[Any] = set()
    pending = [tensor.grad_fn for tensor in outputs if tensor.grad_fn is not None]
    while pending:
        node = pending.pop()
        if node in seen:
            continue
        seen.add(node)
        leaf = getattr(node, "variable", None)  # an AccumulateGrad node's: the leaf its gradient goes to
        if leaf is not None:
            leaves.add(id(leaf))
        pending.extend(successor for successor, _ in node.next_functions if successor is not None)
    return [parameter for parameter in policy.parameters() if parameter.requires_grad and id(parameter) in leaves]


def policy_for_estimate(config: VlarlConfig, layout: Layout, instructions: list[str]) -> torch.nn.Module:
    """The run's policy on fake tensors, in the dtype the actor trains it in: the saved policy's config
    and tokenizer, or a new one of the preset. It is built on the meta device first: some initializers
    (peft's LoRA layers) move parameters, which fake parameters do not allow."""
    import vlarl_policies
    from vlarl_policies.base import read_config

    dtype = {"dtype": "bfloat16" if config.actor.precision == "bf16-pure" else "float32"}
    if config.policy.pretrained is None:
        return with_fake_parameters(vlarl_policies.make(
            config.policy.name, preset=config.policy.preset, tokenizer_corpus=instructions, device="meta",
            **{"action_dim": layout.action_dim, "state_dim": layout.state_dim,
               "action_chunk": config.env.action_chunk, **config.policy.kwargs, **dtype}))
    directory = Path(config.policy.pretrained)
    saved = read_config(directory)
    cls = vlarl_policies.policy_class(saved.get("type", config.policy.name))
    tokenizer = vlarl_policies.PromptTokenizer.load(directory)
    with torch.device("meta"):
        policy = cls(cls.config_class.from_dict({**saved, **dtype}), tokenizer)
    return with_fake_parameters(policy)


def estimate_actor_memory(config: VlarlConfig, layout: Layout, observation_space: Any,
                          instructions: list[str]) -> tuple[ActorRankMemory, int]:
    """One actor rank's memory during and between updates, and the parameters of the policy."""
    policy = policy_for_estimate(config, layout, instructions).train()
    if config.actor.gradient_checkpointing:
        policy.set_gradient_checkpointing(True)
    with AssumeChecksPass():
        obs = observation_batch(observation_space, config.actor.micro_batch_size, instructions[0])
        forward_inputs = policy.example_forward_inputs(obs)
        activations, updated = saved_activation_bytes(
            policy, forward_inputs, config.actor.precision,
            compute_entropy=config.algorithm.entropy_coef > 0, compute_values=policy.value_head is not None)
    memory = actor_rank_memory(policy, config, layout.actor_workers, activations, updated)
    return memory, sum(p.numel() for p in policy.parameters())


def estimate_config_memory(config: VlarlConfig) -> tuple[Layout, ActorRankMemory, int]:
    """What ``vlarl-train --dry-run`` reports for ``config``: it is validated (a published-size policy
    needs no checkpoint; the validation's env probe gives the observation space, ``layout.observation_space``),
    then one actor rank's memory is estimated. Returns the layout, the memory and the policy's parameter
    count. The evaluation env is validated as the trainer validates it, so a dry run refuses what a run would."""
    from vlarl_trainer.rl.runner import env_instructions
    from vlarl_trainer.rl.validation import validate_run

    layout, _ = validate_run(config, estimate_only=True)
    memory, parameters = estimate_actor_memory(config, layout, layout.observation_space, env_instructions(config))
    return layout, memory, parameters


def format_gib(size: int) -> str:
    return f"{size / GIB:.2f} GiB" if size >= GIB else f"{size / 2**20:.1f} MiB"


def layout_table(layout: Layout) -> str:
    """Which processes each device hosts: ``device 0: env 0, rollout 0, actor 0-1``."""
    hosted: dict[int, dict[str, list[int]]] = {}
    for component, processes in layout.placement.items():
        for rank, devices in enumerate(processes):
            for device in devices:
                hosted.setdefault(device, {}).setdefault(component, []).append(rank)
    lines = []
    for device in sorted(hosted):
        parts = [f"{component} {ranks_text(ranks)}" for component, ranks in hosted[device].items()]
        lines.append(f"  device {device}: " + ", ".join(parts))
    return "\n".join(lines)


def ranks_text(ranks: list[int]) -> str:
    return str(ranks[0]) if len(ranks) == 1 else f"{ranks[0]}-{ranks[-1]}" if ranks == list(
        range(ranks[0], ranks[-1] + 1)) else ",".join(map(str, ranks))


def memory_table(config: VlarlConfig, memory: ActorRankMemory, parameter_count: int, ranks: int) -> str:
    actor = config.actor
    host = " (CPU, offload)" if memory.states_on_host else ""
    rows = [
        ("parameters" + host, memory.parameters),
        ("gradients" + host, memory.gradients),
        ("optimizer (AdamW)" + host, memory.optimizer),
        *([("DDP gradient buckets", memory.gradient_buckets)] if memory.gradient_buckets else []),
        *([("FSDP whole parameters computing", memory.gathered)] if memory.gathered else []),
        (f"activations (micro-batch {actor.micro_batch_size})", memory.activations),
        ("peak during an update", memory.peak),
        ("held between updates" + (" (offload)" if memory.offloaded else ""), memory.between_updates),
    ]
    width = max(len(name) for name, _ in rows)
    header = (f"per actor rank ({parameter_count / 1e6:.1f} M parameters, {ranks} rank(s), "
              f"strategy {actor.strategy}, precision {actor.precision}"
              f"{', gradient checkpointing' if actor.gradient_checkpointing else ''}):")
    return "\n".join([header, *(f"  {name:<{width}}  {format_gib(size):>12}" for name, size in rows)])
