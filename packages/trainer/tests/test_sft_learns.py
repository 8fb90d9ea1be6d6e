"""SFT learns on MetaWorld: expert demonstrations of one task in, a tiny pi0 that solves held-out episodes out.

A learning test (`make test-learning`, not `make test`): collects DEMOS expert episodes at 64 px, trains
STEPS steps, then the trainer's evaluator replays test-split episodes 0..EVAL_EPISODES-1, which share no
initial state with training, and prints the loss and the success before and after. `make test` keeps the
short checks that fail when SFT stops learning: packages/trainer/tests/test_sft.py (the trainer's SFT run
follows its demonstrations' instructions) and packages/policies/tests/test_sft.py (flow matching solves a
task that needs image, instruction and state).
"""

from __future__ import annotations

import pytest
import torch

from vlarl_envs.testing import require_simulator

require_simulator("metaworld")

import vlarl_policies
from vlarl_trainer.cli.commands import eval_main
from vlarl_trainer.config import load_config
from vlarl_trainer.data import collect_demonstrations
from vlarl_trainer.rl.evaluation import evaluate_checkpoint
from vlarl_trainer.sft.train import run_sft

pytestmark = [pytest.mark.sim, pytest.mark.learning, pytest.mark.timeout(2400)]
TASK = "drawer-open-v3"
ENV_ID = f"vlarl/MetaWorld-{TASK}"
DEMOS = 15
STEPS = 1000
EVAL_EPISODES = 10
EVAL_HORIZON = 150
"""The expert opens the drawer in about 90 steps; a policy that needs more has failed.

Not drawer-close: an untrained tiny pi0 pushes that drawer shut on all ten test episodes."""


def test_sft_cuts_the_loss_and_solves_held_out_episodes(tmp_path, capsys):
    collect_demonstrations(ENV_ID, DEMOS, tmp_path / "demos", image_size=64)
    config = load_config([
        f"env.id={ENV_ID}", f"env.max_steps={EVAL_HORIZON}",
        f"env.kwargs={{obs_mode: rgb, image_size: 64, horizon: {EVAL_HORIZON}}}",
        "env.num_envs=5", "rollout.pipeline_stage_num=1", f"eval.episodes_per_task={EVAL_EPISODES}",
        f"dataset={tmp_path / 'demos'}", f"runner.output_dir={tmp_path}", "runner.name=run",
        f"sft.steps={STEPS}", "sft.batch_size=16", "sft.lr=2e-3", "sft.log_every=100",
    ], need_recipe=False)
    result = run_sft(config)
    assert result.final_loss < 0.2 * result.first_loss
    torch.manual_seed(0)
    untrained = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4, action_chunk=5)
    before = evaluate_checkpoint(config, untrained.save_pretrained(tmp_path / "untrained"))
    after = result.evaluation["table"][("test", TASK)]
    print(f"SFT on {DEMOS} demonstrations of {TASK}, {STEPS} steps: loss {result.first_loss:.3f} -> "
          f"{result.final_loss:.3f} in {result.train_seconds:.0f} s; held-out success "
          f"{before['table'][('test', TASK)]:.2f} -> {after:.2f} ({EVAL_EPISODES} episodes)")
    assert after >= 0.5 and after > before["table"][("test", TASK)] + 0.3

    # vlarl-eval scores an SFT checkpoint on the env its run's config.yaml names.
    assert eval_main([f"eval.checkpoint={result.checkpoint}", "eval.episodes_per_task=2"]) == 0
    assert f"| test | {TASK} |" in capsys.readouterr().out
