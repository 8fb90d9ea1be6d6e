"""The dry run's memory table for every published-size recipe, without any checkpoint: one actor
rank's figures as ``vlarl-train recipe=<recipe> --dry-run`` prints them, one row a recipe:

    uv run --locked python benchmarks/published_memory.py
    uv run --locked python benchmarks/published_memory.py --recipes metaworld_50_ppo_openpi \\
        --overrides actor.gradient_checkpointing=false
"""

from __future__ import annotations

import argparse

import yaml

from vlarl_trainer.config import CONFIG_MODULE, load_config
from vlarl_trainer.rl.memory import estimate_config_memory

GIB = 2**30


def published_recipes() -> list[str]:
    """Recipes whose policy is the published size (``preset: base``, directly or through defaults)."""
    import importlib.resources

    folder = importlib.resources.files(CONFIG_MODULE) / "recipe"
    names = sorted(entry.name.removesuffix(".yaml") for entry in folder.iterdir() if entry.name.endswith(".yaml"))
    return [name for name in names if load_config([f"recipe={name}"]).policy.preset == "base"]


def estimate_row(recipe: str, overrides: list[str]) -> str:
    config = load_config([f"recipe={recipe}", *overrides])
    layout, memory, parameters = estimate_config_memory(config)
    actor = config.actor
    settings = (f"{actor.strategy} x{layout.actor_workers}, {actor.precision}, micro {actor.micro_batch_size}"
                f"{', ckpt' if actor.gradient_checkpointing else ''}{', offload' if actor.offload else ''}")
    figures = [memory.parameters, memory.gradients, memory.optimizer, memory.activations, memory.peak]
    cells = " | ".join(f"{size / GIB:.1f}" for size in figures)
    return f"| {recipe} | {config.policy.name} {parameters / 1e9:.2f} B | {settings} | {cells} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipes", nargs="+", default=None, help="default: every published-size recipe")
    parser.add_argument("--overrides", nargs="*", default=[], help="key=value applied to every recipe")
    args = parser.parse_args()
    recipes = args.recipes or published_recipes()
    print(f"overrides: {yaml.safe_dump(args.overrides, default_flow_style=True).strip()}\n")
    print("| recipe | policy | actor | parameters | gradients | AdamW | activations | peak (GiB per rank) |")
    print("|---|---|---|---|---|---|---|---|")
    for recipe in recipes:
        print(estimate_row(recipe, args.overrides), flush=True)


if __name__ == "__main__":
    main()
