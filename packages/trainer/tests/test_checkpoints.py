"""Checkpoints record their files' checksums; a resume skips a damaged newest one and keeps it aside."""

import json

import pytest

from vlarl_trainer.config import load_config
from vlarl_trainer.rl import checkpoint as checkpoints
from vlarl_trainer.rl.validation import check_cluster_limits


def fake_actor_save(directory):
    """What an actor's ``save`` leaves in a checkpoint, in miniature."""
    (directory / "policy").mkdir()
    (directory / "policy" / "model.safetensors").write_bytes(b"weights" * 1000)
    (directory / "actor_state.pt").write_bytes(b"optimizer" * 100)


def write(run_dir, step, keep_last=0):
    return checkpoints.write_checkpoint(run_dir, step, fake_actor_save, {"seed": 0}, keep_last=keep_last)


def test_trainer_state_records_every_file(tmp_path):
    checkpoint = write(tmp_path, 5)
    state = checkpoints.read_state(checkpoint)
    assert state["step"] == 5 and state["seed"] == 0
    assert set(state["files"]) == {"policy/model.safetensors", "actor_state.pt"}
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


def test_a_checkpoint_without_recorded_files_counts_as_intact(tmp_path):
    checkpoint = write(tmp_path, 3)
    state = checkpoints.read_state(checkpoint)
    del state["files"]
    (checkpoint / "trainer_state.json").write_text(json.dumps(state))
    assert checkpoints.latest_intact_checkpoint(tmp_path) == checkpoint


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
