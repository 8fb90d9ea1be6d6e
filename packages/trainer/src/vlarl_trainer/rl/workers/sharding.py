"""FSDP2 for the actor: which submodules become shard units, and full state dicts in and out of them.

A shard unit all-gathers its parameters when its ``forward`` is entered, so only modules the policies
call as modules qualify: a transformer layer that a policy runs piece by piece (pi0's Gemma layers,
whose attention projections it calls one by one) cannot be a unit, its MLP can. Everything outside
the units belongs to the root, which the ``ActionEvaluationModule`` around the policy makes.

The state dict helpers work on sharded and whole modules alike, so a checkpoint does not depend on
how many ranks wrote it or whether they sharded: model state is the policy's own state dict, the
optimizer state is keyed by parameter name (torch.distributed.checkpoint's full form).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

UNIT_CLASSES = {
    "transformers.models.gemma.modeling_gemma.GemmaMLP",
    "transformers.models.siglip.modeling_siglip.SiglipEncoderLayer",
    "transformers.models.llama.modeling_llama.LlamaDecoderLayer",
    "timm.models.vision_transformer.Block",
}
"""Qualified names of the blocks that become their own shard unit: the layers (or, for pi0's
piecewise Gemma layers, the MLPs) of every language model and vision tower the policies use."""

GATHERED_ON_RANK_ZERO = StateDictOptions(full_state_dict=True, cpu_offload=True)
"""Whole tensors, gathered tensor by tensor to rank 0's CPU memory (the other ranks get nothing)."""

WHOLE = StateDictOptions(full_state_dict=True)
"""Loading: every rank passes the whole state and keeps its own shard of it."""

WHOLE_OPTIMIZER = StateDictOptions(full_state_dict=True, strict=False)
"""Loading an optimizer state, which has no entry for a parameter that never had a gradient (AdamW
skips those)."""


def qualified_name(module: nn.Module) -> str:
    return f"{type(module).__module__}.{type(module).__qualname__}"


def token_embeddings(policy: nn.Module) -> list[nn.Module]:
    """The language models' token embedding tables (transformers names them ``embed_tokens``) whose
    weight no other module uses: a tied output head must share its unit."""
    uses = Counter(id(parameter) for _, parameter in policy.named_parameters(remove_duplicate=False))
    return [module for name, module in policy.named_modules()
            if name.endswith("embed_tokens") and isinstance(module, nn.Embedding) and uses[id(module.weight)] == 1]


def shard_units(policy: nn.Module) -> list[nn.Module]:
    """The submodules to shard on their own, in module order: the blocks of ``UNIT_CLASSES`` and the
    token embedding tables (a language model's vocabulary is its largest single tensor)."""
    units = {id(module) for module in token_embeddings(policy)}
    units |= {id(module) for module in policy.modules() if qualified_name(module) in UNIT_CLASSES}
    return [module for module in policy.modules() if id(module) in units]


def mixed_precision(precision: str) -> MixedPrecisionPolicy:
    """``bf16-mixed`` all-gathers and computes with bf16 copies of the fp32 shards and reduces gradients
    in fp32; the other precisions compute in the parameters' own dtype. Inputs are never cast: a
    policy's stored samples must keep their precision for its log-probs, and autocast casts what the
    layers compute with."""
    if precision == "bf16-mixed":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, cast_forward_inputs=False)
    return MixedPrecisionPolicy(cast_forward_inputs=False)


def shard(root: nn.Module, policy: nn.Module, device: torch.device, precision: str, offload: bool) -> nn.Module:
    """``fully_shard`` every unit of ``policy`` (children before parents, as FSDP2 requires), then ``root``
    over all ranks of the default process group. With ``offload`` the shards, their gradients and the
    optimizer step stay in CPU memory (FSDP2's CPUOffloadPolicy): a unit's parameters visit the device
    only while it computes."""
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    options = {"mesh": mesh, "mp_policy": mixed_precision(precision)}
    if offload:
        options["offload_policy"] = CPUOffloadPolicy(pin_memory=device.type == "cuda")
    for unit in reversed(shard_units(policy)):
        fully_shard(unit, **options)
    return fully_shard(root, **options)


def full_model_state(policy: nn.Module, sharded: bool) -> dict[str, torch.Tensor]:
    """The policy's state dict with whole tensors. Sharded: gathered to the CPU in a collective every
    rank must enter, whose result only rank 0 receives (the others get an empty dict). Unsharded: the
    policy's own tensors, detached, where they are."""
    if sharded:
        return get_model_state_dict(policy, options=GATHERED_ON_RANK_ZERO)
    return {name: tensor.detach() for name, tensor in policy.state_dict().items()}


def load_full_model_state(policy: nn.Module, state: dict[str, torch.Tensor], sharded: bool) -> None:
    """Load a whole state dict (any dtype: values are copied into the parameters' own) on every rank."""
    if sharded:
        set_model_state_dict(policy, state, options=WHOLE)
    else:
        policy.load_state_dict(state)


def full_optimizer_state(policy: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer state keyed by parameter name, whole tensors on rank 0's CPU (empty elsewhere). A
    collective in a process group: every rank must enter it."""
    return get_optimizer_state_dict(policy, optimizer, options=GATHERED_ON_RANK_ZERO)


def load_full_optimizer_state(policy: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any],
                              sharded: bool) -> None:
    """Load what ``full_optimizer_state`` gave, on every rank; a state saved by vlarl-trainer 0.17 or
    earlier (``optimizer.state_dict()``, parameters numbered instead of named) loads into an unsharded
    optimizer."""
    if not numbers_parameters(state):
        saved = set(state["state"])
        set_optimizer_state_dict(policy, optimizer, state, options=WHOLE_OPTIMIZER)
        forget_unsaved_moments(policy, optimizer, saved)
    elif sharded:
        raise ValueError("this checkpoint's optimizer state was written by vlarl-trainer 0.17 or earlier, "
                         "which FSDP cannot load: resume it with actor.strategy=ddp")
    else:
        optimizer.load_state_dict(state)


def numbers_parameters(state: dict[str, Any]) -> bool:
    """Whether an optimizer state dict is torch's own form, whose groups list parameter numbers."""
    return any(isinstance(entry, int) for group in state["param_groups"] for entry in group["params"])


def forget_unsaved_moments(policy: nn.Module, optimizer: torch.optim.Optimizer, saved: set[str]) -> None:
    """Drop the AdamW state of parameters the checkpoint has none for: loading initializes every
    parameter's, but one that never had a gradient had none, and its first step must start from zero
    as it would have without the interruption."""
    for name, parameter in policy.named_parameters():
        if name not in saved:
            optimizer.state.pop(parameter, None)
