"""The rollout worker outside Ray: weight syncs carry the training step into the policy's sampling."""

import numpy as np
import torch

import vlarl_policies
from vlarl_trainer.rl.workers.rollout_worker import RolloutWorker


def test_synced_weights_set_the_step_that_anneals_the_noise(tmp_path):
    torch.manual_seed(0)
    policy = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4, noise_method="flow_sde",
                                 noise_anneal=True, noise_params=(1.0, 0.4, 6))
    path = policy.save_pretrained(tmp_path / "policy")
    worker = RolloutWorker(str(path), threads=1)
    rng = np.random.default_rng(0)
    obs = {"main_images": rng.integers(0, 256, (3, 64, 64, 3), dtype=np.uint8),
           "states": rng.uniform(-1, 1, (3, 4)).astype(np.float32),
           "task_description": ("reach the goal",) * 3}
    levels = []
    for step in (0, 3, 9):
        worker.begin(seed=step)
        worker.load_weights(policy.state_dict(), version=step)
        worker.act("shard", obs)
        levels.append(worker.trajectory("shard")["forward_inputs"]["noise_levels"])
    for stored, expected in zip(levels, (1.0, 0.7, 0.4), strict=True):
        torch.testing.assert_close(stored, torch.full((1, 3), expected))
