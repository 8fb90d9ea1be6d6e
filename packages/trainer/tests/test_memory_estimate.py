"""``vlarl-train --dry-run``: its byte counts against the tensors a real update holds."""

import subprocess
import sys

import pytest
import torch

from vlarl_envs.testing import require_simulator

require_simulator("metaworld")

import vlarl_policies
from vlarl_trainer.config import available_recipes, load_config
from vlarl_trainer.rl.memory import (
    estimate_config_memory,
    observation_batch,
    parameters_reached,
    saved_activation_bytes,
    state_bytes,
)
from vlarl_trainer.rl.runner import env_instructions

pytestmark = pytest.mark.sim

RECIPES = {"pi0": "metaworld_10_ppo_openpi_tiny", "openvla_oft": "metaworld_10_ppo_openvlaoft_tiny"}
SMALL = ["env.id=vlarl/MetaWorld-reach-v3", "env.num_envs=2", "actor.global_batch_size=4", "actor.micro_batch_size=2",
         "env.kwargs={obs_mode: rgb, image_size: 64, horizon: 100}", "cluster.component_placement.env=0"]


def estimate(name: str, *overrides: str):
    config = load_config([f"recipe={RECIPES[name]}", *SMALL, *overrides])
    layout, memory, parameters = estimate_config_memory(config)
    return config, layout, layout.observation_space, memory, parameters


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def one_real_update(config, layout, observation_space, dtype: str):
    """The run's policy (same seed, same sizes) after one AdamW step on a micro-batch of its own actions."""
    torch.manual_seed(config.runner.seed)
    policy = vlarl_policies.make(
        config.policy.name, preset=config.policy.preset, tokenizer_corpus=env_instructions(config),
        **{"action_dim": layout.action_dim, "state_dim": layout.state_dim, "action_chunk": config.env.action_chunk,
           **config.policy.kwargs, "dtype": dtype}).train()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-4)
    obs = observation_batch(observation_space, config.actor.micro_batch_size, env_instructions(config)[0])
    forward_inputs = policy.act(obs).forward_inputs
    output = policy.evaluate_actions(forward_inputs, compute_entropy=config.algorithm.entropy_coef > 0)
    outputs = [tensor for tensor in (output.logprobs, output.entropy, output.values) if tensor is not None]
    sum(tensor.float().mean() for tensor in outputs).backward()
    optimizer.step()
    return policy, optimizer, forward_inputs


@pytest.mark.parametrize("name", sorted(RECIPES))
@pytest.mark.parametrize(("precision", "dtype"), [("fp32", "float32"), ("bf16-pure", "bfloat16")])
def test_parameter_gradient_and_optimizer_bytes_are_exact(name, precision, dtype):
    config, layout, observation_space, memory, parameters = estimate(name, f"actor.precision={precision}")
    policy, optimizer, _ = one_real_update(config, layout, observation_space, dtype)

    assert parameters == sum(p.numel() for p in policy.parameters())
    assert memory.parameters == tensor_bytes(policy.parameters())
    assert memory.gradients == tensor_bytes(p.grad for p in policy.parameters() if p.grad is not None)
    held = [value for state in optimizer.state.values() for value in state.values() if torch.is_tensor(value)]
    assert memory.optimizer == tensor_bytes(held)


def test_fsdp_divides_the_states_among_ranks_rounding_each_tensor_up():
    tensors = [torch.zeros(10, 3), torch.zeros(7, dtype=torch.bfloat16), torch.zeros(())]
    assert state_bytes(tensors, 1, sharded=True) == 30 * 4 + 7 * 2 + 4
    assert state_bytes(tensors, 4, sharded=True) == 3 * 3 * 4 + 2 * 2 + 4
    assert state_bytes(tensors, 4, sharded=False) == 30 * 4 + 7 * 2 + 4


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_fake_activation_count_equals_the_real_one(name):
    config, layout, observation_space, memory, _ = estimate(name)
    policy, _, forward_inputs = one_real_update(config, layout, observation_space, "float32")
    real, _ = saved_activation_bytes(policy, forward_inputs, "fp32",
                                     compute_entropy=config.algorithm.entropy_coef > 0, compute_values=True)
    assert memory.activations == pytest.approx(real, rel=0.02)
    assert memory.activations > 0


class Branches(torch.nn.Module):
    """Parameters a loss reaches in each way there is, and parameters it does not reach."""

    def __init__(self) -> None:
        super().__init__()
        self.trained = torch.nn.Linear(3, 3)
        self.checkpointed = torch.nn.Linear(3, 3)
        self.frozen = torch.nn.Linear(3, 3).requires_grad_(False)
        self.detached = torch.nn.Linear(3, 3)
        self.unused = torch.nn.Linear(3, 3)
        self.shared = torch.nn.Parameter(torch.ones(3))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        scaled = self.trained(x) * self.shared
        hidden = torch.utils.checkpoint.checkpoint(self.checkpointed, scaled, use_reentrant=False)
        return [self.frozen(hidden).sum(dim=1), (hidden + self.detached(x).detach()).sum(dim=1) * self.shared.sum()]


def test_the_parameters_the_graph_reaches_are_those_backward_gives_a_gradient():
    module = Branches()
    outputs = module(torch.ones(2, 3))
    reached = parameters_reached(outputs, module)
    sum(output.sum() for output in outputs).backward()
    with_gradient = [parameter for parameter in module.parameters() if parameter.grad is not None]
    assert [id(p) for p in reached] == [id(p) for p in with_gradient]
    names = {id(p): name for name, p in module.named_parameters()}
    assert sorted(names[id(p)] for p in reached) == [
        "checkpointed.bias", "checkpointed.weight", "shared", "trained.bias", "trained.weight"]


def test_offload_frees_the_rank_between_updates_and_fsdp_shards_it():
    _, _, _, whole, _ = estimate("pi0")
    _, _, _, offloaded, _ = estimate("pi0", "actor.offload=true")
    two_ranks = "cluster.component_placement={env: 0, rollout: 0, actor: '0:0-1'}"
    _, _, _, sharded, _ = estimate("pi0", "actor.strategy=fsdp", two_ranks)
    _, _, _, sharded_offloaded, _ = estimate("pi0", "actor.strategy=fsdp", "actor.offload=true", two_ranks)
    assert whole.between_updates == whole.parameters + whole.optimizer
    assert offloaded.between_updates == 0 and offloaded.peak == whole.peak
    assert whole.parameters / 2 <= sharded.parameters < whole.parameters * 0.55
    assert whole.gathered == 0 and 0 < sharded.gathered < whole.parameters
    assert sharded_offloaded.peak == sharded.peak - sharded.states and sharded_offloaded.between_updates == 0
    _, _, _, replicated, _ = estimate("pi0", "cluster.component_placement={env: 0, rollout: 0, actor: '0:0-1'}")
    assert whole.gradient_buckets == 0 and replicated.gradient_buckets == whole.parameters  # every weight trains


def test_dry_run_prints_the_layout_and_the_memory_and_starts_nothing(tmp_path):
    command = [sys.executable, "-m", "vlarl_trainer", f"recipe={RECIPES['pi0']}", *SMALL,
               f"runner.output_dir={tmp_path}", "--dry-run"]
    shown = subprocess.run(command, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "device 0: env 0, rollout 0, actor 0" in shown.stdout
    for row in ("parameters", "gradients", "optimizer (AdamW)", "activations (micro-batch 2)", "peak during an update"):
        assert row in shown.stdout
    assert list(tmp_path.iterdir()) == []
    refused = subprocess.run([*command[:-1], "actor.precision=fp16", "--dry-run"], capture_output=True, text=True)
    assert refused.returncode == 2 and "actor.precision must be one of" in refused.stderr


def test_the_dry_run_refuses_an_evaluation_env_the_trainer_would_refuse():
    """MT50 scored on 50 envs of its own while training pipelines two stages on two env workers: 50 envs do
    not split into 4 shards, which the trainer finds only when it starts, after demonstrations and SFT."""
    config = load_config(["recipe=metaworld_50_ppo_openpi_tiny", "eval.num_envs=50"])
    with pytest.raises(ValueError, match=r"the evaluation env \(vlarl/MetaWorld-MT50-v3, eval.num_envs=50\): "
                                         r"env.num_envs \(50\) must divide into env workers x "
                                         r"rollout.pipeline_stage_num \(2 x 2 = 4\)"):
        estimate_config_memory(config)
    assert estimate_config_memory(load_config(["recipe=metaworld_50_ppo_openpi_tiny", "eval.num_envs=100"]))[2] > 0


PUBLISHED_SIZE = [name for name in available_recipes() if "_tiny" not in name]
"""The recipes of the published policy sizes: their names lack ``_tiny`` (test_config holds every recipe to
that)."""


def test_the_published_size_recipes_are_the_gpu_recipes():
    assert len(PUBLISHED_SIZE) >= 15 and {"libero_spatial_ppo_openpi", "maniskill_ppo_openvla"} <= set(PUBLISHED_SIZE)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", PUBLISHED_SIZE)
def test_every_published_size_recipe_fits_a_rank_of_an_80_gb_gpu(recipe):
    """With room to spare for the collocated rollout copy and the simulators, and with no checkpoint."""
    for simulator in ("mani_skill", "libero"):
        require_simulator(simulator)
    config = load_config([f"recipe={recipe}"])
    _, memory, parameters = estimate_config_memory(config)
    assert config.policy.preset == "base" and parameters > 3e9
    assert memory.peak < 48 * 2**30, f"{memory.peak / 2**30:.1f} GiB per actor rank"


def test_the_dry_run_builds_the_env_once(monkeypatch):
    """A simulator's env probe can take seconds (LIBERO's 4-9 s): the estimate reuses validation's."""
    from vlarl_trainer.rl import validation

    probes = []
    check_env = validation.check_env
    monkeypatch.setattr(validation, "check_env", lambda config: probes.append(config.env.id) or check_env(config))
    _, layout, observation_space, _, _ = estimate("pi0")
    assert probes == ["vlarl/MetaWorld-reach-v3"]
    assert observation_space is layout.observation_space and observation_space["states"].shape == (layout.state_dim,)
