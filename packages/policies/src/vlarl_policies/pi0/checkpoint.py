"""Loading the published pi0 / pi0.5 PyTorch checkpoints (openpi's port, as LeRobot and RLinf load it).

openpi's ``PI0Pytorch`` nests a ``PaliGemmaForConditionalGeneration`` and a ``GemmaForCausalLM``
under ``paligemma_with_expert``; LeRobot adds a leading ``model.``; checkpoints written with
transformers < 4.52 spell the PaliGemma parts without the inner ``.model``. This module maps all of
these onto our module names and loads strictly: every backbone weight must be there, nothing
unknown may be left, otherwise a ValueError lists the missing and unexpected keys.

Only the RL additions (value head, noise head), the state statistics and LoRA adapters are not
expected in a published checkpoint; they keep their initial values. ``save_published`` writes a
policy back in the published layout (current transformers names, adapters merged, state statistics
as openpi's ``norm_stats.json``), which ``load_published`` reads again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from vlarl_policies.base import describe_key_mismatch, write_directory_atomically
from vlarl_policies.pi0.modeling_pi0 import Pi0Policy
from vlarl_policies.publishing import merged_weights
from vlarl_policies.registry import preset_config
from vlarl_policies.tokenizer import PromptTokenizer

# transformers < 4.52 PaliGemma names -> current names.
LEGACY_RENAMES = (
    ("paligemma_with_expert.paligemma.language_model.model.", "paligemma_with_expert.paligemma.model.language_model."),
    ("paligemma_with_expert.paligemma.language_model.lm_head.", "paligemma_with_expert.paligemma.lm_head."),
    ("paligemma_with_expert.paligemma.vision_tower.", "paligemma_with_expert.paligemma.model.vision_tower."),
    ("paligemma_with_expert.paligemma.multi_modal_projector.",
     "paligemma_with_expert.paligemma.model.multi_modal_projector."),
)
# Published prefix -> our prefix. The action/state/time projections keep their names.
PUBLISHED_TO_OURS = (
    ("paligemma_with_expert.paligemma.model.vision_tower.", "vlm.vision_tower."),
    ("paligemma_with_expert.paligemma.model.multi_modal_projector.linear.", "vlm.projector."),
    ("paligemma_with_expert.paligemma.model.language_model.", "vlm.language_model."),
    ("paligemma_with_expert.gemma_expert.model.", "expert."),
)
# PaliGemma ties its output head to the input embedding; checkpoints may store either name.
TIED_OUTPUT_HEAD = "paligemma_with_expert.paligemma.lm_head.weight"
EMBEDDING = "vlm.language_model.embed_tokens.weight"
# The expert's vocabulary head exists in openpi's module tree but flow matching never reads it.
UNUSED_KEYS = ("paligemma_with_expert.gemma_expert.lm_head.weight",)
# Our additions that a published checkpoint does not have.
NOT_PUBLISHED = ("value_head.", "noise_head.", "observation_encoder.")


def with_prefix_renamed(key: str, renames: tuple[tuple[str, str], ...]) -> str:
    """``key`` with the first of the ``(old, new)`` prefixes it starts with replaced (unchanged if none)."""
    for old, new in renames:
        if key.startswith(old):
            return new + key[len(old):]
    return key


VISION_TOWER = "paligemma_with_expert.paligemma.model.vision_tower."


def with_nested_vision_model(key: str) -> str:
    """A SigLIP key as transformers 4 and the published checkpoints nest it (``vision_tower.vision_model.``);
    transformers 5 writes it without ``vision_model.``."""
    if key.startswith(VISION_TOWER) and not key.startswith(VISION_TOWER + "vision_model."):
        return VISION_TOWER + "vision_model." + key[len(VISION_TOWER):]
    return key


def published_to_ours(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Rename a published state dict to our parameter names; unknown keys pass through unchanged."""
    renamed: dict[str, Tensor] = {}
    for key, value in state.items():
        key = with_nested_vision_model(with_prefix_renamed(key.removeprefix("model."), LEGACY_RENAMES))
        if key in UNUSED_KEYS or key.endswith("embeddings.position_ids"):
            continue
        if key == TIED_OUTPUT_HEAD:
            renamed.setdefault(EMBEDDING, value)
            continue
        renamed[with_prefix_renamed(key, PUBLISHED_TO_OURS)] = value
    return renamed


def load_published_weights(policy: Pi0Policy, state: dict[str, Tensor], source: str) -> None:
    """Copy a published state dict into ``policy``; strict on every backbone weight and its shape."""
    ours = policy.state_dict()
    expected = {
        key.replace(".base_layer.", "."): key
        for key in ours
        if not key.startswith(NOT_PUBLISHED) and ".lora_" not in key
    }
    renamed = published_to_ours(state)
    missing = sorted(set(expected) - set(renamed))
    unexpected = sorted(set(renamed) - set(expected))
    if missing or unexpected:
        raise ValueError(describe_key_mismatch(source, missing, unexpected))
    wrong_shapes = [
        f"{key}: checkpoint {list(value.shape)}, model {list(ours[expected[key]].shape)}"
        for key, value in renamed.items()
        if value.shape != ours[expected[key]].shape
    ]
    if wrong_shapes:
        raise ValueError(f"checkpoint {source} has weights of the wrong shape for this config: {wrong_shapes}")
    with torch.no_grad():
        for key, value in renamed.items():
            ours[expected[key]].copy_(value)


def read_safetensors(directory: Path) -> dict[str, Tensor]:
    """All tensors of ``model.safetensors`` or of the sharded ``*.safetensors`` files in ``directory``."""
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {directory}")
    state: dict[str, Tensor] = {}
    for path in files:
        state.update(load_file(str(path)))
    return state


def read_state_stats(path: Path, use_quantiles: bool) -> dict[str, Any]:
    """State statistics from openpi's ``norm_stats.json``: (q01, q99) for pi0.5, (mean, std) for pi0."""
    stats = json.loads(path.read_text())
    state = stats.get("norm_stats", stats).get("state")
    if state is None:
        raise ValueError(f"{path} has no 'state' statistics")
    names = ("q01", "q99") if use_quantiles else ("mean", "std")
    return {name: state[name] for name in names}


def load_published(
    path: str | Path,
    name: str = "pi0",
    *,
    preset: str = "base",
    tokenizer_dir: str | Path | None = None,
    norm_stats: str | Path | None = None,
    device: str | torch.device | None = None,
    **config: Any,
) -> Pi0Policy:
    """A pi0 / pi0.5 policy with the published weights in ``path`` (a directory of safetensors).

    The architecture is ``preset`` (the published ``base`` by default) of ``name`` plus ``config`` (set at least
    ``action_dim`` and ``state_dim`` for your environment). The tokenizer comes from
    ``tokenizer_dir`` or ``path`` (a ``tokenizer.json``, e.g. PaliGemma's); state statistics from
    ``norm_stats`` (openpi's ``norm_stats.json``) when given. ``device`` allocates the model there
    before the weights are copied in. Returned in eval mode.
    """
    directory = Path(path)
    cls, policy_config = preset_config(name, preset, **config)
    tokenizer_source = Path(tokenizer_dir) if tokenizer_dir is not None else directory
    try:
        tokenizer = PromptTokenizer.load(tokenizer_source)
    except FileNotFoundError as error:
        raise FileNotFoundError(
            f"{error}; pass tokenizer_dir= a directory with the PaliGemma tokenizer.json"
        ) from error
    with torch.device(device or "cpu"):
        policy = cls(policy_config, tokenizer)
    load_published_weights(policy, read_safetensors(directory), source=str(directory))
    if norm_stats is not None:
        policy.set_state_stats(**read_state_stats(Path(norm_stats), use_quantiles=policy_config.state_in_prompt))
    return policy.eval()


NORM_STATS_FILE = "norm_stats.json"


def ours_to_published(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Our parameter names -> openpi-PyTorch's (transformers >= 4.52 spelling); the RL additions
    (value and noise heads, state statistics) are left out."""
    ours_to_theirs = tuple((ours, theirs) for theirs, ours in PUBLISHED_TO_OURS)
    return {with_prefix_renamed(key, ours_to_theirs): value for key, value in state.items()
            if not key.startswith(NOT_PUBLISHED)}


def save_published(policy: Pi0Policy, path: str | Path) -> Path:
    """Write ``policy`` as a published openpi-PyTorch checkpoint to ``path`` (new or empty; written
    under a temporary name, then renamed):
    ``model.safetensors`` (LoRA adapters merged into the policy first), its ``tokenizer.json`` and,
    when the policy holds state statistics, ``norm_stats.json`` ((mean, std) for pi0, (q01, q99) for
    pi0.5). ``load_published(path, name, action_dim=..., state_dim=..., norm_stats=path /
    "norm_stats.json")`` reads it back."""
    weights = ours_to_published(merged_weights(policy))
    normalizer = policy.observation_encoder.state_normalizer
    offset, scale = normalizer.offset.tolist(), normalizer.scale.tolist()
    stats = None
    if any(value != 0.0 for value in offset) or any(value != 1.0 for value in scale):
        stats = ({"q01": [o - s for o, s in zip(offset, scale)], "q99": [o + s for o, s in zip(offset, scale)]}
                 if policy.config.state_in_prompt else {"mean": offset, "std": scale})

    def write(directory: Path) -> None:
        save_file(weights, str(directory / "model.safetensors"))
        policy.tokenizer.save(directory)
        if stats is not None:
            (directory / NORM_STATS_FILE).write_text(json.dumps({"norm_stats": {"state": stats}}, indent=2))

    return write_directory_atomically(Path(path), write, overwrite=False)
