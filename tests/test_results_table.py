"""scripts/results_table.py on main-job records it writes itself: the README's Results tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vlarl_trainer.testing import load_script

ROOT = Path(__file__).resolve().parents[1]


SCRIPT = ROOT / "scripts" / "results_table.py"


def evaluation(step: int, per_task: dict[str, float]) -> dict:
    entry = {"step": step, "eval/success_once": sum(per_task.values()) / len(per_task), "time/eval": 30.0}
    entry.update({f"eval/test/success_once/{task}": value for task, value in per_task.items()})
    return entry


def write_record(folder: Path, seed: int, job_steps: int, lines: list[dict], *, in_rl: bool = False,
                 resumed_from: int | None = None) -> Path:
    folder.mkdir(parents=True)
    results = {"seed": seed, "preset": {"rl": {"steps": job_steps}},
               "seconds": {"collect": 20.0, "sft": 100.0, "total": 3000.0}, "resumed_from_step": resumed_from}
    (folder / "results.json").write_text(json.dumps(results))
    metrics = folder / "rl" / "metrics.jsonl" if in_rl else folder / "metrics.jsonl"
    metrics.parent.mkdir(exist_ok=True)
    metrics.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def training_steps(first: int, last: int, seconds: float = 50.0) -> list[dict]:
    return [{"step": step, "env/success_once": 0.3, "time/step": seconds} for step in range(first, last + 1)]


@pytest.fixture
def records(tmp_path):
    """Seed 0: a job of 4 steps. Seed 3: a job of 2 steps continued to 4, whose steps 3-4 were replayed."""
    finished = write_record(tmp_path / "job-seed0", 0, 4, [
        evaluation(0, {"door-open-v3": 0.0, "reach-v3": 0.2}), *training_steps(1, 2),
        evaluation(2, {"door-open-v3": 0.4, "reach-v3": 0.2}), *training_steps(3, 4),
        evaluation(4, {"door-open-v3": 1.0, "reach-v3": 0.4})], in_rl=True)
    continued = write_record(tmp_path / "record-seed3", 3, 2, [
        evaluation(0, {"door-open-v3": 0.2, "reach-v3": 0.0}), *training_steps(1, 2),
        evaluation(2, {"door-open-v3": 0.6, "reach-v3": 0.0}), *training_steps(3, 4, seconds=999.0),
        evaluation(4, {"door-open-v3": 0.0, "reach-v3": 0.0}), *training_steps(3, 4),
        evaluation(4, {"door-open-v3": 0.8, "reach-v3": 0.2})])
    return finished, continued


def test_seed_table_reads_every_evaluation_and_the_lift(records):
    script = load_script(SCRIPT)
    finished, continued = (script.read_record(path) for path in records)
    table = script.seed_table([finished, continued], [2, 4]).splitlines()
    assert table[0] == ("| seed | run | SFT (before RL) | after 2 RL steps (lift) | after 4 RL steps (lift) | "
                        "wall time of the whole job |")
    # Seed 0 ran to step 4 in its job: the job's own total, 3000 s.
    assert table[2] == "| 0 | `job-seed0` | 0.10 | 0.30 (+20) | 0.70 (+60) | 50 min to step 4 |"
    # Seed 3's job stopped at step 2: collect + SFT + four steps of 50 s + three evaluations of 30 s,
    # the replayed steps 3-4 counted once with their later times.
    assert table[3] == "| 3 | `record-seed3` | 0.10 | 0.30 (+20) | 0.50 (+40) | 7 min* to step 4 |"
    assert continued.wall_minutes(4) == (pytest.approx(((20 + 100) + 4 * 50 + 3 * 30) / 60), True)


def test_a_job_still_running_reads_its_job_json_and_shows_the_steps_it_lacks(tmp_path):
    folder = tmp_path / "running-seed2"
    (folder / "rl").mkdir(parents=True)
    job = {"seed": 2, "preset": {"rl": {"steps": 100}}, "seconds": {"collect": 30.0, "sft": 150.0}}
    (folder / "job.json").write_text(json.dumps(job))
    lines = [evaluation(0, {"door-open-v3": 0.0, "reach-v3": 0.0}), *training_steps(1, 2)]
    (folder / "rl" / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    script = load_script(SCRIPT)
    row = script.seed_table([script.read_record(folder)], [2, 4]).splitlines()[2]
    assert row == "| 2 | `running-seed2` | 0.00 | - | - | 4 min* to step 0 |"


def test_a_job_json_of_the_config_tree_reads_its_seed_and_steps_from_the_tree(tmp_path):
    folder = tmp_path / "tree-seed1"
    (folder / "rl").mkdir(parents=True)
    job = {"config": {"runner": {"seed": 1, "max_steps": 4}}, "overrides": [],
           "seconds": {"collect": 30.0, "sft": 150.0}}
    (folder / "job.json").write_text(json.dumps(job))
    lines = [evaluation(0, {"door-open-v3": 0.0, "reach-v3": 0.0}), *training_steps(1, 4),
             evaluation(4, {"door-open-v3": 0.5, "reach-v3": 0.0})]
    (folder / "rl" / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    record = load_script(SCRIPT).read_record(folder)
    assert (record.seed, record.job_steps, record.lift(4)) == (1, 4, 25.0)


def test_a_job_finished_by_resume_keeps_its_total_and_marks_it_summed(tmp_path):
    lines = [evaluation(0, {"door-open-v3": 0.0, "reach-v3": 0.0}), *training_steps(1, 2),
             evaluation(2, {"door-open-v3": 0.5, "reach-v3": 0.0})]
    folder = write_record(tmp_path / "resumed-seed1", 1, 2, lines, in_rl=True, resumed_from=1)
    script = load_script(SCRIPT)
    assert script.read_record(folder).wall_minutes(2) == (50.0, True)
    row = script.seed_table([script.read_record(folder)], [2]).splitlines()[2]
    assert row == "| 1 | `resumed-seed1` | 0.00 | 0.25 (+25) | 50 min* to step 2 |"


def test_task_table_compares_before_with_the_last_step(records):
    script = load_script(SCRIPT)
    table = script.task_table([script.read_record(path) for path in records], 4).splitlines()
    assert table[0] == "| task | seed 0 before | seed 0 after | seed 3 before | seed 3 after |"
    assert table[2:] == ["| door-open-v3 | 0.0 | 1.0 | 0.2 | 0.8 |", "| reach-v3 | 0.2 | 0.4 | 0.0 | 0.2 |"]


def test_main_prints_the_tables_the_mean_lift_and_the_curves(records, capsys):
    load_script(SCRIPT).main([str(path) for path in records] + ["--steps", "2", "4"])
    out = capsys.readouterr().out
    assert "Lift after 4 RL steps, 2 of 2 runs there: mean +50 points, smallest +40." in out
    assert "Held-out success at every evaluation: seed 0 0.10, 0.30, 0.70; seed 3 0.10, 0.30, 0.50." in out


def test_a_missing_evaluation_names_the_steps_the_run_has(records):
    script = load_script(SCRIPT)
    with pytest.raises(ValueError, match=r"no evaluation after step 3; it has \[0, 2, 4\]"):
        script.read_record(records[0]).success(3)


def test_a_folder_without_a_record_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no results.json or job.json"):
        load_script(SCRIPT).read_record(tmp_path)


def test_a_run_without_an_evaluation_before_rl_is_refused(tmp_path):
    folder = write_record(tmp_path / "run", 0, 2, training_steps(1, 2))
    with pytest.raises(ValueError, match="no evaluation before RL"):
        load_script(SCRIPT).read_record(folder)


def test_group_table_gives_each_group_its_mean_and_the_mean_of_groups(tmp_path):
    def grouped(step: int, easy: float, hard: float, every_episode: float) -> dict:
        return {"step": step, "eval/success_once": every_episode, "eval/test/group_success_once/easy": easy,
                "eval/test/group_success_once/hard": hard, "eval/test/group_mean_success_once": (easy + hard) / 2}

    folder = write_record(tmp_path / "mt50-seed0", 0, 2, [grouped(0, 0.6, 0.1, 0.5), *training_steps(1, 2),
                                                          grouped(2, 0.8, 0.4, 0.7)], in_rl=True)
    script = load_script(SCRIPT)
    table = script.group_table([script.read_record(folder)], 2, ["easy", "hard"], "test").splitlines()
    assert table[0] == "| seed | run | policy | easy | hard | mean of groups | all episodes |"
    assert table[2:] == ["| 0 | `mt50-seed0` | SFT | 0.60 | 0.10 | 0.35 | 0.50 |",
                         "| 0 | `mt50-seed0` | SFT + 2 RL steps | 0.80 | 0.40 | 0.60 | 0.70 |"]
    with pytest.raises(ValueError, match="logs no eval/test/group_success_once/medium"):
        script.group_table([script.read_record(folder)], 2, ["medium"], "test")


def test_chain_table_gives_calvins_rates_and_average_length_at_every_evaluation_a_run_has(tmp_path):
    def with_chains(step: int, lengths: list[int]) -> dict:
        entry = evaluation(step, {"open_drawer": 0.5})
        entry.update({f"eval/chains/success_{k}": sum(length >= k for length in lengths) / len(lengths)
                      for k in range(1, 6)})
        entry["eval/chains/average_length"] = sum(lengths) / len(lengths)
        return entry

    folder = write_record(tmp_path / "calvin-seed0", 0, 4, [with_chains(0, [0, 1, 0, 2]), *training_steps(1, 2),
                                                            with_chains(2, [1, 1, 3, 5])], in_rl=True)
    script = load_script(SCRIPT)
    table = script.chain_table([script.read_record(folder)], [2, 4]).splitlines()
    assert table[0] == "| seed | run | policy | 1/5 | 2/5 | 3/5 | 4/5 | 5/5 | average length |"
    assert table[2:] == ["| 0 | `calvin-seed0` | SFT | 50% | 25% | 0% | 0% | 0% | 0.75 |",
                         "| 0 | `calvin-seed0` | SFT + 2 RL steps | 100% | 50% | 50% | 25% | 25% | 2.50 |"]
    without = write_record(tmp_path / "mt10-seed0", 0, 2, [evaluation(0, {"reach-v3": 0.2})])
    with pytest.raises(ValueError, match="logs no eval/chains/success_1"):
        script.chain_table([script.read_record(without)], [2])


def test_split_table_gives_each_named_split_its_success_and_lift(tmp_path):
    """CALVIN's job: scene D's ``test`` beside the training scenes' ``abc_test``, before RL and after each step."""
    def scored(step, d, abc):
        return {**evaluation(step, {"open_drawer": d}), "eval/test/success_once": d, "eval/abc_test/success_once": abc}

    folder = write_record(tmp_path / "calvin-seed0", 0, 4, [
        scored(0, 0.2, 0.3), *training_steps(1, 2), scored(2, 0.2, 0.4), *training_steps(3, 4),
        scored(4, 0.1, 0.5)], in_rl=True)
    script = load_script(SCRIPT)
    table = script.split_table([script.read_record(folder)], [2, 4, 6], ["test", "abc_test"]).splitlines()
    assert table[0] == ("| seed | run | split | SFT (before RL) | after 2 RL steps (lift) | after 4 RL steps (lift) | "
                        "after 6 RL steps (lift) |")
    assert table[2:] == ["| 0 | `calvin-seed0` | test | 0.20 | 0.20 (+0) | 0.10 (-10) | - |",
                         "| 0 | `calvin-seed0` | abc_test | 0.30 | 0.40 (+10) | 0.50 (+20) | - |"]
    with pytest.raises(ValueError, match="logs no eval/vision/success_once"):
        script.split_table([script.read_record(folder)], [2], ["vision"])


def test_trained_table_parts_the_tasks_rl_played_from_the_others(tmp_path):
    """A run with ``rollout.tasks`` (MT50's focus lever): the trained tasks' mean and the others', each lifted."""
    folder = write_record(tmp_path / "mt50-focus-seed0", 0, 4, [
        evaluation(0, {"door-open-v3": 0.2, "reach-v3": 0.0, "push-v3": 0.4}), *training_steps(1, 2),
        evaluation(2, {"door-open-v3": 0.6, "reach-v3": 0.4, "push-v3": 0.2})], in_rl=True)
    results = json.loads((folder / "results.json").read_text())
    results["config"] = {"runner": {"seed": 0, "max_steps": 4}, "rollout": {"tasks": ["door-open-v3", "reach-v3"]}}
    (folder / "results.json").write_text(json.dumps(results))
    script = load_script(SCRIPT)
    record = script.read_record(folder)
    table = script.trained_table([record], [2, 4]).splitlines()
    assert table[0] == ("| seed | run | split | tasks | SFT (before RL) | after 2 RL steps (lift) "
                        "| after 4 RL steps (lift) |")
    assert table[2:] == ["| 0 | `mt50-focus-seed0` | test | trained (2) | 0.10 | 0.50 (+40) | - |",
                         "| 0 | `mt50-focus-seed0` | test | others (1) | 0.40 | 0.20 (-20) | - |"]
    results["config"]["rollout"]["tasks"] = ["door-open-v3", "drawer-open-v3"]
    (folder / "results.json").write_text(json.dumps(results))
    with pytest.raises(ValueError, match=r"trained on \['drawer-open-v3'\], which its evaluation does not score"):
        script.trained_table([script.read_record(folder)], [2])


def test_trained_table_gives_each_count_of_deals_its_row(tmp_path):
    """A run with ``rollout.task_repeats``: the tasks dealt twice, those dealt once and the untrained ones."""
    folder = write_record(tmp_path / "mt50-repeat-seed0", 0, 2, [
        evaluation(0, {"door-open-v3": 0.2, "reach-v3": 0.0, "push-v3": 0.4, "hammer-v3": 1.0}), *training_steps(1, 2),
        evaluation(2, {"door-open-v3": 0.6, "reach-v3": 0.4, "push-v3": 0.6, "hammer-v3": 0.8})], in_rl=True)
    results = json.loads((folder / "results.json").read_text())
    results["config"] = {"runner": {"seed": 0, "max_steps": 2},
                         "rollout": {"tasks": ["door-open-v3", "reach-v3", "push-v3"],
                                     "task_repeats": {"door-open-v3": 2, "reach-v3": 2}}}
    (folder / "results.json").write_text(json.dumps(results))
    script = load_script(SCRIPT)
    table = script.trained_table([script.read_record(folder)], [2]).splitlines()
    assert table[2:] == ["| 0 | `mt50-repeat-seed0` | test | dealt 2x (2) | 0.10 | 0.50 (+40) |",
                         "| 0 | `mt50-repeat-seed0` | test | dealt 1x (1) | 0.40 | 0.60 (+20) |",
                         "| 0 | `mt50-repeat-seed0` | test | others (1) | 1.00 | 0.80 (-20) |"]


def test_trained_table_parts_each_named_split_by_its_own_tasks(tmp_path, capsys):
    """CALVIN's ``--splits test abc_test``: the trained tasks and the others on scene D and on A-C, each
    from that split's per-task success, and a split whose tasks lack one the run trained on is refused."""
    folder = tmp_path / "calvin-focus-seed0"
    before = evaluation(0, {"open_drawer": 0.2, "turn_on_led": 0.0})
    before.update({"eval/test/success_once": 0.1, "eval/abc_test/success_once": 0.3,
                   "eval/abc_test/success_once/open_drawer": 0.4, "eval/abc_test/success_once/turn_on_led": 0.2})
    after = evaluation(2, {"open_drawer": 0.2, "turn_on_led": 0.2})
    after.update({"eval/test/success_once": 0.2, "eval/abc_test/success_once": 0.5,
                  "eval/abc_test/success_once/open_drawer": 1.0, "eval/abc_test/success_once/turn_on_led": 0.0})
    write_record(folder, 0, 2, [before, *training_steps(1, 2), after], in_rl=True)
    results = json.loads((folder / "results.json").read_text())
    results["config"] = {"runner": {"seed": 0, "max_steps": 2}, "rollout": {"tasks": ["open_drawer"]}}
    (folder / "results.json").write_text(json.dumps(results))
    script = load_script(SCRIPT)
    script.main([str(folder), "--steps", "2", "--splits", "test", "abc_test"])
    out = capsys.readouterr().out
    assert "| 0 | `calvin-focus-seed0` | test | trained (1) | 0.20 | 0.20 (+0) |" in out
    assert "| 0 | `calvin-focus-seed0` | test | others (1) | 0.00 | 0.20 (+20) |" in out
    assert "| 0 | `calvin-focus-seed0` | abc_test | trained (1) | 0.40 | 1.00 (+60) |" in out
    assert "| 0 | `calvin-focus-seed0` | abc_test | others (1) | 0.20 | 0.00 (-20) |" in out
    with pytest.raises(ValueError, match=r"does not score on vision"):
        script.trained_table([script.read_record(folder)], [2], ("vision",))


def test_main_prints_the_trained_table_only_for_runs_that_trained_on_some_tasks(records, capsys):
    load_script(SCRIPT).main([str(path) for path in records] + ["--steps", "4"])
    assert "trained (" not in capsys.readouterr().out
