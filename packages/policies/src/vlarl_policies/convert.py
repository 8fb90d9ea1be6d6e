"""``vlarl-convert``: published checkpoints to ``policy.pretrained`` directories and back.

    vlarl-convert import pi0 <published dir> <out dir> --action-dim 7 --state-dim 8 \\
        [--tokenizer-dir <dir with tokenizer.json>] [--norm-stats <norm_stats.json>] [--preset base]
    vlarl-convert import openvla_oft <published dir> <out dir> --action-dim 7 --state-dim 8 \\
        --unnorm-key libero_spatial --set use_proprio=true --set action_chunk=8
    vlarl-convert export <policy dir> <out dir>

``import`` reads a published layout with the family's ``load_published`` (openpi-PyTorch or LeRobot
pi0 / pi0.5; Hugging Face OpenVLA or OFT's merged checkpoints) and writes what ``vlarl-train
policy.pretrained=<out dir>`` loads: config.json with the policy's type, norm stats and tokenizer.
``export`` writes a saved policy (an SFT checkpoint, a run's ``checkpoints/step_N/policy``) in its
family's published layout, LoRA adapters merged. Neither overwrites: the output must not exist or be
empty, and it is written under a temporary name, then renamed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import ModuleType

PUBLISHED_FAMILIES = {"pi0": "pi0", "pi05": "pi0", "openvla": "openvla", "openvla_oft": "openvla"}
"""Policy name -> the subpackage whose ``checkpoint`` module reads and writes its published layout."""


def checkpoint_module(name: str) -> ModuleType:
    """The ``load_published`` / ``save_published`` module of policy ``name``."""
    import importlib

    if name not in PUBLISHED_FAMILIES:
        raise ValueError(f"policy {name!r} has no published layout; expected one of {sorted(PUBLISHED_FAMILIES)}")
    return importlib.import_module(f"vlarl_policies.{PUBLISHED_FAMILIES[name]}.checkpoint")


def import_published(name: str, source: Path, out: Path, preset: str, action_dim: int, state_dim: int,
                     tokenizer_dir: Path | None = None, norm_stats: Path | None = None,
                     unnorm_key: str | None = None, settings: dict | None = None) -> Path:
    """A published checkpoint of policy ``name`` as a ``save_pretrained`` directory ``out``; ``settings``
    are further config fields of the architecture (OFT's ``use_proprio``, ``action_chunk``, LoRA)."""
    options: dict = {**(settings or {}), "preset": preset, "tokenizer_dir": tokenizer_dir, "action_dim": action_dim,
                     "state_dim": state_dim}
    if PUBLISHED_FAMILIES.get(name) == "pi0":
        options["norm_stats"] = norm_stats
    elif norm_stats is not None:
        raise ValueError(f"--norm-stats is for pi0 and pi05; a published {name} checkpoint carries them in config.json")
    if PUBLISHED_FAMILIES.get(name) == "openvla":
        options["unnorm_key"] = unnorm_key
    elif unnorm_key is not None:
        raise ValueError(f"--unnorm-key is for openvla and openvla_oft, not {name}")
    policy = checkpoint_module(name).load_published(source, name, **options)
    return policy.save_pretrained(out)


def export_published(policy_dir: Path, out: Path) -> Path:
    """A ``save_pretrained`` directory in its family's published layout at ``out``."""
    from vlarl_policies.registry import from_pretrained

    policy = from_pretrained(policy_dir)
    return checkpoint_module(policy.name).save_published(policy, out)


def parse_settings(pairs: list[str]) -> dict:
    """``["use_proprio=true", "unnorm_key=bridge"]`` -> ``{"use_proprio": True, "unnorm_key": "bridge"}``:
    a value that is not JSON is a string."""
    settings = {}
    for pair in pairs:
        field, separator, value = pair.partition("=")
        if not separator or not field:
            raise ValueError(f"--set takes FIELD=VALUE, got {pair!r}")
        try:
            settings[field] = json.loads(value)
        except json.JSONDecodeError:
            settings[field] = value
    return settings


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(prog="vlarl-convert",
                                    description="Published checkpoints to policy.pretrained directories and back.")
    commands = parse.add_subparsers(dest="command", required=True)
    read = commands.add_parser("import", help="a published checkpoint -> a policy.pretrained directory")
    read.add_argument("policy", choices=sorted(PUBLISHED_FAMILIES))
    read.add_argument("source", type=Path, help="the published checkpoint directory")
    read.add_argument("out", type=Path, help="the policy directory to write (new or empty)")
    read.add_argument("--action-dim", type=int, required=True, help="the env's action size")
    read.add_argument("--state-dim", type=int, required=True, help="the env's state size")
    read.add_argument("--preset", default="base", help="the architecture the weights fill (default: base)")
    read.add_argument("--tokenizer-dir", type=Path, help="where tokenizer.json is, if not in the checkpoint")
    read.add_argument("--norm-stats", type=Path, help="pi0 / pi05: openpi's norm_stats.json")
    read.add_argument("--unnorm-key", help="openvla / openvla_oft: the dataset of config.json's norm_stats")
    read.add_argument("--set", dest="settings", action="append", default=[], metavar="FIELD=VALUE",
                      help="a config field of the architecture, its value as JSON (use_proprio=true, action_chunk=8)")
    write = commands.add_parser("export", help="a policy directory -> its family's published layout")
    write.add_argument("policy_dir", type=Path, help="a save_pretrained directory (SFT checkpoint, step_N/policy)")
    write.add_argument("out", type=Path, help="the published checkpoint directory to write (new or empty)")
    return parse


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "import":
            out = import_published(args.policy, args.source, args.out, args.preset, args.action_dim, args.state_dim,
                                   args.tokenizer_dir, args.norm_stats, args.unnorm_key, parse_settings(args.settings))
        else:
            out = export_published(args.policy_dir, args.out)
    except (ValueError, FileNotFoundError, FileExistsError) as error:
        print(f"vlarl-convert: {error}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
