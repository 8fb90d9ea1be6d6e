"""scripts/exploration_spread.py on a tiny random pi0 and MetaWorld's reach task."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vlarl_envs.testing import require_simulator

require_simulator("metaworld")

import vlarl_policies
from vlarl_trainer.testing import load_script

pytestmark = pytest.mark.sim

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "exploration_spread.py"


@pytest.fixture(scope="module")
def script():
    return load_script(SCRIPT)


@pytest.fixture(scope="module")
def policy():
    return vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4, action_chunk=4,
                               noise_method="flow_sde", noise_level=1.0)


def test_noisy_episodes_spread_and_the_whole_measurement_replays(script, policy):
    first = script.episode_ends(policy, "reach-v3", [0, 1], samples=3, horizon=12, seed=5)
    again = script.episode_ends(policy, "reach-v3", [0, 1], samples=3, horizon=12, seed=5)
    assert [result.episode_id for result in first] == [0, 1]
    for result, repeat in zip(first, again, strict=True):
        assert result.end_to_goal.shape == (4,) and result.success.shape == (4,)
        assert result.start_to_goal > 0 and result.noisy_spread > 0
        assert np.all((result.final_dense >= 0) & (result.final_dense <= 1))
        np.testing.assert_allclose(result.end_to_goal, repeat.end_to_goal)
    assert first[0].start_to_goal != first[1].start_to_goal  # two initial states, two goals
    table = script.report(first)
    assert table.count("\n") == 3 and "| 1 |" in table


def test_bad_arguments_name_what_was_expected(script, policy):
    with pytest.raises(ValueError, match="samples must be at least 2.*got 1"):
        script.episode_ends(policy, "reach-v3", [0], samples=1)
    with pytest.raises(ValueError, match=r"horizon \(10\) must be a multiple of the policy's action_chunk \(4\)"):
        script.episode_ends(policy, "reach-v3", [0], samples=2, horizon=10)


def test_a_higher_noise_level_spreads_the_endpoints_further(script):
    policy = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4, action_chunk=4,
                                 noise_method="flow_sde", noise_level=0.2)
    narrow = script.episode_ends(policy, "reach-v3", [0], samples=3, horizon=12)[0].noisy_spread
    wide = script.episode_ends(script.with_noise_level(policy, 2.0), "reach-v3", [0], samples=3, horizon=12)[0]
    assert wide.noisy_spread > narrow
    annealed = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4, noise_method="flow_sde",
                                   noise_anneal=True, noise_params=(1.0, 0.3, 10))
    assert script.with_noise_level(annealed, 2.0).sampling_noise_level == 2.0
    with pytest.raises(ValueError, match="noise level must be >= 0, got -1"):
        script.with_noise_level(policy, -1.0)
    ode = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4, noise_method="flow_ode")
    with pytest.raises(ValueError, match="needs a flow_sde policy, got noise_method 'flow_ode'"):
        script.with_noise_level(ode, 1.0)
