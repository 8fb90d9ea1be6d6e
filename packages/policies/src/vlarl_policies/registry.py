"""The policy registry: ``make(name, preset=..., **config)`` and ``from_pretrained(path)``.

Names map to ``"module:Class"`` strings imported on first use, so importing the package stays cheap.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from vlarl_policies.base import CONFIG_FILE, VLAPolicy, read_config, write_directory_atomically
from vlarl_policies.tokenizer import PromptTokenizer, instruction_corpus

POLICIES: dict[str, str] = {
    "pi0": "vlarl_policies.pi0.modeling_pi0:Pi0Policy",
    "pi05": "vlarl_policies.pi0.modeling_pi0:Pi05Policy",
    "openvla": "vlarl_policies.openvla.modeling_openvla:OpenVLAPolicy",
    "openvla_oft": "vlarl_policies.openvla.modeling_openvla_oft:OpenVLAOFTPolicy",
}


def available_policies() -> list[str]:
    return sorted(POLICIES)


def policy_class(name: str) -> type[VLAPolicy]:
    """The policy class registered as ``name``; an unknown name raises ValueError listing the known ones."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; registered policies: {available_policies()}")
    module_name, class_name = POLICIES[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def preset_config(name: str, preset: str, **config: Any) -> tuple[type[VLAPolicy], Any]:
    """The policy class of ``name`` and its config: the ``preset`` field values, then ``config`` on top."""
    cls = policy_class(name)
    if preset not in cls.presets:
        raise ValueError(f"unknown preset {preset!r} for policy {name!r}; available presets: {sorted(cls.presets)}")
    return cls, cls.config_class.from_dict({**cls.presets[preset], **config})


def make(
    name: str,
    preset: str = "base",
    *,
    tokenizer: PromptTokenizer | None = None,
    tokenizer_corpus: Iterable[str] = (),
    device: str | torch.device | None = None,
    **config: Any,
) -> VLAPolicy:
    """A policy with random weights: the ``preset`` sizes (``base`` = published, ``tiny``) plus ``config``.

    Without ``tokenizer`` the policy class trains one (``build_tokenizer``, a byte-level BPE) on an
    instruction corpus plus ``tokenizer_corpus`` (pass the env's task descriptions). ``device``
    allocates the weights there directly, which matters for the published size.
    """
    cls, policy_config = preset_config(name, preset, **config)
    if tokenizer is None:
        tokenizer = cls.build_tokenizer(policy_config, instruction_corpus(tokenizer_corpus))
    with torch.device(device or "cpu"):
        return cls(policy_config, tokenizer)


def from_pretrained(path: str | Path) -> VLAPolicy:
    """Load any policy written by ``save_pretrained``; its ``config.json`` names the class."""
    return saved_class(read_config(Path(path)), Path(path)).from_pretrained(path)


def saved_class(config: Mapping[str, Any], directory: Path) -> type[VLAPolicy]:
    """The policy class that ``config``, the parsed ``config.json`` of ``directory``, names by its type."""
    if "type" not in config:
        raise ValueError(f"{directory / CONFIG_FILE} has no 'type' field naming the policy")
    return policy_class(config["type"])


def resample_saved(source: str | Path, target: str | Path, **settings: Any) -> Path:
    """Write to ``target`` the policy saved at ``source`` with other sampling ``settings``.

    RL chooses its exploration (pi0's flow-SDE ``noise_level``, OpenVLA's ``temperature``) per run, while
    an SFT checkpoint carries whatever its run was made with. Only the config's ``sampling_fields`` may
    change; the weights and tokenizer files are hard-linked (copied where the filesystem cannot link),
    and ``target`` appears whole or not at all. An existing ``target`` raises FileExistsError.
    """
    source, target = Path(source), Path(target)
    saved = read_config(source)
    config_class = saved_class(saved, source).config_class
    others = sorted(set(settings) - set(config_class.sampling_fields))
    if others:
        raise ValueError(f"a saved {saved['type']} policy can change only its sampling settings "
                         f"{list(config_class.sampling_fields)}, got {others}")
    config = config_class.from_dict({**saved, **settings})

    def write(staging: Path) -> None:
        for entry in source.iterdir():
            if entry.name == CONFIG_FILE:
                continue
            if entry.is_dir():
                shutil.copytree(entry, staging / entry.name)
                continue
            try:
                os.link(entry, staging / entry.name)
            except OSError:
                shutil.copy2(entry, staging / entry.name)
        (staging / CONFIG_FILE).write_text(json.dumps(config.to_dict(), indent=2) + "\n")

    return write_directory_atomically(target, write, overwrite=False)
