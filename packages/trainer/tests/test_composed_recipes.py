"""Every recipe composes from the env/, policy/ and algorithm/ groups to the tree it had: each recipe's entries
that differ from the schema's defaults, with its policy's settings as the policy resolves them (what differs
from its preset), are kept in fixtures/composed_recipes.json. A change there is a change of what a recipe
trains, so it is named in the trainer's CHANGELOG; then rewrite the fixture with

    uv run --locked python packages/trainer/tests/test_composed_recipes.py
"""

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from vlarl_policies.registry import preset_config
from vlarl_trainer.config import VlarlConfig, available_recipes, load_config, to_dict

FIXTURE = Path(__file__).parent / "fixtures" / "composed_recipes.json"


def flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{"env.kwargs.image_size": 64, ...}``: a nested dict as dotted keys (lists stay values)."""
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree}
    return {key: value for name, child in tree.items()
            for key, value in flat(child, f"{prefix}.{name}" if prefix else name).items()}


def policy_settings(tree: dict[str, Any]) -> dict[str, Any]:
    """The fields of the tree's policy config that its ``policy.kwargs`` set to other than the preset's: a
    kwarg restating a default changes nothing a run trains."""
    policy, chunk = tree["policy"], {"action_chunk": tree["env"]["action_chunk"]}
    chosen = preset_config(policy["name"], policy["preset"], **{**policy["kwargs"], **chunk})[1].to_dict()
    preset = preset_config(policy["name"], policy["preset"], **chunk)[1].to_dict()
    return {name: value for name, value in chosen.items() if preset[name] != value}


def recipe_settings(recipe: str) -> dict[str, Any]:
    """The entries of ``recipe=<recipe>``'s composed tree that differ from the schema's defaults, its policy
    kwargs resolved by ``policy_settings``."""
    tree = to_dict(load_config([f"recipe={recipe}"]))
    tree["policy"]["kwargs"] = policy_settings(tree)
    defaults = flat(to_dict(VlarlConfig()))
    return {key: value for key, value in flat(tree).items() if defaults.get(key, "<absent>") != value}


def test_the_fixture_names_every_recipe():
    assert sorted(json.loads(FIXTURE.read_text())) == available_recipes()


@pytest.mark.parametrize("recipe", available_recipes())
def test_each_recipe_composes_to_its_recorded_tree(recipe):
    recorded = json.loads(FIXTURE.read_text())[recipe]
    composed = json.loads(json.dumps(recipe_settings(recipe)))
    changed = {key: (recorded.get(key, "<default>"), composed.get(key, "<default>"))
               for key in sorted(set(recorded) | set(composed))
               if recorded.get(key, "<default>") != composed.get(key, "<default>")}
    assert not changed, f"{recipe} composes otherwise than recorded (recorded, now): {changed}"


def test_a_policy_swapped_on_the_command_line_brings_its_own_settings():
    swapped = load_config(["recipe=metaworld_10_ppo_openpi_tiny", "policy=openvla_oft_tiny"])
    published = load_config(["recipe=metaworld_10_ppo_openvlaoft_tiny"])
    assert swapped.policy.name == "openvla_oft" and swapped.recipe == "metaworld_10_ppo_openpi_tiny"
    for part in ("env", "policy", "algorithm", "rollout", "actor", "cluster", "eval", "runner"):
        assert getattr(swapped, part) == getattr(published, part), part
    grpo = load_config(["recipe=metaworld_10_ppo_openpi_tiny", "algorithm=grpo"])
    assert grpo.algorithm.name == "grpo" and grpo.policy.kwargs["add_value_head"] is False


def test_the_first_job_names_compose_their_family_jobs():
    for alias, job in (("full", "mt10"), ("demo", "mt10_demo")):
        first, named = (load_config(["recipe=metaworld_10_ppo_openpi_tiny", f"job={size}"]) for size in (alias, job))
        assert (first.job.size, named.job.size) == (alias, job)
        assert to_dict(first) | {"job": None} == to_dict(named) | {"job": None}


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps({recipe: recipe_settings(recipe) for recipe in available_recipes()}, indent=1,
                                  sort_keys=True) + "\n")
    print(f"wrote {FIXTURE} ({len(available_recipes())} recipes)", file=sys.stderr)
