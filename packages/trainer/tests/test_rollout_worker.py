"""The rollout worker outside Ray: weight syncs carry the training step into the policy's sampling, and
``offload`` / ``onload`` park the policy on the CPU during the actor's update without changing it (the
driver's side: ``runner.rollout_offloaded``)."""

import types

import numpy as np
import pytest
import torch

import vlarl_policies
from vlarl_trainer.rl.runner import Trainer, rollout_offloaded
from vlarl_trainer.rl.workers.rollout_worker import RolloutWorker


def observations(batch: int = 3) -> dict:
    rng = np.random.default_rng(0)
    return {"main_images": rng.integers(0, 256, (batch, 64, 64, 3), dtype=np.uint8),
            "states": rng.uniform(-1, 1, (batch, 4)).astype(np.float32),
            "task_description": ("reach the goal",) * batch}


def tiny_worker(tmp_path, **config) -> RolloutWorker:
    """A rollout worker holding a saved tiny pi0 (on the GPU when there is one, as a run places it)."""
    torch.manual_seed(0)
    policy = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4, **config)
    return RolloutWorker(str(policy.save_pretrained(tmp_path / "policy")), threads=1)


def sampled_actions(worker: RolloutWorker, seed: int) -> np.ndarray:
    worker.begin(seed=seed)
    return worker.act("shard", observations())


def test_synced_weights_set_the_step_that_anneals_the_noise(tmp_path):
    torch.manual_seed(0)
    policy = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4, noise_method="flow_sde",
                                 noise_anneal=True, noise_params=(1.0, 0.4, 6))
    path = policy.save_pretrained(tmp_path / "policy")
    worker = RolloutWorker(str(path), threads=1)
    levels = []
    for step in (0, 3, 9):
        worker.begin(seed=step)
        worker.load_weights(policy.state_dict(), version=step)
        worker.act("shard", observations())
        levels.append(worker.trajectory("shard")["forward_inputs"]["noise_levels"])
    for stored, expected in zip(levels, (1.0, 0.7, 0.4), strict=True):
        torch.testing.assert_close(stored, torch.full((1, 3), expected))


def test_offload_then_onload_acts_as_before(tmp_path):
    worker = tiny_worker(tmp_path)
    device = worker.policy.device
    state = {name: tensor.clone() for name, tensor in worker.policy.state_dict().items()}
    before = sampled_actions(worker, seed=5)
    worker.offload()
    worker.onload()
    assert worker.policy.device == device
    assert worker.policy.state_dict().keys() == state.keys()
    for name, tensor in worker.policy.state_dict().items():
        assert torch.equal(tensor, state[name]), name
    np.testing.assert_allclose(sampled_actions(worker, seed=5), before, atol=1e-6, rtol=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="offload moves the policy when there is a GPU")
def test_offload_does_nothing_without_cuda(tmp_path):
    worker = tiny_worker(tmp_path)
    storages = [parameter.data_ptr() for parameter in worker.policy.parameters()]
    before = sampled_actions(worker, seed=5)
    worker.offload()
    assert [parameter.data_ptr() for parameter in worker.policy.parameters()] == storages
    np.testing.assert_array_equal(sampled_actions(worker, seed=5), before)
    worker.onload()
    assert [parameter.data_ptr() for parameter in worker.policy.parameters()] == storages


@pytest.mark.gpu
def test_offload_moves_the_policy_to_the_cpu_and_frees_its_gpu_memory(tmp_path):
    worker = tiny_worker(tmp_path)
    before = sampled_actions(worker, seed=5)
    parameter_bytes = sum(p.numel() * p.element_size() for p in worker.policy.parameters())
    allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    worker.offload()
    tensors = [*worker.policy.parameters(), *worker.policy.buffers()]
    assert all(tensor.device.type == "cpu" for tensor in tensors)
    assert allocated - torch.cuda.memory_allocated() >= parameter_bytes
    assert torch.cuda.memory_reserved() < reserved
    worker.onload()
    tensors = [*worker.policy.parameters(), *worker.policy.buffers()]
    assert all(tensor.device.type == "cuda" for tensor in tensors)
    assert torch.cuda.memory_allocated() >= parameter_bytes
    np.testing.assert_allclose(sampled_actions(worker, seed=5), before, atol=1e-6, rtol=0)


class RecordingGroup:
    """Stands in for the rollout WorkerGroup: records the methods called on every worker."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def call(self, method: str) -> list[str]:
        self.calls.append(method)
        return [method]

    def get(self, refs: list[str]) -> list[None]:
        return [None] * len(refs)


@pytest.mark.parametrize(("offload", "expected"), [(True, ["offload", "update", "onload"]), (False, ["update"])])
def test_the_driver_offloads_the_rollout_workers_around_the_update_only_when_asked(offload, expected):
    group = RecordingGroup()
    with rollout_offloaded(group, offload):
        group.calls.append("update")
    assert group.calls == expected


class FetchingGroup:
    """Stands in for a WorkerGroup: records what the driver fetches and what it sends to which method."""

    def __init__(self, workers=()) -> None:
        self.workers = list(workers)
        self.fetched: list = []
        self.sent: list = []

    def call(self, method: str, *args) -> list[str]:
        self.sent.append((method, *args))
        return [f"{method} answer"]

    def get(self, refs: list) -> list:
        self.fetched.extend(refs)
        return refs


@pytest.mark.parametrize(("strategy", "ranks_called"), [("fsdp", 2), ("ddp", 1)])
def test_weights_go_from_actor_rank_zero_to_the_rollout_workers_without_the_driver(strategy, ranks_called):
    called = []

    def rank(answer: str):
        return types.SimpleNamespace(weights=types.SimpleNamespace(remote=lambda: called.append(answer) or answer))

    actor, rollout = FetchingGroup([rank("rank 0 weights"), rank("rank 1 empty")]), FetchingGroup()
    trainer = types.SimpleNamespace(synced_step=None, actor=actor, rollout=rollout,
                                    config=types.SimpleNamespace(actor=types.SimpleNamespace(strategy=strategy)))
    trainer._actor_weight_refs = types.MethodType(Trainer._actor_weight_refs, trainer)
    Trainer._sync_weights(trainer, 3)
    assert called == ["rank 0 weights", "rank 1 empty"][:ranks_called]
    assert rollout.sent == [("load_weights", "rank 0 weights", 3)]
    # the driver waits for the rollout workers' loads and the other ranks' empty answers, never rank 0's
    assert actor.fetched == ["rank 1 empty"][:ranks_called - 1] and rollout.fetched == ["load_weights answer"]
    assert trainer.synced_step == 3
