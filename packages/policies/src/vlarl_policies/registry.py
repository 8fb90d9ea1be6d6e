"""The policy registry: ``make(name, preset=..., **config)`` and ``from_pretrained(path)``.

Names map to ``"module:Class"`` strings imported on first use, so importing the package stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from vlarl_policies.base import VLAPolicy, read_config
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
    config = read_config(Path(path))
    if "type" not in config:
        raise ValueError(f"{Path(path) / 'config.json'} has no 'type' field naming the policy")
    return policy_class(config["type"]).from_pretrained(path)
