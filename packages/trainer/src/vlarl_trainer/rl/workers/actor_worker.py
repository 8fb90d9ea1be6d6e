"""Actor worker: trains the policy on rollouts, one rank of a torch.distributed group.

Every micro-batch loss is the masked mean of its entries scaled by its share of the global
batch's loss weight (times the world size, which DDP's gradient average divides out), so R
ranks make the same update as one rank with the same global batch.
"""

from __future__ import annotations

import math
import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

import vlarl_algos
from vlarl_trainer.config import ActorConfig, AlgorithmConfig
from vlarl_trainer.rl.workers.policy_loading import load_policy
from vlarl_trainer.rl.workers.process import WorkerProcess


class EvaluateModule(nn.Module):
    """Routes ``forward`` to ``policy.evaluate`` so DDP/FSDP hooks run around it."""

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, forward_inputs: dict[str, torch.Tensor], compute_entropy: bool, compute_values: bool):
        output = self.policy.evaluate(forward_inputs, compute_entropy=compute_entropy, compute_values=compute_values)
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


class ActorWorker(WorkerProcess):
    def __init__(
        self,
        rank: int,
        world_size: int,
        master_addr: str,
        master_port: int,
        policy_path: str,
        actor: ActorConfig,
        algorithm: AlgorithmConfig,
        total_optimizer_steps: int,
        threads: int,
    ) -> None:
        self.enable_stack_dumps()
        self.rank, self.world_size = rank, world_size
        self.actor, self.algorithm = actor, algorithm
        self.policy = load_policy(policy_path, threads).train()
        self.device = self.policy.device
        if world_size > 1:
            os.environ.update(MASTER_ADDR=master_addr, MASTER_PORT=str(master_port))
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=timedelta(minutes=10))
        self.module = self._distribute(EvaluateModule(self.policy))
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
            self.optimizer, lr_lambda(actor.lr_schedule, actor.warmup_steps, total_optimizer_steps)
        )

    def _distribute(self, module: nn.Module) -> nn.Module:
        if self.world_size == 1:
            return module
        if self.actor.strategy == "fsdp":
            from torch.distributed.fsdp import fully_shard

            return fully_shard(module)
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(module, device_ids=device_ids, find_unused_parameters=True)

    def weights(self) -> dict[str, torch.Tensor]:
        """The policy's state dict on CPU, for the rollout workers."""
        state = self.policy.state_dict()
        return {name: tensor.detach().to("cpu", copy=True) for name, tensor in state.items()}

    def train(self, batch: dict[str, Any], plan: list[list[list[torch.Tensor]]]) -> dict[str, float]:
        """Optimizer steps over ``plan``: per global batch, this rank's micro-batch index tensors.

        Args:
            batch: flat samples: ``forward_inputs`` {k: [N, ...]}, ``old_logprobs`` [N, C, A],
                ``advantages`` [N], ``returns`` [N], ``old_values`` [N] or None, ``weights`` [N].
            plan: ``plan[g][r]`` is the list of micro-batch indices of rank r in global batch g.
        """
        self._onload()
        totals: dict[str, float] = {}
        count = 0
        for global_batch in plan:
            global_weight = float(sum(batch["weights"][idx].sum() for rank in global_batch for idx in rank))
            micro_batches = global_batch[self.rank]
            for position, indices in enumerate(micro_batches):
                last = position == len(micro_batches) - 1
                sync = last or not isinstance(self.module, nn.parallel.DistributedDataParallel)
                context = torch.enable_grad() if sync else self.module.no_sync()
                with context:
                    loss, metrics = self._micro_batch_loss(batch, indices, global_weight)
                    loss.backward()
                for name, value in metrics.items():
                    totals[name] = totals.get(name, 0.0) + value
                count += 1
            grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.actor.clip_grad)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.scheduler.step()
            totals["grad_norm"] = totals.get("grad_norm", 0.0) + float(grad_norm) * len(micro_batches)
        self._offload()
        metrics = {name: value / max(count, 1) for name, value in totals.items()}
        metrics["lr"] = self.optimizer.param_groups[0]["lr"]
        return metrics

    def _micro_batch_loss(self, batch: dict[str, Any], indices: torch.Tensor, global_weight: float):
        algorithm = self.algorithm
        device = self.device
        forward_inputs = {k: v[indices].to(device) for k, v in batch["forward_inputs"].items()}
        weights = batch["weights"][indices].to(device)
        use_values = batch["old_values"] is not None
        logprobs, entropy, values = self.module(
            forward_inputs, compute_entropy=algorithm.entropy_coef > 0, compute_values=use_values
        )
        actor_loss, metrics = vlarl_algos.ppo_actor_loss(
            logprobs,
            batch["old_logprobs"][indices].to(device),
            batch["advantages"][indices].to(device),
            loss_mask=weights,
            clip_low=algorithm.clip_low,
            clip_high=algorithm.clip_high,
            dual_clip=algorithm.dual_clip,
            logprob_level=algorithm.logprob_level,
        )
        loss = actor_loss
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
            metrics.update(critic_metrics)
        if entropy is not None and algorithm.entropy_coef > 0:
            bonus, entropy_metrics = vlarl_algos.entropy_loss(
                entropy, loss_mask=weights, entropy_level=algorithm.logprob_level
            )
            loss = loss + algorithm.entropy_coef * bonus
            metrics.update(entropy_metrics)
        metrics["loss"] = loss.detach()
        share = float(weights.sum()) / max(global_weight, 1e-12)
        scaled = loss * share * self.world_size
        return scaled, {name: float(value) for name, value in metrics.items()}

    def _onload(self) -> None:
        if self.actor.offload and self.device.type == "cpu" and torch.cuda.is_available():
            self._move(torch.device("cuda"))

    def _offload(self) -> None:
        if self.actor.offload and torch.cuda.is_available():
            self._move(torch.device("cpu"))

    def _move(self, device: torch.device) -> None:
        self.policy.to(device)
        for state in self.optimizer.state.values():
            for key, value in state.items():
                if isinstance(value, torch.Tensor):
                    state[key] = value.to(device)
        self.device = device

    def save(self, directory: str) -> None:
        """Rank 0 writes the policy (save_pretrained) and the optimizer and scheduler state."""
        if self.rank != 0:
            return
        self.policy.save_pretrained(os.path.join(directory, "policy"))
        torch.save(
            {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()},
            os.path.join(directory, "actor_state.pt"),
        )

    def load(self, directory: str) -> None:
        import vlarl_policies

        saved = vlarl_policies.from_pretrained(os.path.join(directory, "policy"))
        self.policy.load_state_dict(saved.state_dict())
        state = torch.load(os.path.join(directory, "actor_state.pt"), map_location=self.device, weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])

    def close(self) -> None:
        if self.world_size > 1 and dist.is_initialized():
            dist.destroy_process_group()
