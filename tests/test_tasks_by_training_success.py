"""scripts/tasks_by_training_success.py on metrics it writes itself: the tasks a run's rollouts solve sometimes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vlarl_trainer.testing import load_script

ROOT = Path(__file__).resolve().parents[1]


SCRIPT = ROOT / "scripts" / "tasks_by_training_success.py"


@pytest.fixture
def metrics(tmp_path):
    """Steps 1-3 of a three-task run, an evaluation line at step 0, and step 2 replayed by a resume."""
    lines = [{"step": 0, "eval/success_once": 0.5},
             {"step": 1, "env/success_once/reach-v3": 0.0, "env/success_once/door-open-v3": 0.2,
              "env/success_once/push-v3": 1.0},
             {"step": 2, "env/success_once/reach-v3": 0.9, "env/success_once/door-open-v3": 0.2,
              "env/success_once/push-v3": 1.0},
             {"step": 2, "env/success_once/reach-v3": 0.1, "env/success_once/door-open-v3": 0.4,
              "env/success_once/push-v3": 1.0},
             {"step": 3, "env/success_once/reach-v3": 0.5, "env/success_once/door-open-v3": 0.6,
              "env/success_once/push-v3": 0.8}]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_each_task_averages_the_steps_asked_for_a_replayed_step_counting_once(metrics):
    means = load_script(SCRIPT).mean_training_success(metrics, 1, 2)
    assert means == pytest.approx({"reach-v3": 0.05, "door-open-v3": 0.3, "push-v3": 1.0})


def test_the_tasks_between_low_and_high_leave_out_high_itself(metrics):
    script = load_script(SCRIPT)
    means = script.mean_training_success(metrics, 1, 3)
    assert script.tasks_between(means, 0.1, 0.9) == ["reach-v3", "door-open-v3"]
    assert script.tasks_between(means, 0.3, 0.5) == ["door-open-v3"]
    assert script.tasks_between(means, 0.0, means["push-v3"]) == ["reach-v3", "door-open-v3"]


def test_main_prints_the_override_that_trains_on_the_picked_tasks(metrics, capsys):
    load_script(SCRIPT).main([str(metrics), "--steps", "1", "3", "--between", "0.3", "0.9"])
    out = capsys.readouterr().out
    assert "1 of 3 tasks in [0.3, 0.9):" in out
    assert out.splitlines()[-1] == "'rollout.tasks=[door-open-v3]'"


def test_main_with_once_deals_the_picked_tasks_more_often_than_the_solved_ones(metrics, capsys):
    load_script(SCRIPT).main([str(metrics), "--steps", "1", "3", "--between", "0.1", "0.9", "--once", "0.9", "1.01",
                        "--repeats", "3"])
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == "and 1 in [0.9, 1.01) dealt once for each 3 deals of them, a deal of 7 tasks:"
    assert out[-1] == ("'rollout.tasks=[reach-v3,door-open-v3,push-v3]' "
                       "'rollout.task_repeats={reach-v3: 3,door-open-v3: 3}'")
    assert "push-v3                          0.93  +" in out


def test_the_printed_overrides_compose_into_the_deal_they_name():
    """What the script prints is what the trainer's config and deal accept."""
    from vlarl_trainer.config import load_config
    from vlarl_trainer.rl.training_episodes import dealt_tasks

    printed = load_script(SCRIPT).repeated_overrides(["reach-v3", "door-open-v3"], ["push-v3"], 2)
    overrides = [part.strip("'") for part in printed.split("' '")]
    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny", *overrides])
    assert dealt_tasks(config) == ["reach-v3", "reach-v3", "door-open-v3", "door-open-v3", "push-v3"]
    with pytest.raises(ValueError, match="--repeats must be at least 1, got 0"):
        load_script(SCRIPT).repeated_overrides(["reach-v3"], ["push-v3"], 0)


def test_steps_without_per_task_success_or_a_reversed_range_are_refused(metrics):
    script = load_script(SCRIPT)
    with pytest.raises(ValueError, match="logs no env/success_once/<task> between steps 4 and 9"):
        script.mean_training_success(metrics, 4, 9)
    with pytest.raises(ValueError, match="FIRST <= LAST; got 3 1"):
        script.mean_training_success(metrics, 3, 1)
