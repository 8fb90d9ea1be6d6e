"""Actor worker: trains the policy on rollouts, one rank of a torch.distributed group.

Every micro-batch loss is the masked mean of its entries scaled by its share of the global
batch's loss weight (times the world size, which DDP's and FSDP's gradient average divides out), so
R ranks make the same update as one rank with the same global batch, whichever ``actor.strategy``.

``actor.precision`` sets the dtype of the parameters, gradients and AdamW state (``PARAMETER_DTYPES``)
and whether the forward runs under bf16 autocast. What leaves the actor (the rollout workers' weights,
a checkpoint's policy) is cast back to the dtypes the policy was loaded in, so a bfloat16 policy stays
one; a checkpoint's ``actor_state.pt`` keeps the entries that cast rounds (``master_weights``), so a
resume continues from the exact weights.

The ranks meet at a rendezvous, a torch ``init_method``. On a cluster Ray decides where each rank runs, so
the driver builds the ranks without one, asks rank 0 for ``rendezvous_point`` (``tcp://`` its node's
address as Ray knows it and a free port there) and then calls ``join`` on every rank with it: ranks on
several nodes meet as ranks on one. Under an embedded Ray every rank runs on this machine, and they meet
at ``local_rendezvous()``: a file in a directory of this user alone, with gloo's and NCCL's sockets on the
loopback interface, so no port of the run listens beyond this machine.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
from datetime import timedelta
from typing import Any

import ray
import torch
import torch.distributed as dist
from torch import nn

import vlarl_algos
from vlarl_trainer.config import ActorConfig, AlgorithmConfig
from vlarl_trainer.rl.cluster import free_port
from vlarl_trainer.rl.workers import sharding
from vlarl_trainer.rl.workers.policy_loading import load_policy, worker_device
from vlarl_trainer.rl.workers.process import WorkerProcess, loopback_interface

POLICY_LOSS_METRICS = {"policy_loss", "approx_kl", "clip_fraction", "clipped_ratio", "ratio_mean", "ratio_min",
                       "ratio_max", "dual_clip_fraction", "entropy", "entropy_loss"}
"""The metrics of the policy loss: a micro-batch without policy weight (only groups without signal) measures
none of them, and its zeros would dilute the others' means."""

UPDATE_METRICS = {"grad_norm", "lr", "early_stopped", "update_fraction"}
"""The metrics ``ActorWorker.update`` adds to its losses' own: the optimizer's and the ``target_kl`` brake's."""


def train_metric_name(name: str) -> str:
    """``approx_kl`` -> ``train/actor/approx_kl``; ``value_loss`` -> ``train/critic/value_loss``; the whole
    loss the optimizer minimizes (policy, value and entropy terms) -> ``train/loss``."""
    if name == "loss":
        return "train/loss"
    return f"train/actor/{name}" if name in POLICY_LOSS_METRICS | UPDATE_METRICS else f"train/critic/{name}"


PARAMETER_DTYPES = {"fp32": torch.float32, "bf16-mixed": torch.float32, "bf16-pure": torch.bfloat16}
"""Per ``actor.precision``: the dtype of the trained parameters, and so of their gradients and AdamW moments."""


class ActionEvaluationModule(nn.Module):
    """Routes ``forward`` to ``policy.evaluate_actions`` so DDP/FSDP hooks run around it."""

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, forward_inputs: dict[str, torch.Tensor], compute_entropy: bool, compute_values: bool):
        output = self.policy.evaluate_actions(forward_inputs, compute_entropy=compute_entropy,
                                              compute_values=compute_values)
        return output.logprobs, output.entropy, output.values


def lr_lambda(schedule: str, warmup_steps: int, total_steps: int):
    """LR multiplier per optimizer step: linear warm-up, then constant, linear or cosine decay."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        if schedule == "linear":
            return 1.0 - progress
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * progress))
        return 1.0

    return factor


def cast_parameters(module: nn.Module, dtype: torch.dtype) -> None:
    """Every floating-point parameter in ``dtype`` (buffers such as normalization statistics keep theirs)."""
    for parameter in module.parameters():
        if parameter.is_floating_point():
            parameter.data = parameter.data.to(dtype)


class ActorWorker(WorkerProcess):
    """One actor rank. Built with ``rendezvous`` None it waits for ``join`` (the trainer's two phases); built
    with one it joins at once, as a rank outside Ray does."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        rendezvous: str | None,
        policy_path: str,
        actor: ActorConfig,
        algorithm: AlgorithmConfig,
        total_optimizer_steps: int,
        threads: int,
    ) -> None:
        self.prepare_process()
        self.rank, self.world_size = rank, world_size
        self.actor, self.algorithm = actor, algorithm
        self.sharded = actor.strategy == "fsdp"
        """Whether FSDP2 wraps the policy: it shards parameters, gradients and optimizer state over the
        ranks and, with ``actor.offload``, keeps them in CPU memory, one rank included (a published-size
        policy then trains on one GPU that could not hold its fp32 weights and AdamW state)."""
        # FSDP2 widens and shards the policy on the CPU and moves each shard unit's part to the device as it
        # shards it, so the device never holds the whole policy in fp32.
        self.policy = load_policy(policy_path, threads, on_device=not self.sharded).train()
        if actor.gradient_checkpointing:
            self.policy.set_gradient_checkpointing(True)
        self.saved_dtypes = {name: tensor.dtype for name, tensor in self.policy.state_dict().items()}
        """The dtype of every state dict entry as the policy was saved: what leaves the actor is cast back."""
        cast_parameters(self.policy, PARAMETER_DTYPES[actor.precision])
        self.device = worker_device()
        self.total_optimizer_steps = total_optimizer_steps
        if rendezvous is not None:
            self.join(rendezvous)

    def rendezvous_point(self) -> str:
        """Where ranks on several nodes can meet when this is rank 0: ``tcp://`` this node's address as Ray
        knows it (the one the other nodes reach it at) and a port free on it."""
        return f"tcp://{ray.util.get_node_ip_address()}:{free_port()}"

    def join(self, rendezvous: str) -> None:
        """Join the ranks' process group at ``rendezvous`` (``rendezvous_point`` or ``local_rendezvous``; when
        there are several ranks), then wrap the policy for them and build the optimizer. Every rank is
        called at once: the rendezvous waits for all of them."""
        actor = self.actor
        if self.world_size > 1 or self.sharded:
            if rendezvous.startswith("file://"):  # every rank on this machine: their sockets on its loopback
                loopback = loopback_interface()
                os.environ.setdefault("GLOO_SOCKET_IFNAME", loopback)
                os.environ.setdefault("NCCL_SOCKET_IFNAME", loopback)
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            self.collective_device = torch.device("cuda") if backend == "nccl" else torch.device("cpu")
            dist.init_process_group(backend, init_method=rendezvous, rank=self.rank, world_size=self.world_size,
                                    timeout=timedelta(minutes=10),
                                    device_id=self.device if backend == "nccl" else None)
        self.module = self._distribute(ActionEvaluationModule(self.policy))
        groups = self.policy.parameter_groups()
        self.optimizer = torch.optim.AdamW(
            [
                {"params": groups["policy"], "lr": actor.lr},
                {"params": groups["value_head"], "lr": actor.value_lr},
            ],
            betas=tuple(actor.betas),
            eps=actor.adam_eps,
            weight_decay=actor.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_lambda(actor.lr_schedule, actor.warmup_steps, self.total_optimizer_steps)
        )

    def _distribute(self, module: nn.Module) -> nn.Module:
        if self.sharded:
            return sharding.shard(module, self.policy, self.device, self.actor.precision, self.actor.offload)
        if self.world_size == 1:
            return module
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(module, device_ids=device_ids, find_unused_parameters=True)

    def weights(self) -> dict[str, torch.Tensor]:
        """The policy's state dict on CPU in the dtypes it was saved with, for the rollout workers.

        With ``actor.strategy=fsdp`` the gather is collective: every rank must be called, rank 0 returns
        the weights and the others an empty dict. Otherwise every rank returns its own whole copy.
        """
        return self._as_saved(sharding.full_model_state(self.policy, self.sharded))

    def _as_saved(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """CPU copies of ``state``'s tensors in the dtypes the policy was loaded in."""
        return {name: tensor.to("cpu", self.saved_dtypes[name], copy=True) for name, tensor in state.items()}

    def _master_weights(self, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The entries of ``state`` that the cast to the saved dtypes rounds (a bfloat16 policy trained
        with fp32 parameters), on the CPU."""
        return {name: tensor.cpu() for name, tensor in state.items()
                if tensor.dtype.itemsize > self.saved_dtypes[name].itemsize}

    def train(self, batch: dict[str, Any], plan: list[list[list[torch.Tensor]]]) -> dict[str, float]:
        """Optimizer steps over ``plan``: per global batch, this rank's micro-batch index tensors.

        A global batch without policy weight (every one of its samples from a group without signal)
        steps the value head alone: the policy's parameters get no gradient, so AdamW leaves them as they
        are, weight decay included. With ``algorithm.target_kl``, the first global batch whose approximate
        KL from the rollout policy (measured before its step, over every rank) passes it is not applied,
        nor is any later one; the LR schedule still advances past them, so it follows the training steps.

        Args:
            batch: flat samples: ``forward_inputs`` {k: [N, ...]}, ``old_logprobs`` [N, C, A],
                ``advantages`` [N], ``returns`` [N], ``old_values`` [N] or None, ``weights`` [N] (the
                critic's) and ``policy_weights`` [N] (the policy loss's).
            plan: ``plan[g][r]`` is the list of micro-batch indices of rank r in global batch g.

        Returns:
            Per metric, its mean over the micro-batches that measured it, and ``early_stopped`` (1 when
            ``target_kl`` stopped the update, else 0) and ``update_fraction`` (the share of the planned
            optimizer steps taken).
        """
        self._onload()
        totals: dict[str, float] = {}
        counts: dict[str, int] = {}
        steps_taken, early_stopped = 0, False
        for global_batch in plan:
            critic_weight, policy_weight = (
                float(sum(batch[name][idx].sum() for rank in global_batch for idx in rank))
                for name in ("weights", "policy_weights")
            )
            micro_batches = self._micro_batches(global_batch)
            kl_and_weight = torch.zeros(2, dtype=torch.float64)
            for position, (indices, counted) in enumerate(micro_batches):
                with self._gradient_sync(position == len(micro_batches) - 1):
                    loss, metrics = self._micro_batch_loss(batch, indices, critic_weight, policy_weight)
                    (loss if counted else loss * 0.0).backward()
                if counted:
                    own_policy_weight = float(batch["policy_weights"][indices].sum())
                    if own_policy_weight > 0:
                        kl_and_weight += torch.tensor([metrics["approx_kl"] * own_policy_weight, own_policy_weight],
                                                      dtype=torch.float64)
                    for name, value in metrics.items():
                        if own_policy_weight > 0 or name not in POLICY_LOSS_METRICS:
                            totals[name] = totals.get(name, 0.0) + value
                            counts[name] = counts.get(name, 0) + 1
            if self._passes_target_kl(kl_and_weight):
                early_stopped = True
                self.optimizer.zero_grad(set_to_none=True)
                break
            if policy_weight == 0:
                for parameter in self.optimizer.param_groups[0]["params"]:
                    parameter.grad = None
            grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.actor.clip_grad)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.scheduler.step()
            steps_taken += 1
            totals["grad_norm"] = totals.get("grad_norm", 0.0) + float(grad_norm)
            counts["grad_norm"] = counts.get("grad_norm", 0) + 1
        for _ in range(len(plan) - steps_taken):
            self.scheduler.step()
        self._offload()
        metrics = {name: value / counts[name] for name, value in totals.items()}
        metrics["lr"] = self.optimizer.param_groups[0]["lr"]
        metrics["early_stopped"] = float(early_stopped)
        metrics["update_fraction"] = steps_taken / max(len(plan), 1)
        return metrics

    def _passes_target_kl(self, kl_and_weight: torch.Tensor) -> bool:
        """Whether the global batch's approximate KL, the policy-weighted mean over every rank's micro-batches
        (``kl_and_weight``: this rank's weighted sum and weight), is past ``algorithm.target_kl``. Every rank
        reaches the same answer, so every rank stops at the same global batch."""
        target = self.algorithm.target_kl
        if target is None:
            return False
        if self.world_size > 1:
            summed = kl_and_weight.to(self.collective_device)
            dist.all_reduce(summed)
            kl_and_weight = summed.cpu()
        kl_sum, weight = kl_and_weight.tolist()
        return weight > 0 and kl_sum / weight > target

    def _micro_batch_loss(self, batch: dict[str, Any], indices: torch.Tensor, critic_weight: float,
                          policy_weight: float):
        """The micro-batch's loss scaled by its shares of the global batch's weights: the policy terms
        (surrogate and entropy bonus) by its share of ``policy_weight``, the value term by its share of
        ``critic_weight``."""
        algorithm = self.algorithm
        device = self.device
        forward_inputs = {k: v[indices].to(device) for k, v in batch["forward_inputs"].items()}
        weights = batch["weights"][indices].to(device)
        policy_weights = batch["policy_weights"][indices].to(device)
        use_values = batch["old_values"] is not None
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.actor.precision != "fp32"):
            outputs = self.module(forward_inputs, compute_entropy=algorithm.entropy_coef > 0, compute_values=use_values)
        # The losses compare with fp32 targets (old log-probs, returns): bf16 outputs are widened first.
        logprobs, entropy, values = (None if output is None else output.float() for output in outputs)
        policy_loss, metrics = vlarl_algos.ppo_actor_loss(
            logprobs,
            batch["old_logprobs"][indices].to(device),
            batch["advantages"][indices].to(device),
            loss_mask=policy_weights,
            clip_low=algorithm.clip_low,
            clip_high=algorithm.clip_high,
            dual_clip=algorithm.dual_clip,
            logprob_level=algorithm.logprob_level,
        )
        if entropy is not None and algorithm.entropy_coef > 0:
            bonus, entropy_metrics = vlarl_algos.entropy_loss(
                entropy, loss_mask=policy_weights, entropy_level=algorithm.logprob_level
            )
            policy_loss = policy_loss + algorithm.entropy_coef * bonus
            metrics.update(entropy_metrics)
        policy_share = float(policy_weights.sum()) / policy_weight if policy_weight > 0 else 0.0
        loss, scaled = policy_loss, policy_loss * policy_share
        if use_values:
            returns = batch["returns"][indices].to(device)
            critic_loss, critic_metrics = vlarl_algos.value_loss(
                values,
                batch["old_values"][indices].to(device),
                returns,
                loss_mask=weights,
                clip_range=algorithm.value_clip,
                loss_type=algorithm.value_loss,
                huber_delta=algorithm.huber_delta,
            )
            loss = loss + algorithm.value_coef * critic_loss
            critic_share = float(weights.sum()) / max(critic_weight, 1e-12)
            scaled = scaled + algorithm.value_coef * critic_loss * critic_share
            metrics.update(critic_metrics)
        metrics["loss"] = loss.detach()
        return scaled * self.world_size, {name: float(value) for name, value in metrics.items()}

    def _micro_batches(self, global_batch: list[list[torch.Tensor]]) -> list[tuple[torch.Tensor, bool]]:
        """This rank's ``(indices, counted)`` micro-batches of one global batch.

        FSDP's all-gathers are collectives, so every rank must run as many forward and backward
        passes; a rank with fewer micro-batches than another repeats its last one with a loss of zero
        weight (``counted`` False) until the counts match.
        """
        own = [(indices, True) for indices in global_batch[self.rank]]
        if not self.sharded:
            return own
        missing = max(len(micro_batches) for micro_batches in global_batch) - len(own)
        return own + [(own[-1][0], False)] * missing

    def _gradient_sync(self, enabled: bool):
        """Whether the coming backward pass reduces the gradients across ranks: only the last
        micro-batch's does, the others accumulate locally (DDP's no_sync, FSDP2's requires_gradient_sync)."""
        if isinstance(self.module, nn.parallel.DistributedDataParallel) and not enabled:
            return self.module.no_sync()
        if self.sharded:
            self.module.set_requires_gradient_sync(enabled)
        return contextlib.nullcontext()

    def _onload(self) -> None:
        if self._moves_between_phases() and self.device.type == "cpu":
            self._move(torch.device("cuda"))

    def _offload(self) -> None:
        if self._moves_between_phases():
            self._move(torch.device("cpu"))

    def _moves_between_phases(self) -> bool:
        """``actor.offload`` on a GPU moves a whole policy and its optimizer state to the CPU between
        updates; FSDP's shards live on the CPU throughout instead (``sharding.shard``)."""
        return self.actor.offload and not self.sharded and torch.cuda.is_available()

    def _move(self, device: torch.device) -> None:
        self.policy.to(device)
        for state in self.optimizer.state.values():
            for key, value in state.items():
                if isinstance(value, torch.Tensor):
                    state[key] = value.to(device)
        self.device = device

    def save(self, directory: str) -> None:
        """Rank 0 writes ``policy/`` (save_pretrained, in the policy's own dtypes) and ``actor_state.pt``:
        the optimizer state keyed by parameter name, the scheduler state and the ``master_weights``.
        Every rank must be called: under FSDP the gathers are collective."""
        state = sharding.full_model_state(self.policy, self.sharded)
        optimizer = sharding.full_optimizer_state(self.policy, self.optimizer)
        if self.rank != 0:
            return
        policy_holding(self.policy, self._as_saved(state)).save_pretrained(os.path.join(directory, "policy"))
        torch.save(
            {"optimizer": optimizer, "scheduler": self.scheduler.state_dict(),
             "master_weights": self._master_weights(state)},
            os.path.join(directory, "actor_state.pt"),
        )

    def load(self, directory: str) -> None:
        """Every rank restores what ``save`` wrote (whichever strategy and rank count wrote it)."""
        import vlarl_policies

        saved = vlarl_policies.from_pretrained(os.path.join(directory, "policy")).state_dict()
        state = load_actor_state(os.path.join(directory, "actor_state.pt"))
        sharding.load_full_model_state(self.policy, {**saved, **state.get("master_weights", {})}, self.sharded)
        sharding.load_full_optimizer_state(self.policy, self.optimizer, state["optimizer"], self.sharded)
        self.scheduler.load_state_dict(state["scheduler"])

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def load_actor_state(path: str) -> dict:
    """``actor_state.pt`` as ``ActorWorker.save`` writes it: tensors, numbers, strings and containers only.

    Loaded with ``weights_only=True``, so a file holding any other pickled object (which could run code
    as it loads) is refused with an error naming the file rather than unpickled.
    """
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise ValueError(
            f"{path}: expected an actor state of tensors, numbers, strings and containers, as vlarl saves it; "
            f"the file holds other pickled objects and is not loaded ({str(error).splitlines()[0]})"
        ) from error


def policy_holding(policy: nn.Module, state: dict[str, torch.Tensor]) -> nn.Module:
    """A policy of ``policy``'s class, config and tokenizer whose weights are the tensors of ``state``
    (not copies): built on the meta device, so saving a sharded or recast policy allocates no second
    set of weights."""
    with torch.device("meta"):
        holder = type(policy)(policy.config, policy.tokenizer)
    holder.load_state_dict(state, assign=True)
    return holder
