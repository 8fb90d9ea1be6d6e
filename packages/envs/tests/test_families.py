"""The family registry: every id has one family, which names its tasks, splits, experts and groups
without building a simulator."""

import subprocess
import sys

import gymnasium as gym
import pytest

import vlarl_envs
from vlarl_envs import EnvFamily, family_of, register_family
from vlarl_envs.metaworld import METAWORLD_TASKS
from vlarl_envs.metaworld.tasks import METAWORLD_DIFFICULTY, difficulty_of


def vlarl_ids() -> list[str]:
    return sorted(env_id for env_id in gym.registry if env_id.startswith("vlarl/"))


def test_every_registered_id_has_exactly_one_family():
    for env_id in vlarl_ids():
        owners = [family.name for family in vlarl_envs.FAMILIES.values() if family.owns(env_id)]
        assert len(owners) == 1, (env_id, owners)
    assert {family.name for family in vlarl_envs.FAMILIES.values()} == {
        "MetaWorld", "ManiSkill", "GSEnv", "LIBERO", "CALVIN"
    }
    assert family_of("vlarl_envs:vlarl/GSEnv-PutCubeOnPlate-v0").name == "GSEnv"


def test_a_family_answers_without_importing_a_simulator():
    code = ("import sys; from vlarl_envs import family_of; "
            "f = family_of('vlarl/ManiSkill-PutOnPlate-v0'); "
            "print(f.tasks('vlarl/ManiSkill-PutOnPlate-v0'), f.splits('vlarl/ManiSkill-PutOnPlate-v0'), "
            "f.group('PutOnPlate', 'execution', 5), "
            "family_of('vlarl/MetaWorld-reach-v3').splits('vlarl/MetaWorld-reach-v3')); "
            "print([m for m in ('mani_skill', 'sapien', 'metaworld', 'mujoco', 'torch') if m in sys.modules])")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.splitlines() == [
        "('PutOnPlate',) ('train', 'vision', 'semantic', 'execution') moved_object ('train', 'test', 'semantic')", "[]"]


def test_metaworld_difficulty_groups_cover_the_fifty_tasks_once():
    grouped = [task for tasks in METAWORLD_DIFFICULTY.values() for task in tasks]
    assert sorted(grouped) == sorted(METAWORLD_TASKS) and len(grouped) == 50
    assert {group: len(tasks) for group, tasks in METAWORLD_DIFFICULTY.items()} == {
        "easy": 28, "medium": 11, "hard": 6, "very_hard": 5}
    family = family_of("vlarl/MetaWorld-MT50-v3")
    assert family.group("pick-place-v3", "test", 3) == "hard" == difficulty_of("pick-place-v3")
    with pytest.raises(ValueError, match="unknown MetaWorld task 'fly-v3'"):
        difficulty_of("fly-v3")


def test_tasks_splits_and_experts_per_id():
    maniskill = family_of("vlarl/ManiSkill-PickCube-v1")
    assert maniskill.tasks("vlarl/ManiSkill-PickCube-v1") == ("PickCube",)
    assert maniskill.splits("vlarl/ManiSkill-PickCube-v1") == ("train", "test", "semantic")
    assert maniskill.group("PickCube", "test", 0) is None
    assert maniskill.group("PutOnPlate", "train", 7) is None
    assert maniskill.group("PutOnPlate", "vision", 7 + 5) == "noise_weak"
    assert maniskill.group("PutOnPlate", "semantic", 5 + 4) == "multi_plate"
    assert maniskill.expert("PushT") is None and maniskill.batched
    with pytest.raises(ValueError, match="no scripted expert for ManiSkill task 'PushT'"):
        maniskill.make_expert("PushT")
    gsenv = family_of("vlarl/GSEnv-PutCubeOnPlate-v0")
    assert (gsenv.tasks("vlarl/GSEnv-PutCubeOnPlate-v0") == ("PutCubeOnPlate",)
            and gsenv.splits("") == ("train", "test", "robustness"))
    assert gsenv.group("PutCubeOnPlate", "robustness", 3 + 2) == "background"
    assert callable(gsenv.make_expert("PutCubeOnPlate"))
    sentence = gsenv.instructions("vlarl/GSEnv-PutCubeOnPlate-v0").canonical("PutCubeOnPlate")
    assert sentence == "pick up the cube and put it on the plate"
    metaworld = family_of("vlarl/MetaWorld-ML45-test-v3")
    assert len(metaworld.tasks("vlarl/MetaWorld-ML45-test-v3")) == 5 and not metaworld.batched


def test_a_metaworld_suite_id_plays_the_subset_its_tasks_keyword_names():
    family = family_of("vlarl/MetaWorld-MT10-v3")
    subset = ["window-close-v3", "door-open-v3"]
    assert family.tasks("vlarl/MetaWorld-MT10-v3", {"tasks": subset}) == tuple(subset)
    assert family.tasks("vlarl/MetaWorld-MT10-v3", {"image_size": 64}) == family.tasks("vlarl/MetaWorld-MT10-v3")
    with pytest.raises(ValueError, match=r"tasks must be distinct tasks of MT10.*unknown: \['hammer-v3'\]"):
        family.tasks("vlarl/MetaWorld-MT10-v3", {"tasks": ["reach-v3", "hammer-v3"]})
    with pytest.raises(ValueError, match="repeated names"):
        family.tasks("vlarl/MetaWorld-MT10-v3", {"tasks": ["reach-v3", "reach-v3"]})
    with pytest.raises(ValueError, match="non-empty list of task names, got 'reach-v3'"):
        family.tasks("vlarl/MetaWorld-MT10-v3", {"tasks": "reach-v3"})
    with pytest.raises(ValueError, match="is the single task 'reach-v3'"):
        family.tasks("vlarl/MetaWorld-reach-v3", {"tasks": subset})


def test_an_unknown_id_or_an_overlapping_family_is_refused():
    with pytest.raises(ValueError, match="'CartPole-v1' belongs to no vlarl env family"):
        family_of("CartPole-v1")
    overlapping = EnvFamily(name="MetaWorldPlus", id_prefix="vlarl/MetaWorld-Plus-", extra="metaworld",
                            tasks=lambda env_id: (), splits=lambda env_id: (), instructions=lambda env_id: None,
                            make_vec=lambda env_id, num_envs, **kwargs: None, batched=False)
    with pytest.raises(ValueError, match="overlap family 'MetaWorld'"):
        register_family(overlapping)
    assert "MetaWorldPlus" not in vlarl_envs.FAMILIES
