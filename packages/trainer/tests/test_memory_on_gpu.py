"""The dry run's activation count against what CUDA holds after a real ``evaluate_actions``: a GPU check, with
observations of a MetaWorld camera's sizes built here, so it needs no simulator."""

import numpy as np
import pytest
import torch
from gymnasium import spaces

import vlarl_policies
from vlarl_trainer.config import load_config
from vlarl_trainer.rl.memory import estimate_actor_memory, observation_batch
from vlarl_trainer.rl.validation import Layout

INSTRUCTION = "reach the goal"
OBSERVATIONS = spaces.Dict({"main_images": spaces.Box(0, 255, (64, 64, 3), np.uint8),
                            "states": spaces.Box(-np.inf, np.inf, (4,), np.float32),
                            "task_description": spaces.Text(64)})
ONE_RANK = Layout(placement={"env": [(0,)], "rollout": [(0,)], "actor": [(0,)]}, envs_per_stage=1, chunk_steps=1,
                  action_dim=4, state_dim=4)


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", ["metaworld_10_ppo_openpi_tiny", "metaworld_10_ppo_openvlaoft_tiny"])
def test_activation_estimate_is_within_a_quarter_of_the_cuda_peak(recipe):
    config = load_config([f"recipe={recipe}", "actor.micro_batch_size=32"])
    memory, _ = estimate_actor_memory(config, ONE_RANK, OBSERVATIONS, [INSTRUCTION])
    torch.manual_seed(0)
    policy = vlarl_policies.make(
        config.policy.name, preset=config.policy.preset, tokenizer_corpus=[INSTRUCTION], device="cuda",
        **{"action_dim": 4, "state_dim": 4, "action_chunk": config.env.action_chunk, **config.policy.kwargs}).train()
    forward_inputs = {k: v.cuda() for k, v in policy.act(observation_batch(OBSERVATIONS, 32, INSTRUCTION))
                      .forward_inputs.items()}
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    output = policy.evaluate_actions(forward_inputs, compute_entropy=config.algorithm.entropy_coef > 0,
                             compute_values=policy.value_head is not None)
    held = torch.cuda.memory_allocated() - before
    del output
    print(f"\n{recipe}: activations {held / 2**20:.1f} MiB held, {memory.activations / 2**20:.1f} MiB estimated")
    assert held == pytest.approx(memory.activations, rel=0.25)


@pytest.mark.gpu
def test_the_fsdp_actor_never_holds_the_whole_fp32_policy_on_the_gpu(tmp_path):
    """A bf16 checkpoint trained in fp32 with FSDP2 and offload: widened on the CPU, moved to the GPU one
    shard unit at a time, so the GPU's peak while the actor starts stays below the policy's fp32 size."""
    from vlarl_trainer.config import ActorConfig, AlgorithmConfig
    from vlarl_trainer.rl.workers.actor_worker import ActorWorker
    from vlarl_trainer.rl.workers.process import local_rendezvous

    torch.manual_seed(0)
    policy = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4, add_value_head=True,
                                 tokenizer_corpus=[INSTRUCTION]).to(torch.bfloat16)
    path = str(policy.save_pretrained(tmp_path / "pi0"))
    fp32_bytes = sum(parameter.numel() * 4 for parameter in policy.parameters())
    torch.cuda.reset_peak_memory_stats()
    worker = ActorWorker(0, 1, local_rendezvous(), path,
                         ActorConfig(strategy="fsdp", offload=True, precision="fp32"), AlgorithmConfig(),
                         total_optimizer_steps=1, threads=1)
    peak = torch.cuda.max_memory_allocated()
    print(f"\nfsdp actor start: GPU peak {peak / 2**20:.1f} MiB, whole fp32 policy {fp32_bytes / 2**20:.1f} MiB")
    assert worker.device.type == "cuda" and peak < fp32_bytes
