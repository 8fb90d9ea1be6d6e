"""Checkpoints record their files' checksums; a resume skips a damaged newest one and keeps it aside."""

import json

import pytest

from vlarl_trainer.config import load_config
from vlarl_trainer.rl import checkpoint as checkpoints
from vlarl_trainer.rl.validation import check_cluster_limits


def fake_actor_save(directory):
    """What an actor's ``save`` leaves in a checkpoint, in miniature."""
    (directory / "policy").mkdir()
    (directory / "policy" / "config.json").write_text('{"type": "pi0"}')
    (directory / "policy" / "model.safetensors").write_bytes(b"weights" * 1000)
    (directory / "actor_state.pt").write_bytes(b"optimizer" * 100)


def write(run_dir, step, keep_last=0):
    return checkpoints.write_checkpoint(run_dir, step, fake_actor_save, {"seed": 0}, keep_last=keep_last)


def test_trainer_state_records_every_file(tmp_path):
    checkpoint = write(tmp_path, 5)
    state = checkpoints.read_state(checkpoint)
    assert state["step"] == 5 and state["seed"] == 0
    assert set(state["files"]) == {"policy/config.json", "policy/model.safetensors", "actor_state.pt"}
    assert state["files"]["actor_state.pt"]["bytes"] == 900
    assert checkpoints.damage(checkpoint) == []


@pytest.mark.parametrize("harm, problem", [
    (lambda c: (c / "policy" / "model.safetensors").write_bytes(b"weights" * 10), "has 70 bytes, 7000 written"),
    (lambda c: (c / "policy" / "model.safetensors").write_bytes(b"Weights" * 1000), "differs from its checksum"),
    (lambda c: (c / "actor_state.pt").unlink(), "actor_state.pt missing"),
    (lambda c: (c / "trainer_state.json").write_text("{"), "trainer_state.json unreadable"),
])
def test_a_damaged_newest_checkpoint_is_moved_aside_and_the_one_before_resumes(tmp_path, harm, problem):
    write(tmp_path, 5)
    newest = write(tmp_path, 10)
    harm(newest)
    reports = []
    assert checkpoints.latest_intact_checkpoint(tmp_path, reports.append) == tmp_path / "checkpoints" / "step_5"
    assert len(reports) == 1 and "step_10 is damaged" in reports[0] and problem in reports[0]
    aside = tmp_path / "checkpoints" / "step_10.damaged"
    assert aside.exists() and not newest.exists()
    write(tmp_path, 10)  # the resumed run writes the step anew
    harm(newest)
    assert checkpoints.latest_intact_checkpoint(tmp_path, reports.append).name == "step_5"
    assert (tmp_path / "checkpoints" / "step_10.damaged-2").exists() and aside.exists()  # nothing overwritten


def test_a_checkpoint_without_recorded_files_or_without_policy_and_actor_state_is_damaged(tmp_path):
    write(tmp_path, 2)
    checkpoint = write(tmp_path, 3)
    state = checkpoints.read_state(checkpoint)
    del state["files"]
    (checkpoint / "trainer_state.json").write_text(json.dumps(state))
    assert checkpoints.damage(checkpoint) == ["trainer_state.json records no files"]
    empty = checkpoints.write_checkpoint(tmp_path, 4, lambda directory: None, {"seed": 0})
    assert checkpoints.damage(empty) == ["policy/config.json not recorded", "actor_state.pt not recorded"]
    reports = []
    assert checkpoints.latest_intact_checkpoint(tmp_path, reports.append).name == "step_2"
    assert len(reports) == 2


def test_a_writer_killed_before_the_rename_leaves_the_last_checkpoint_and_no_new_one(tmp_path, monkeypatch):
    write(tmp_path, 5)

    def crash(*args):
        raise OSError("killed")

    monkeypatch.setattr(checkpoints.os, "replace", crash)
    with pytest.raises(OSError, match="killed"):
        write(tmp_path, 10, keep_last=1)
    monkeypatch.undo()
    assert checkpoints.latest_intact_checkpoint(tmp_path).name == "step_5"
    assert not (tmp_path / "checkpoints" / "step_10").exists()
    assert write(tmp_path, 10, keep_last=1).name == "step_10"  # the next attempt clears the partial folder
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_10"]


def test_every_file_and_folder_is_flushed_before_the_rename_and_the_rename_after_it(tmp_path, monkeypatch):
    events = []
    monkeypatch.setattr(checkpoints, "fsync_file", lambda path: events.append(("file", path.name)))
    monkeypatch.setattr(checkpoints, "fsync_directory", lambda path: events.append(("folder", path.name)))
    real_replace = checkpoints.os.replace
    monkeypatch.setattr(checkpoints.os, "replace",
                        lambda source, target: (events.append(("rename", target.name)), real_replace(source, target)))
    write(tmp_path, 7)
    rename = events.index(("rename", "step_7"))
    flushed = set(events[:rename])
    names = ("config.json", "model.safetensors", "actor_state.pt", "trainer_state.json")
    assert {("file", name) for name in names} <= flushed
    assert {("folder", "policy"), ("folder", ".step_7.partial")} <= flushed
    assert events[rename + 1:] == [("folder", "checkpoints")]


def test_keep_last_prunes_the_oldest(tmp_path):
    for step in (1, 2, 3, 4):
        write(tmp_path, step, keep_last=2)
    assert [step for step, _ in checkpoints.complete_checkpoints(tmp_path)] == [3, 4]
    for step in (5, 6):
        write(tmp_path, step)
    assert [step for step, _ in checkpoints.complete_checkpoints(tmp_path)] == [3, 4, 5, 6]


@pytest.mark.parametrize("keep_last", [1, -1])
def test_keep_last_must_leave_a_predecessor(keep_last):
    config = load_config(["recipe=metaworld_10_ppo_openpi_tiny", f"runner.keep_last={keep_last}"])
    with pytest.raises(ValueError, match=f"runner.keep_last must be 0 .* or >= 2 .*got {keep_last}"):
        check_cluster_limits(config)


class PlantedCall:
    """A pickled object whose unpickling would touch a file: what a tampered checkpoint could hold."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (type(self.marker).touch, (self.marker,))


def test_an_actor_state_holding_other_pickled_objects_is_refused_unrun(tmp_path):
    import torch

    from vlarl_trainer.rl.workers.actor_worker import load_actor_state

    intact = tmp_path / "intact.pt"
    torch.save({"optimizer": {"state": {"w": {"exp_avg": torch.ones(2)}}, "param_groups": [{"lr": 1e-4}]},
                "scheduler": {"base_lrs": [1e-4], "lr_lambdas": [None]}, "master_weights": {}}, intact)
    assert load_actor_state(str(intact))["optimizer"]["param_groups"] == [{"lr": 1e-4}]
    marker = tmp_path / "ran"
    tampered = tmp_path / "actor_state.pt"
    torch.save({"optimizer": PlantedCall(marker), "scheduler": {}, "master_weights": {}}, tampered)
    with pytest.raises(ValueError, match="actor_state.pt: expected an actor state of tensors.*is not loaded"):
        load_actor_state(str(tampered))
    assert not marker.exists()


def test_a_writer_killed_between_any_two_of_its_steps_leaves_an_intact_checkpoint(tmp_path, monkeypatch):
    """Kill the writer at each of its file-system steps in turn (fsyncs, the rename, the pruning): the
    newest intact checkpoint is then the previous one or the new one, whole, and the next write succeeds."""
    real = {"fsync_file": checkpoints.fsync_file, "fsync_directory": checkpoints.fsync_directory,
            "replace": checkpoints.os.replace, "rmtree": checkpoints.shutil.rmtree}
    calls = []

    def counting(name, kill_at):
        def step(*args):
            calls.append(name)
            if len(calls) == kill_at:
                raise KeyboardInterrupt(f"killed at {name}")
            return real[name](*args)
        return step

    def patch(kill_at):
        calls.clear()
        monkeypatch.setattr(checkpoints, "fsync_file", counting("fsync_file", kill_at))
        monkeypatch.setattr(checkpoints, "fsync_directory", counting("fsync_directory", kill_at))
        monkeypatch.setattr(checkpoints.os, "replace", counting("replace", kill_at))
        monkeypatch.setattr(checkpoints.shutil, "rmtree", counting("rmtree", kill_at))

    run = tmp_path / "unbroken"
    run.mkdir()
    write(run, 5)
    patch(kill_at=0)
    write(run, 10, keep_last=1)
    steps = len(calls)
    assert "replace" in calls and calls[-1] == "rmtree"
    for kill_at in range(1, steps + 1):
        monkeypatch.undo()
        run = tmp_path / f"killed-{kill_at}"
        run.mkdir()
        write(run, 5)
        patch(kill_at)
        with pytest.raises(KeyboardInterrupt):
            write(run, 10, keep_last=1)
        monkeypatch.undo()
        newest = checkpoints.latest_intact_checkpoint(run, report=pytest.fail)
        assert newest is not None and newest.name in ("step_5", "step_10")
        renamed = calls.index("replace") < kill_at - 1 if "replace" in calls else False
        assert newest.name == ("step_10" if renamed else "step_5")
        write(run, 15, keep_last=1)
        assert checkpoints.latest_intact_checkpoint(run).name == "step_15"
