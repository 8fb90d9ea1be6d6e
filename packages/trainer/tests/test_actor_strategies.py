"""The actor worker's strategies and precisions, without Ray or a simulator.

Two actor ranks are two processes running this file (``python test_actor_strategies.py <job> <rank>``)
over gloo; one rank runs in the test process. Every run trains a tiny policy on a batch made by the
policy's own ``act`` with the same minibatch plan, so FSDP2 over two ranks, DDP over two ranks and one
rank must make the same update.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor

import vlarl_policies
from vlarl_trainer.config import ActorConfig, AlgorithmConfig, load_config
from vlarl_trainer.rl.batch import minibatch_plan
from vlarl_trainer.rl.memory import state_bytes
from vlarl_trainer.rl.validation import check_training
from vlarl_trainer.rl.workers import sharding
from vlarl_trainer.rl.workers.actor_worker import ActorWorker
from vlarl_trainer.rl.workers.process import local_rendezvous

pytestmark = pytest.mark.slow

SAMPLES = 10
ACTOR = {"global_batch_size": 5, "micro_batch_size": 2, "lr": 1e-3, "value_lr": 1e-3, "adam_eps": 1e-3}
"""Two global batches of five samples a plan: over two ranks, rank 0 runs two micro-batches and rank 1
one, which FSDP has to even out. Some parameters have a zero true gradient; Adam would turn their
rounding noise into full steps of random sign, so a large eps keeps that noise inert."""
CLOSE = {"rtol": 1e-4, "atol": 1e-6}
"""Two ranks sum gradients in another order than one rank: equal up to float32 rounding."""
RANK_TIMEOUT = 300


def make_worker(rank: int, world_size: int, rendezvous: str, policy_path: str, **settings) -> ActorWorker:
    """An actor rank with ``ACTOR``'s sizes and the ``ActorConfig`` ``settings`` (strategy, precision, ...)."""
    actor = ActorConfig(**ACTOR, **settings)
    return ActorWorker(rank, world_size, rendezvous, policy_path, actor, AlgorithmConfig(),
                       total_optimizer_steps=10, threads=1)


def observations(batch: int) -> dict:
    rng = np.random.default_rng(0)
    return {"main_images": rng.integers(0, 256, (batch, 64, 64, 3), dtype=np.uint8),
            "states": rng.uniform(-1, 1, (batch, 4)).astype(np.float32),
            "task_description": tuple(rng.choice(["reach the goal", "push the puck"], batch))}


def synthetic_batch(policy) -> dict:
    """A PPO batch as ``build_batch`` makes it, from the policy's own samples, with random advantages
    and returns and old log-probs a little off, so that every loss term has a gradient."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        output = policy.act(observations(SAMPLES), generator=generator)
    noise = lambda *shape: torch.randn(*shape, generator=generator)  # noqa: E731
    weights = torch.tensor([1.0, 0.5] * (SAMPLES // 2))
    return {"forward_inputs": output.forward_inputs,
            "old_logprobs": output.logprobs + 0.05 * noise(*output.logprobs.shape),
            "advantages": noise(SAMPLES), "returns": output.values + noise(SAMPLES), "old_values": output.values,
            "weights": weights, "policy_weights": weights}


def plans(world_size: int) -> dict[str, list]:
    """``first``: two optimizer steps; ``second``: one more, on another shuffle."""
    plan = lambda seed, epochs: minibatch_plan(SAMPLES, ACTOR["global_batch_size"],  # noqa: E731
                                               ACTOR["micro_batch_size"], world_size, epochs, seed)
    return {"first": plan(0, 1), "second": plan(1, 1)[:1]}


def saved_policy(directory: Path, name: str, **config) -> str:
    torch.manual_seed(0)
    policy = vlarl_policies.make(name, preset="tiny", action_dim=4, state_dim=4, **config)
    return str(policy.save_pretrained(directory))


def training_state(worker: ActorWorker) -> dict[str, torch.Tensor]:
    """A copy of the whole policy state in the dtypes the worker trains in (rank 0's; empty elsewhere)."""
    return {name: tensor.clone() for name, tensor in sharding.full_model_state(worker.policy, worker.sharded).items()}


def outcome(worker: ActorWorker, metrics: dict) -> dict:
    """What a run's checks read: rank 0's whole training state, the weights every rank handed out,
    and the dtypes the parameters and AdamW moments are kept in."""
    moments = [value for state in worker.optimizer.state.values() for key, value in state.items() if key != "step"]
    return {"metrics": metrics, "weights": worker.weights(),
            "state": training_state(worker),
            "parameter_dtypes": {parameter.dtype for parameter in worker.policy.parameters()},
            "moment_dtypes": {moment.dtype for moment in moments},
            "fsdp_units": sum(isinstance(module, FSDPModule) for module in worker.module.modules()),
            "parameter_bytes": sum(local(p).numel() * p.element_size() for p in worker.policy.parameters())}


def local(parameter: torch.Tensor) -> torch.Tensor:
    """This rank's part of a parameter: its FSDP shard, or the whole tensor."""
    return parameter.to_local() if isinstance(parameter, DTensor) else parameter


# ----------------------------------------------------------------- the two-rank processes


def run_rank(job_path: str, rank: int) -> None:
    """One rank of each of the job's runs, one after another; every rank saves its outcomes."""
    job = torch.load(job_path, weights_only=False)
    out = Path(job["out"])
    rendezvous = iter(job["rendezvous"])
    results = {}
    for name, settings in job["runs"]:
        worker = make_worker(rank, 2, next(rendezvous), job["policy"], **settings)
        results[name] = outcome(worker, worker.train(job["batch"], job["plans"]["first"]))
        results["listening"] = results.get("listening", []) + listening_addresses()
        if name == "fsdp":
            results["resume"] = save_and_resume(worker, rank, job, out / "checkpoint", next(rendezvous))
        worker.close()
    torch.save(results, out / f"rank{rank}.pt")


def listening_addresses() -> list[str]:
    """The addresses this process listens on (the ranks' collectives)."""
    return [connection.laddr.ip for connection in psutil.Process().net_connections("inet")
            if connection.status == psutil.CONN_LISTEN]


def save_and_resume(worker: ActorWorker, rank: int, job: dict, checkpoint: Path, rendezvous: str) -> dict:
    """Save after the first plan, train the second; then a fresh pair loads the checkpoint and trains the
    second plan too."""
    checkpoint.mkdir(exist_ok=True)
    worker.save(str(checkpoint))
    worker.train(job["batch"], job["plans"]["second"])
    uninterrupted = training_state(worker)
    moments, parameters = len(worker.optimizer.state), len(list(worker.policy.parameters()))
    worker.close()
    fresh = make_worker(rank, 2, rendezvous, job["policy"], strategy="fsdp")
    fresh.load(str(checkpoint))
    fresh.train(job["batch"], job["plans"]["second"])
    return {"uninterrupted": uninterrupted, "resumed": training_state(fresh),
            "moments": (moments, len(fresh.optimizer.state), parameters)}


def two_ranks(tmp_path: Path, policy_path: str, runs: list[tuple[str, dict]]) -> list[dict]:
    """Both ranks' outcomes of ``runs`` (name, actor settings), in two processes of this file."""
    policy = vlarl_policies.from_pretrained(policy_path)
    job = {"policy": policy_path, "runs": runs, "batch": synthetic_batch(policy), "plans": plans(2),
           "rendezvous": [local_rendezvous() for _ in range(len(runs) + 1)], "out": str(tmp_path)}
    torch.save(job, tmp_path / "job.pt")
    processes = [subprocess.Popen([sys.executable, __file__, str(tmp_path / "job.pt"), str(rank)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in (0, 1)]
    try:
        for rank, process in enumerate(processes):
            output, _ = process.communicate(timeout=RANK_TIMEOUT)
            assert process.returncode == 0, f"rank {rank} failed:\n{output[-4000:]}"
    finally:
        for process in processes:
            process.kill()
    return [torch.load(tmp_path / f"rank{rank}.pt", weights_only=False) for rank in (0, 1)]


def one_rank(policy_path: str, precision: str = "fp32", **settings) -> tuple[ActorWorker, dict]:
    worker = make_worker(0, 1, local_rendezvous(), policy_path, precision=precision, **settings)
    batch = synthetic_batch(vlarl_policies.from_pretrained(policy_path))
    return worker, outcome(worker, worker.train(batch, plans(1)["first"]))


@pytest.fixture(scope="module")
def pi0(tmp_path_factory):
    """pi0 tiny: one rank, and two ranks with FSDP (then saved and resumed), DDP and FSDP in bf16-mixed."""
    root = tmp_path_factory.mktemp("pi0")
    path = saved_policy(root / "policy", "pi0")
    ranks = two_ranks(root, path, [("fsdp", {"strategy": "fsdp"}), ("ddp", {"strategy": "ddp"}),
                                   ("fsdp_bf16_mixed", {"strategy": "fsdp", "precision": "bf16-mixed"}),
                                   ("fsdp_offload", {"strategy": "fsdp", "offload": True})])
    return {"path": path, "one": one_rank(path)[1], "ranks": ranks, "checkpoint": root / "checkpoint"}


@pytest.fixture(scope="module")
def openvla_oft(tmp_path_factory):
    root = tmp_path_factory.mktemp("openvla_oft")
    path = saved_policy(root / "policy", "openvla_oft")
    ranks = two_ranks(root, path, [("fsdp", {"strategy": "fsdp"}), ("ddp", {"strategy": "ddp"})])
    return {"path": path, "one": one_rank(path)[1], "ranks": ranks}


def moved(state: dict, initial: dict) -> int:
    return sum(not torch.equal(tensor, initial[name]) for name, tensor in state.items())


# ----------------------------------------------------------------- strategies


@pytest.mark.parametrize("policy_name", ["pi0", "openvla_oft"])
def test_fsdp_and_ddp_over_two_ranks_make_the_update_of_one_rank(policy_name, request):
    runs = request.getfixturevalue(policy_name)
    one = runs["one"]
    policy = vlarl_policies.from_pretrained(runs["path"])
    initial = policy.state_dict()
    assert moved(one["state"], initial) > len(initial) // 2, "the update changed too few parameters to compare"
    layers = len(sharding.shard_units(policy))
    assert layers >= 4 and runs["ranks"][0]["fsdp"]["fsdp_units"] == layers + 1, "each layer and the root"
    for strategy in [run for run in ("fsdp", "ddp", "fsdp_offload") if run in runs["ranks"][0]]:
        two = runs["ranks"][0][strategy]
        assert two["state"].keys() == one["state"].keys()
        for name, tensor in one["state"].items():
            torch.testing.assert_close(two["state"][name], tensor, **CLOSE, msg=f"{strategy}: {name}")
        # clip_grad_norm_ over FSDP's sharded gradients: the norm of the whole gradient, as on one rank
        assert two["metrics"]["grad_norm"] == pytest.approx(one["metrics"]["grad_norm"], rel=1e-4)
    for rank in runs["ranks"]:  # ranks of one machine meet in a file and connect over its loopback only
        assert rank["listening"] and set(rank["listening"]) <= {"127.0.0.1", "::1"}, rank["listening"]


def test_fsdp_on_one_rank_with_offload_makes_the_update_of_one_rank(pi0):
    """One GPU's way to a policy whose fp32 weights and AdamW state exceed its memory: FSDP2 over a
    one-rank group keeps them in CPU memory and brings each layer over while it computes."""
    worker, run = one_rank(pi0["path"], strategy="fsdp", offload=True)
    worker.close()
    assert run["fsdp_units"] == len(sharding.shard_units(vlarl_policies.from_pretrained(pi0["path"]))) + 1
    for name, tensor in pi0["one"]["state"].items():
        torch.testing.assert_close(run["state"][name], tensor, **CLOSE, msg=name)
    assert run["weights"].keys() == pi0["one"]["weights"].keys()
    assert run["metrics"]["grad_norm"] == pytest.approx(pi0["one"]["metrics"]["grad_norm"], rel=1e-4)


def test_gradient_checkpointing_recomputes_the_layers_and_makes_the_same_update(pi0):
    worker = make_worker(0, 1, local_rendezvous(), pi0["path"], gradient_checkpointing=True)
    batch = synthetic_batch(vlarl_policies.from_pretrained(pi0["path"]))
    first_layer = worker.policy.vlm.language_model.layers[0].mlp
    calls = []
    first_layer.register_forward_pre_hook(lambda module, args: calls.append(torch.is_grad_enabled()))
    checkpointed = outcome(worker, worker.train(batch, plans(1)["first"]))
    micro_batches = sum(len(rank) for global_batch in plans(1)["first"] for rank in global_batch)
    assert len(calls) == 2 * micro_batches, "each micro-batch runs the layer forward, then again in backward"
    for name, tensor in pi0["one"]["state"].items():
        torch.testing.assert_close(checkpointed["state"][name], tensor, **CLOSE, msg=name)


def test_the_dry_runs_shard_size_is_rank_zeros_parameter_bytes(pi0):
    policy = vlarl_policies.from_pretrained(pi0["path"])
    assert pi0["ranks"][0]["fsdp"]["parameter_bytes"] == state_bytes(list(policy.parameters()), 2, sharded=True)
    assert pi0["ranks"][0]["ddp"]["parameter_bytes"] == state_bytes(list(policy.parameters()), 2, sharded=False)


def test_fsdp_weights_are_the_whole_policy_on_rank_zero(pi0):
    """The rollout workers load rank 0's weights: plain tensors of full shape, as the one-rank policy's."""
    weights, expected = pi0["ranks"][0]["fsdp"]["weights"], pi0["one"]["weights"]
    assert weights.keys() == expected.keys()
    for name, tensor in weights.items():
        assert type(tensor) is torch.Tensor and tensor.device.type == "cpu", name
        assert (tensor.shape, tensor.dtype) == (expected[name].shape, expected[name].dtype), name
        torch.testing.assert_close(tensor, expected[name], **CLOSE, msg=name)
    assert pi0["ranks"][1]["fsdp"]["weights"] == {}
    vlarl_policies.from_pretrained(pi0["path"]).load_state_dict(weights)


def test_fsdp_checkpoint_resumes_exactly_and_is_a_pretrained_policy(pi0):
    resume = pi0["ranks"][0]["resume"]
    assert moved(resume["resumed"], pi0["ranks"][0]["fsdp"]["state"]) > 0
    for name, tensor in resume["uninterrupted"].items():
        torch.testing.assert_close(resume["resumed"][name], tensor, rtol=0, atol=0, msg=name)
    # a parameter without a gradient before the checkpoint has no AdamW state after it either
    uninterrupted_moments, resumed_moments, parameters = resume["moments"]
    assert resumed_moments == uninterrupted_moments < parameters
    saved = vlarl_policies.from_pretrained(pi0["checkpoint"] / "policy").state_dict()
    for name, tensor in pi0["ranks"][0]["fsdp"]["weights"].items():
        torch.testing.assert_close(saved[name], tensor, rtol=0, atol=0, msg=name)
    optimizer = torch.load(pi0["checkpoint"] / "actor_state.pt", weights_only=False)["optimizer"]
    assert optimizer["state"] and set(optimizer["state"]) <= set(saved)
    for name, moments in optimizer["state"].items():
        assert moments["exp_avg"].shape == saved[name].shape, name


def test_a_checkpoint_of_fsdp_ranks_resumes_on_one_rank(pi0):
    worker = make_worker(0, 1, local_rendezvous(), pi0["path"])
    worker.load(str(pi0["checkpoint"]))
    worker.train(synthetic_batch(vlarl_policies.from_pretrained(pi0["path"])), plans(1)["second"])
    for name, tensor in pi0["ranks"][0]["resume"]["uninterrupted"].items():
        torch.testing.assert_close(worker.policy.state_dict()[name], tensor, **CLOSE, msg=name)


def test_a_checkpoint_of_vlarl_trainer_0_17_resumes(tmp_path):
    """0.17 saved ``optimizer.state_dict()``, whose parameters are numbered instead of named."""
    path = saved_policy(tmp_path / "policy", "pi0")
    worker, _ = one_rank(path)
    worker.policy.save_pretrained(tmp_path / "checkpoint" / "policy")
    torch.save({"optimizer": worker.optimizer.state_dict(), "scheduler": worker.scheduler.state_dict()},
               tmp_path / "checkpoint" / "actor_state.pt")
    batch, second = synthetic_batch(worker.policy), plans(1)["second"]
    worker.train(batch, second)
    fresh = make_worker(0, 1, local_rendezvous(), path)
    fresh.load(str(tmp_path / "checkpoint"))
    fresh.train(batch, second)
    for name, tensor in worker.policy.state_dict().items():
        torch.testing.assert_close(fresh.policy.state_dict()[name], tensor, rtol=0, atol=0, msg=name)


# ----------------------------------------------------------------- precision


def dtypes(state: dict) -> dict:
    return {name: tensor.dtype for name, tensor in state.items()}


def update_difference(trained: dict, reference: dict, initial: dict) -> float:
    """How far the update of ``trained`` (from ``initial`` in its own dtype) is from that of ``reference``,
    relative to the latter: 0 for the same update, 1 for none."""
    names = [name for name, tensor in initial.items() if tensor.is_floating_point()]
    update = {n: trained[n].float() - initial[n].to(trained[n].dtype).float() for n in names}
    gap = sum(float((update[n] - (reference[n] - initial[n])).square().sum()) for n in names)
    step = sum(float((reference[n] - initial[n]).square().sum()) for n in names)
    return (gap / step) ** 0.5


def test_bf16_mixed_keeps_fp32_weights_and_moments_and_follows_fp32(pi0):
    _, mixed = one_rank(pi0["path"], "bf16-mixed")
    initial = vlarl_policies.from_pretrained(pi0["path"]).state_dict()
    for run in (mixed, pi0["ranks"][0]["fsdp_bf16_mixed"]):
        assert run["parameter_dtypes"] == {torch.float32} and run["moment_dtypes"] == {torch.float32}
        assert not all(torch.equal(run["state"][n], t) for n, t in pi0["one"]["state"].items()), "no bf16 compute"
        assert update_difference(run["state"], pi0["one"]["state"], initial) < 0.2


def test_bf16_pure_keeps_bf16_weights_and_hands_out_the_policys_dtypes(pi0):
    _, pure = one_rank(pi0["path"], "bf16-pure")
    assert pure["parameter_dtypes"] == {torch.bfloat16} and pure["moment_dtypes"] == {torch.bfloat16}
    assert dtypes(pure["weights"]) == dtypes(pi0["one"]["weights"])
    initial = vlarl_policies.from_pretrained(pi0["path"]).state_dict()
    assert update_difference(pure["state"], pi0["one"]["state"], initial) < 0.5


def test_a_bfloat16_policy_trains_in_fp32_and_saves_bfloat16(tmp_path):
    path = saved_policy(tmp_path / "policy", "pi0", dtype="bfloat16")
    saved_dtypes = dtypes(vlarl_policies.from_pretrained(path).state_dict())
    assert torch.bfloat16 in saved_dtypes.values()
    worker, run = one_rank(path)
    assert run["parameter_dtypes"] == {torch.float32}
    assert dtypes(run["weights"]) == saved_dtypes
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    worker.save(str(checkpoint))
    saved = vlarl_policies.from_pretrained(checkpoint / "policy")
    assert saved.config.dtype == "bfloat16"
    assert dtypes(saved.state_dict()) == saved_dtypes
    # actor_state.pt keeps the fp32 weights the bf16 checkpoint rounds, so a resume is exact
    batch, second = synthetic_batch(saved), plans(1)["second"]
    worker.train(batch, second)
    fresh = make_worker(0, 1, local_rendezvous(), path)
    fresh.load(str(checkpoint))
    fresh.train(batch, second)
    for name, tensor in worker.policy.state_dict().items():
        torch.testing.assert_close(fresh.policy.state_dict()[name], tensor, rtol=0, atol=0, msg=name)


# ----------------------------------------------------------------- validation


@pytest.mark.parametrize("overrides, message", [
    (["actor.precision=fp16"], r"actor.precision must be one of \('fp32', 'bf16-mixed', 'bf16-pure'\), got 'fp16'"),
])
def test_unworkable_actor_settings_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        check_training(load_config(["recipe=metaworld_10_ppo_openpi_tiny", *overrides]))


if __name__ == "__main__":
    run_rank(sys.argv[1], int(sys.argv[2]))
