"""Which episodes the trainer plays: training deals a multi-task env's tasks out evenly, and
evaluation keeps each env on one task, so no env builds a simulator per task."""

import re
from collections import Counter

import pytest

from vlarl_envs.testing import require_simulator

require_simulator("metaworld")

from vlarl_trainer.config import load_config
from vlarl_trainer.rl.evaluation import evaluation_options
from vlarl_trainer.rl.training_episodes import training_options

pytestmark = pytest.mark.sim


def mt10(*overrides):
    return load_config(["recipe=metaworld_10_ppo_openpi_tiny", *overrides])


def test_twenty_envs_play_every_task_twice_and_keep_their_task():
    config = mt10("env.num_envs=20", "actor.global_batch_size=200")
    steps = [training_options(config, step, 0) for step in range(4)]
    for options in steps:
        assert set(Counter(entry["task"] for entry in options).values()) == {2}
    for env in range(20):
        assert len({options[env]["task"] for options in steps}) == 1
    assert len({entry["episode_id"] for entry in steps[0]}) == 20


def test_fewer_envs_than_tasks_rotate_over_all_tasks():
    config = mt10("env.num_envs=4", "actor.global_batch_size=40")
    dealt = Counter(entry["task"] for step in range(5) for entry in training_options(config, step, 0))
    assert len(dealt) == 10 and set(dealt.values()) == {2}


def test_a_grpo_group_shares_its_initial_state_and_task():
    config = load_config(["recipe=metaworld_10_grpo_openpi_tiny", "env.num_envs=20", "algorithm.group_size=2",
                          "actor.global_batch_size=200"])
    options = training_options(config, 3, 0)
    for first, second in zip(options[::2], options[1::2]):
        assert (first["episode_id"], first["task"]) == (second["episode_id"], second["task"])
    assert len({entry["task"] for entry in options}) == 10


def test_evaluation_keeps_each_env_on_one_task():
    config = mt10("env.num_envs=20", "actor.global_batch_size=200", "eval.episodes_per_task=4")
    options = evaluation_options(config)
    assert Counter((entry["task"], entry["episode_id"]) for entry in options) == Counter(
        {(task, episode): 1 for task in {entry["task"] for entry in options} for episode in range(4)})
    rounds = [options[start : start + 20] for start in range(0, len(options), 20)]
    for env in range(20):
        assert len({round_[env]["task"] for round_ in rounds}) == 1


def test_evaluation_from_a_first_episode_id_plays_ids_no_default_evaluation_plays():
    default = evaluation_options(mt10("eval.episodes_per_task=4", "eval.splits=[train,test]"))
    later = evaluation_options(mt10("eval.episodes_per_task=4", "eval.splits=[train,test]",
                                    "eval.first_episode_id=100"))
    assert [(entry["split"], entry["task"], entry["episode_id"] + 100) for entry in default] == [
        (entry["split"], entry["task"], entry["episode_id"]) for entry in later]
    assert {entry["episode_id"] for entry in later} == {100, 101, 102, 103}


def test_a_single_task_env_keeps_its_task():
    config = mt10("env.id=vlarl/MetaWorld-reach-v3")
    entries = training_options(config, 0, 0) + training_options(config, 1, 0) + evaluation_options(config)
    assert {entry.get("task", "reach-v3") for entry in entries} == {"reach-v3"}


def test_evaluation_on_another_env_plays_its_tasks_and_splits():
    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny", "env.id=vlarl/MetaWorld-ML45-train-v3",
                          "eval.env_id=vlarl/MetaWorld-ML45-test-v3", "eval.episodes_per_task=2",
                          "eval.splits=[test,semantic]"])
    options = evaluation_options(config)
    held_out = {"bin-picking-v3", "box-close-v3", "hand-insert-v3", "door-lock-v3", "door-unlock-v3"}
    assert {entry["task"] for entry in options} == held_out and len(options) == 5 * 2 * 2
    with pytest.raises(ValueError,
                       match=r"has no split\(s\) \['vision'\]; expected any of \['train', 'test', 'semantic'\]"):
        evaluation_options(load_config(["recipe=metaworld_10_ppo_openpi_tiny", "eval.splits=[vision]"]))


def test_an_evaluation_env_of_other_sizes_is_refused():
    from vlarl_trainer.rl.validation import validate, validate_evaluation_env

    require_simulator("mani_skill")
    config = mt10("eval.env_id=vlarl/ManiSkill-PickCube-v1", "eval.env_kwargs={obs_mode: state}")
    with pytest.raises(ValueError, match="eval.env_id vlarl/ManiSkill-PickCube-v1 has action_dim=7, state_dim=8; "
                                         "the policy trains on vlarl/MetaWorld-MT10-v3 with action_dim=4, state_dim=4"):
        validate_evaluation_env(config, validate(config))


def test_an_evaluation_env_of_its_own_size_gets_its_own_layout():
    """ML45: 90 envs train on 45 tasks, 10 envs score the 5 held-out ones (2 env workers x 5)."""
    from vlarl_trainer.rl.eval_env import evaluation_env
    from vlarl_trainer.rl.validation import validate, validate_evaluation_env

    config = load_config(["recipe=metaworld_45_ppo_openpi_tiny", "job=ml45"])
    assert config.eval.num_envs == 10
    scored = evaluation_env(config)
    assert (scored.env.id, scored.env.num_envs) == ("vlarl/MetaWorld-ML45-test-v3", 10)
    layout = validate(config)
    assert validate_evaluation_env(config, layout).envs_per_stage == 5 and layout.envs_per_stage == 45
    assert evaluation_env(mt10("eval.num_envs=20")).env.num_envs == 20
    training_size = mt10("eval.num_envs=60")  # env.num_envs itself: the training env's workers score
    assert evaluation_env(training_size) is training_size
    with pytest.raises(ValueError, match=r"the evaluation env \(vlarl/MetaWorld-MT10-v3, eval.num_envs=7\): "
                                         r"env.num_envs \(7\) must divide into env workers"):
        validate_evaluation_env(mt10("eval.num_envs=7"), validate(mt10()))
    with pytest.raises(ValueError, match="eval.num_envs must be >= 1, got 0"):
        validate_evaluation_env(mt10("eval.num_envs=0"), validate(mt10()))


def test_a_task_subset_is_what_training_evaluation_and_collection_play():
    from vlarl_trainer.data.collector import collected_tasks

    subset = ["door-open-v3", "window-close-v3"]
    config = mt10("env.num_envs=20", "actor.global_batch_size=200", f"+env.kwargs.tasks=[{','.join(subset)}]",
                  "eval.episodes_per_task=3")
    for step in range(3):
        assert Counter(entry["task"] for entry in training_options(config, step, 0)) == {task: 10 for task in subset}
    assert Counter(entry["task"] for entry in evaluation_options(config)) == {task: 3 for task in subset}
    assert collected_tasks(config) == subset
    assert collected_tasks(mt10(f"+env.kwargs.tasks=[{','.join(subset)}]", "collect.tasks=[window-close-v3]")) == [
        "window-close-v3"]
    assert len(collected_tasks(mt10())) == 10
    with pytest.raises(ValueError, match=r"collect.tasks names task\(s\) \['reach-v3'\] that vlarl/MetaWorld-MT10-v3"):
        collected_tasks(mt10(f"+env.kwargs.tasks=[{','.join(subset)}]", "collect.tasks=[reach-v3]"))


def test_rollout_tasks_are_what_training_plays_while_evaluation_and_collection_keep_every_task():
    from vlarl_trainer.data.collector import collected_tasks
    from vlarl_trainer.rl.validation import validate

    subset = ["door-open-v3", "window-close-v3", "drawer-open-v3", "push-v3", "reach-v3"]
    config = mt10("env.num_envs=20", "actor.global_batch_size=200", f"rollout.tasks=[{','.join(subset)}]",
                  "eval.episodes_per_task=2")
    steps = [training_options(config, step, epoch) for step in range(3) for epoch in range(2)]
    for options in steps:
        assert Counter(entry["task"] for entry in options) == {task: 4 for task in subset}
    for env in range(20):  # 20 envs over 5 tasks: each env keeps one task, one simulator
        assert len({options[env]["task"] for options in steps}) == 1
    assert len({entry["task"] for entry in evaluation_options(config)}) == 10
    assert len(collected_tasks(config)) == 10
    validate(config)
    for tasks, outside in (("[door-open-v3,hammer-v3]", "['hammer-v3']"), ("[push-v3,push-v3]", "[]"), ("[]", "[]")):
        with pytest.raises(ValueError, match="rollout.tasks must be distinct tasks of vlarl/MetaWorld-MT10-v3 .*"
                                             f"of which {re.escape(outside)} it does not play"):
            validate(mt10(f"rollout.tasks={tasks}"))


def test_task_repeats_deal_the_named_tasks_more_often_and_each_env_keeps_its_task():
    from vlarl_trainer.rl.validation import validate

    subset = ["door-open-v3", "window-close-v3", "drawer-open-v3", "push-v3", "reach-v3"]
    config = mt10("env.num_envs=16", "actor.global_batch_size=160", "actor.micro_batch_size=80",
                  f"rollout.tasks=[{','.join(subset)}]", "rollout.task_repeats={door-open-v3: 3,push-v3: 2}")
    steps = [training_options(config, step, epoch) for step in range(3) for epoch in range(2)]
    for options in steps:  # a deal of 8: door-open three times, push twice, the other three once
        assert Counter(entry["task"] for entry in options) == {"door-open-v3": 6, "push-v3": 4, "window-close-v3": 2,
                                                               "drawer-open-v3": 2, "reach-v3": 2}
    for env in range(16):
        assert len({options[env]["task"] for options in steps}) == 1
    validate(config)
    for repeats, outside, below_one in (("{hammer-v3: 2}", "['hammer-v3']", "{}"),
                                        ("{push-v3: 0}", "[]", "{'push-v3': 0}")):
        with pytest.raises(ValueError, match=re.escape(f"of which {outside} are not training tasks and {below_one} "
                                                       "are below 1")):
            validate(mt10(f"rollout.tasks=[{','.join(subset)}]", f"rollout.task_repeats={repeats}"))


def one_stage_of(envs_per_stage: int):
    """One env worker's stage of ``envs_per_stage`` envs and no processes, for ``evaluate`` over
    ``fake_episodes``."""
    from vlarl_trainer.rl.rollout import Shards

    return Shards(env=[None], rollout=None, stage_num=1, envs_per_stage=envs_per_stage)


def fake_episodes(monkeypatch, success_of):
    """``evaluate``'s episodes played by no simulator: each option's success is ``success_of(option)``.
    Returns the evaluation module and the list of each round's tasks, in env order."""
    from vlarl_trainer.rl import evaluation
    from vlarl_trainer.rl.workers.env_worker import EPISODE_STATISTICS

    played = []

    def play(shards, options, chunk_steps, sampling, **kwargs):
        played.append([entry["task"] + ("(idle)" if idle else "") for entry, idle in zip(options, kwargs["idle"])])
        statistics = {name: [0.0] * len(options) for name in EPISODE_STATISTICS}
        return {**statistics, "tasks": [entry["task"] for entry in options],
                "success_once": [success_of(entry) for entry in options]}

    monkeypatch.setattr(evaluation, "run_episodes", play)
    return evaluation, played


def test_an_evaluation_reports_the_mean_of_its_out_of_distribution_splits(monkeypatch):
    """PutOnPlate scored on train, vision and semantic: ood_average is the mean of vision's and semantic's
    success, each split counted once however many episodes it has, and logged as a split of its own."""
    success = {("train", 0): 1.0, ("train", 1): 1.0, ("vision", 0): 1.0, ("vision", 1): 0.0,
               ("semantic", 0): 0.0, ("semantic", 1): 0.0, ("semantic", 2): 0.0, ("semantic", 3): 0.0}
    evaluation, _ = fake_episodes(monkeypatch, lambda entry: success[(entry["split"], entry["episode_id"])])
    options = [{"split": split, "episode_id": episode, "task": "PutOnPlate"} for split, episode in success]
    report = evaluation.evaluate(one_stage_of(2), options, chunk_steps=1, seed=0)
    assert report["splits"] == {"train": 1.0, "vision": 0.5, "semantic": 0.0, "ood_average": 0.25}
    assert report["metrics"]["eval/ood_average/success_once"] == 0.25
    assert report["metrics"]["eval/success_once"] == 3 / 8
    assert "| ood_average | mean of OOD splits | 0.25 |" in evaluation.format_table(None, report)
    in_distribution = evaluation.evaluate(one_stage_of(2), options[:2], chunk_steps=1, seed=0)
    assert in_distribution["splits"] == {"train": 1.0}


def test_an_evaluation_reports_the_unweighted_mean_of_its_groups(monkeypatch):
    """MT50's "Avg." as RLinf reports it: each difficulty group counts once, however many episodes it has
    (three easy episodes, two of them successes, and one failed hard one: 1/3, where the episodes' mean
    is 1/2)."""
    tasks = {"reach-v3": 1.0, "door-open-v3": 1.0, "drawer-open-v3": 0.0, "push-v3": 0.0}
    difficulty = {"reach-v3": "easy", "door-open-v3": "easy", "drawer-open-v3": "easy", "push-v3": "hard"}
    evaluation, _ = fake_episodes(monkeypatch, lambda entry: tasks[entry["task"]])
    options = [{"split": "test", "episode_id": 0, "task": task} for task in tasks]
    report = evaluation.evaluate(one_stage_of(4), options, chunk_steps=1, seed=0,
                                 group_of=lambda task, split, episode_id: difficulty[task])
    assert report["groups"] == {("test", "easy"): pytest.approx(2 / 3), ("test", "hard"): 0.0}
    assert report["metrics"]["eval/test/group_mean_success_once"] == pytest.approx(1 / 3)
    assert report["metrics"]["eval/success_once"] == 0.5
    assert "| test | mean of groups | 0.33 |" in evaluation.format_table(None, report)
    ungrouped = evaluation.evaluate(one_stage_of(4), options, chunk_steps=1, seed=0)
    assert not any("group" in name for name in ungrouped["metrics"])


def test_envs_idle_in_the_last_round_replay_their_first_episode_and_keep_their_task(monkeypatch):
    """Five episodes of five tasks on four envs: the second round has one episode, and the three idle envs
    reset to their first-round options (their own tasks) instead of building simulators of another task,
    and play nothing. Only the listed episodes are reported."""
    evaluation, played = fake_episodes(monkeypatch, lambda entry: 1.0)
    options = [{"split": "test", "episode_id": 0, "task": task} for task in "abcde"]
    report = evaluation.evaluate(one_stage_of(4), options, chunk_steps=1, seed=0)
    assert played == [["a", "b", "c", "d"], ["e", "b(idle)", "c(idle)", "d(idle)"]]
    assert len(report["episodes"]) == 5 and set(report["table"]) == {("test", task) for task in "abcde"}
    short = evaluation.evaluate(one_stage_of(4), options[:2], chunk_steps=1, seed=0)
    assert played[-1] == ["a", "b", "a(idle)", "b(idle)"] and len(short["episodes"]) == 2


def test_training_env_splits_join_another_envs_evaluation_under_their_names(monkeypatch):
    """ML45: scored on its 5 held-out tasks, and with ``eval.training_env_splits={train_test: test}`` on the
    45 tasks it trains on too, as split ``train_test``; the held-out env's own figures stay as they were."""
    from vlarl_envs import family_of
    from vlarl_trainer.rl.eval_env import evaluation_env

    config = load_config(["recipe=metaworld_45_ppo_openpi_tiny", "job=ml45", "eval.episodes_per_task=2",
                          "eval.training_env_splits={train_test: test}"])
    solved = {"reach-v3", "door-open-v3"}
    evaluation, played = fake_episodes(monkeypatch, lambda entry: float(entry["task"] in solved))
    report = evaluation.evaluate(one_stage_of(10), evaluation.evaluation_options(config), chunk_steps=1, seed=0,
                                 group_of=family_of(config.eval.env_id).group)
    held_out = dict(report["metrics"])
    played.clear()
    evaluation.add_training_env_splits(report, config, one_stage_of(90), chunk_steps=1)
    assert {task for round_ in played for task in round_} == set(evaluation.env_tasks(config))
    assert report["splits"] == {"test": 0.0, "train_test": pytest.approx(2 / 45)}
    assert {task for split, task in report["table"] if split == "train_test"} == set(evaluation.env_tasks(config))
    assert report["table"][("train_test", "reach-v3")] == 1.0 and report["table"][("test", "door-lock-v3")] == 0.0
    assert report["metrics"]["eval/train_test/success_once/door-open-v3"] == 1.0
    assert report["metrics"]["eval/train_test/group_success_once/easy"] > 0.0
    assert "eval/train_test/group_mean_success_once" in report["metrics"]
    assert [e["split"] for e in report["episodes"]].count("train_test") == 45 * 2
    assert {key: report["metrics"][key] for key in held_out} == held_out
    assert evaluation_env(config).env.id == "vlarl/MetaWorld-ML45-test-v3"


def test_training_env_splits_are_checked_before_any_worker_starts():
    from vlarl_trainer.rl.validation import validate, validate_evaluation_env

    def check(*overrides):
        config = load_config(["recipe=metaworld_45_ppo_openpi_tiny", "job=ml45", *overrides])
        return validate_evaluation_env(config, validate(config))

    assert check("eval.training_env_splits={train_test: test, train_semantic: semantic}").envs_per_stage == 5
    with pytest.raises(ValueError, match=r"eval.training_env_splits \(\{'test_2': 'test'\}\) scores the training "
                                         r"env beside another evaluation env, but the evaluation plays the training "
                                         r"env vlarl/MetaWorld-MT10-v3"):
        validate_evaluation_env(mt10("eval.training_env_splits={test_2: test}"), validate(mt10()))
    with pytest.raises(ValueError, match=r"vlarl/MetaWorld-ML45-train-v3 has no split\(s\) \['vision'\]; "
                                         r"expected any of \['train', 'test', 'semantic'\]"):
        check("eval.training_env_splits={train_vision: vision}")
    with pytest.raises(ValueError, match=r"the name\(s\) \['test_sample'\] are the evaluation env's own splits'"):
        check("eval.also_sampling=[sample]", "eval.training_env_splits={test_sample: test}")
    with pytest.raises(ValueError, match=r"non-empty and without '/', got \['a/b'\]"):
        check("eval.training_env_splits={a/b: test}")
