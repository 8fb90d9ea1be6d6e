import pytest

from vlarl_trainer.rl.placement import device_count, parse_component_placement, parse_placement


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0-3", [(0,), (1,), (2,), (3,)]),
        ("5", [(5,)]),
        (2, [(2,)]),
        ("0-1:0-3", [(0,), (0,), (1,), (1,)]),
        ("0-3:0-1", [(0, 1), (2, 3)]),
        ("0-1:0-3,3-5,7-10:7-14",
         [(0,), (0,), (1,), (1,), (3,), (4,), (5,)] + [(d,) for d in (7, 7, 8, 8, 9, 9, 10, 10)]),
    ],
)
def test_parse_placement(text, expected):
    assert parse_placement(text, num_devices=16) == expected


def test_all_means_every_device():
    assert parse_placement("all", num_devices=3) == [(0,), (1,), (2,)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("a-b", "expected a rank"),
        ("3-1", "backwards"),
        ("0-2:0-1", "do not divide"),
        ("0-1:2-3", "contiguous"),
        ("0:all", "devices only"),
        ("0-20", "does not exist"),
    ],
)
def test_placement_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_placement(text, num_devices=8, what="placement of 'env'")


def test_all_needs_a_device_count():
    with pytest.raises(ValueError, match="number of devices"):
        parse_placement("all")


def test_component_placement_forms():
    placed = parse_component_placement({"env,rollout,actor": "all"}, num_devices=2)
    assert placed == {"env": [(0,), (1,)], "rollout": [(0,), (1,)], "actor": [(0,), (1,)]}
    placed = parse_component_placement({"env": "0-3", "rollout": "4-7", "actor": "0-7"})
    assert len(placed["actor"]) == 8 and device_count(placed) == 8


def test_a_key_naming_fewer_components_wins_in_either_order():
    shared_then_env = parse_component_placement({"env,rollout,actor": 0, "env": "0:0-1"})
    env_then_shared = parse_component_placement({"env": "0:0-1", "env,rollout,actor": 0})
    assert shared_then_env == env_then_shared == {"env": [(0,), (0,)], "rollout": [(0,)], "actor": [(0,)]}


@pytest.mark.parametrize(
    "placement, message",
    [
        ({"env": 0, "rollout": 0}, "no placement for \\['actor'\\]"),
        ({"env,rollout": 0, "rollout,actor": 0}, "placed twice"),
        ({"env,rollout,actor": 0, "env,rollout": 1, "rollout,actor": 1}, "'rollout' is placed twice"),
        ({"env,rollout,actor": 0, "critic": 1}, "unknown component 'critic'"),
    ],
)
def test_component_placement_errors(placement, message):
    with pytest.raises(ValueError, match=message):
        parse_component_placement(placement)


def test_rlinfs_shared_placement_runs_on_this_machines_devices():
    """RLinf's examples place everything everywhere (``"env,rollout,actor": all``): on a machine without
    GPUs that is one device, the CPU; ``cluster.num_devices`` says how many devices a cluster has."""
    import torch

    from vlarl_trainer.config import load_config
    from vlarl_trainer.rl.validation import placement_devices

    shared = ["recipe=metaworld_10_ppo_openpi_tiny", r"cluster.component_placement={env\,rollout\,actor: all}"]
    assert placement_devices(load_config(shared)) == max(1, torch.cuda.device_count())
    eight = load_config([*shared, "cluster.num_devices=8"])
    assert parse_component_placement(eight.cluster.component_placement, placement_devices(eight))["actor"] == [
        (device,) for device in range(8)]
    with pytest.raises(ValueError, match="cluster.num_devices must be >= 1, got 0"):
        placement_devices(load_config([*shared, "cluster.num_devices=0"]))

