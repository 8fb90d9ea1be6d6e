"""Loading the published OpenVLA checkpoints (Hugging Face ``openvla/openvla-7b``) and OFT's merged ones.

The directory holds what ``save_pretrained`` of OpenVLA's remote code writes:

- ``config.json``: ``norm_stats`` (per dataset: action q01 / q99 / mask, for OFT also proprio),
  ``n_action_bins``, ``text_config`` (Llama; ``vocab_size`` 32,064 = the tokenizer's 32,000 ids
  padded by ``pad_to_multiple_of`` 64), ``image_sizes``, ``timm_model_ids``;
- the weights, in ``model.safetensors`` or sharded with ``model.safetensors.index.json``, under
  ``vision_backbone.featurizer.*`` (DINOv2), ``vision_backbone.fused_featurizer.*`` (SigLIP),
  ``projector.fc1/fc2/fc3``, ``language_model.model.*`` and ``language_model.lm_head``, with timm's
  LayerScale ``gamma`` stored as ``scale_factor``;
- ``tokenizer.json`` and ``tokenizer_config.json`` (Llama 2's, BOS ``<s>``, PAD ``<PAD>``).

OpenVLA-OFT's fine-tuning merges its LoRA adapters into the same layout; its proprio projector
comes either inside the weights (``proprio_projector.fc1/fc2``) or as OFT's separate
``proprio_projector--<step>_checkpoint.pt``. Loading is strict: every VLA weight must be there with
its shape, nothing unknown may be left, else a ValueError lists the differences. The value head and
the state statistics are not part of a published VLA (RLinf's RL checkpoints carry a critic of
another layout, which is skipped); they keep their initial values, and so does a proprio projector
the checkpoint lacks (OFT fine-tuning starts one on top of openvla-7b).

``save_published`` writes a policy back in this layout (LoRA adapters merged, the proprio projector
inside the weights as in OFT's merged checkpoints), which ``load_published`` reads again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from vlarl_policies.base import CONFIG_FILE, describe_key_mismatch, write_directory_atomically
from vlarl_policies.openvla.modeling_openvla import OpenVLAPolicy
from vlarl_policies.openvla.prismatic import DINO_MODEL, SIGLIP_MODEL
from vlarl_policies.publishing import merged_weights
from vlarl_policies.registry import preset_config
from vlarl_policies.tokenizer import PromptTokenizer

INDEX_FILE = "model.safetensors.index.json"
PROPRIO_FILE_PATTERN = "proprio_projector--*.pt"
# Our modules a published VLA may lack; they keep their initial values then.
OPTIONAL_PREFIXES = ("value_head.", "observation_encoder.", "proprio_projector.")
# Published keys that are not weights of this model.
SKIPPED_PREFIXES = ("value_head.",)
# Llama's ``text_config`` names -> our config fields.
TEXT_CONFIG_FIELDS = (
    ("hidden_size", "llm_width"),
    ("intermediate_size", "llm_mlp_dim"),
    ("num_hidden_layers", "llm_depth"),
    ("num_attention_heads", "llm_heads"),
    ("num_key_value_heads", "llm_kv_heads"),
    ("rms_norm_eps", "rms_norm_eps"),
    ("max_position_embeddings", "max_position_embeddings"),
)


def config_from_published(published: Mapping[str, Any]) -> dict[str, Any]:
    """Our config fields from a published ``config.json``; an architecture we do not build raises ValueError."""
    if published.get("use_fused_vision_backbone") is False:
        raise ValueError("the checkpoint has a single vision backbone; only the fused DINOv2 + SigLIP one "
                         "(vision_backbone_id dinosiglip-vit-so-224px) is supported")
    timm_ids = [name.split(".")[0] for name in published.get("timm_model_ids", [DINO_MODEL, SIGLIP_MODEL])]
    if timm_ids != [DINO_MODEL, SIGLIP_MODEL]:
        raise ValueError(f"the checkpoint's vision backbones are {timm_ids}; supported: {[DINO_MODEL, SIGLIP_MODEL]}")
    fields: dict[str, Any] = {"n_action_bins": published.get("n_action_bins", 256),
                              "norm_stats": published.get("norm_stats")}
    image_sizes = published.get("image_sizes")
    if image_sizes:
        if len(set(image_sizes)) != 1:
            raise ValueError(f"both vision backbones must read one image size, the checkpoint has {image_sizes}")
        fields["image_size"] = image_sizes[0]
    text = published.get("text_config", {})
    for theirs, ours in TEXT_CONFIG_FIELDS:
        if theirs in text:
            fields[ours] = text[theirs]
    if "vocab_size" in text:
        fields["vocab_size"] = text["vocab_size"]
        fields["tokenizer_vocab_size"] = text["vocab_size"] - published.get("pad_to_multiple_of", 0)
    return fields


def published_to_ours(key: str) -> str | None:
    """Our parameter name of a published key, or None for keys that are not weights of this model."""
    if key.startswith(SKIPPED_PREFIXES) or key.endswith("rotary_emb.inv_freq"):
        return None
    if key.startswith("vision_backbone.") and key.endswith(".scale_factor"):
        return key.removesuffix(".scale_factor") + ".gamma"
    return key


def weight_files(directory: Path) -> list[Path]:
    """The safetensors files of a checkpoint: those its index lists, else ``*.safetensors``."""
    index = directory / INDEX_FILE
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        files = [directory / name for name in sorted(set(weight_map.values()))]
        absent = [str(path) for path in files if not path.is_file()]
        if absent:
            raise FileNotFoundError(f"{index} lists shards that are not there: {absent}")
        return files
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights (nor {INDEX_FILE}) in {directory}")
    return files


def published_tensors(directory: Path) -> Iterator[dict[str, Tensor]]:
    """The checkpoint's tensors one file at a time (a 7B model never sits in memory twice), then OFT's
    separate proprio projector file if there is one."""
    for path in weight_files(directory):
        yield load_file(str(path))
    for path in sorted(directory.glob(PROPRIO_FILE_PATTERN)):
        state = torch.load(path, map_location="cpu", weights_only=True)
        yield {f"proprio_projector.{key.removeprefix('module.')}": value for key, value in state.items()}


def load_published_weights(policy: OpenVLAPolicy, directory: Path) -> None:
    """Copy a published checkpoint into ``policy``; strict on every VLA weight and its shape."""
    ours = policy.state_dict()
    by_published_name = {key.replace(".base_layer.", "."): key for key in ours if ".lora_" not in key}
    required = {name for name in by_published_name if not name.startswith(OPTIONAL_PREFIXES)}
    found: set[str] = set()
    unexpected: list[str] = []
    wrong_shapes: list[str] = []
    with torch.no_grad():
        for state in published_tensors(directory):
            for published_key, value in state.items():
                key = published_to_ours(published_key)
                if key is None:
                    continue
                if key not in by_published_name:
                    unexpected.append(key)
                    continue
                found.add(key)
                target = ours[by_published_name[key]]
                if value.shape != target.shape:
                    wrong_shapes.append(f"{key}: checkpoint {list(value.shape)}, model {list(target.shape)}")
                    continue
                target.copy_(value)
    missing = sorted(required - found)
    if missing or unexpected:
        raise ValueError(describe_key_mismatch(str(directory), missing, sorted(unexpected)))
    if wrong_shapes:
        raise ValueError(f"checkpoint {directory} has weights of the wrong shape for this config: {wrong_shapes}")


def load_published(
    path: str | Path,
    name: str = "openvla",
    *,
    preset: str = "base",
    tokenizer_dir: str | Path | None = None,
    unnorm_key: str | None = None,
    device: str | torch.device | None = None,
    **config: Any,
) -> OpenVLAPolicy:
    """An ``openvla`` or ``openvla_oft`` policy with the published weights in ``path``.

    The architecture is ``preset`` (the published ``base`` by default), then what the checkpoint's
    ``config.json`` says (Llama sizes, vocabulary, image size, ``norm_stats``), then ``config`` (set
    at least ``action_dim`` and ``state_dim`` for your environment). The tokenizer comes from
    ``tokenizer_dir`` or ``path``. ``unnorm_key`` picks the dataset whose statistics ``unnormalize``
    uses and, for an OFT policy with ``use_proprio``, whose proprio q01/q99 normalize the state.
    ``device`` allocates the model there before the weights are copied in. Returned in eval mode.
    """
    directory = Path(path)
    config_path = directory / CONFIG_FILE
    if not config_path.is_file():
        raise FileNotFoundError(f"no {CONFIG_FILE} in {directory}: not a published OpenVLA checkpoint")
    published = config_from_published(json.loads(config_path.read_text()))
    cls, policy_config = preset_config(name, preset, **{**published, "unnorm_key": unnorm_key, **config})
    tokenizer_source = Path(tokenizer_dir) if tokenizer_dir is not None else directory
    try:
        tokenizer = PromptTokenizer.load(tokenizer_source)
    except FileNotFoundError as error:
        raise FileNotFoundError(f"{error}; pass tokenizer_dir= a directory with OpenVLA's tokenizer.json") from error
    with torch.device(device or "cpu"):
        policy = cls(policy_config, tokenizer)
    load_published_weights(policy, directory)
    proprio = _proprio_stats(policy_config.norm_stats or {}, policy_config.unnorm_key)
    if policy.reads_states and getattr(policy_config, "use_proprio", False) and proprio is not None:
        policy.set_state_stats(q01=proprio["q01"], q99=proprio["q99"])
    return policy.eval()


def _proprio_stats(norm_stats: Mapping[str, Any], unnorm_key: str | None) -> Mapping[str, Any] | None:
    """The proprio statistics of the chosen (or only) dataset, if the checkpoint has them."""
    if unnorm_key is None and len(norm_stats) != 1:
        return None
    dataset = norm_stats[unnorm_key if unnorm_key is not None else next(iter(norm_stats))]
    proprio = dataset.get("proprio")
    return proprio if proprio is not None and "q01" in proprio and "q99" in proprio else None


# Our modules that a published VLA does not hold.
NOT_PUBLISHED = ("value_head.", "observation_encoder.")


def ours_to_published_key(key: str) -> str | None:
    """The published name of one of our parameters (timm's ``gamma`` is OpenVLA's ``scale_factor``),
    or None for what a published VLA does not hold."""
    if key.startswith(NOT_PUBLISHED):
        return None
    if key.startswith("vision_backbone.") and key.endswith(".gamma"):
        return key.removesuffix(".gamma") + ".scale_factor"
    return key


def published_config(policy: OpenVLAPolicy) -> dict[str, Any]:
    """The ``config.json`` fields ``config_from_published`` reads, for ``policy``'s architecture."""
    config = policy.config
    text = {theirs: getattr(config, ours) for theirs, ours in TEXT_CONFIG_FIELDS}
    return {
        "norm_stats": config.norm_stats,
        "n_action_bins": config.n_action_bins,
        "use_fused_vision_backbone": True,
        "timm_model_ids": [DINO_MODEL, SIGLIP_MODEL],
        "image_sizes": [config.image_size, config.image_size],
        "text_config": {**text, "vocab_size": config.vocab_size},
        "pad_to_multiple_of": config.vocab_size - config.tokenizer_vocab_size,
    }


def save_published(policy: OpenVLAPolicy, path: str | Path) -> Path:
    """Write ``policy`` as a published OpenVLA (or OFT merged) checkpoint to ``path`` (new or empty;
    written under a temporary name, then renamed):
    ``config.json``, ``model.safetensors`` (LoRA adapters merged into the policy first; an OFT proprio
    projector inside it) and the tokenizer. ``load_published(path, name, action_dim=..., state_dim=...)``
    reads it back."""
    weights = {published: value for key, value in merged_weights(policy).items()
               if (published := ours_to_published_key(key)) is not None}

    def write(directory: Path) -> None:
        save_file(weights, str(directory / "model.safetensors"))
        (directory / CONFIG_FILE).write_text(json.dumps(published_config(policy), indent=2))
        policy.tokenizer.save(directory)

    return write_directory_atomically(Path(path), write, overwrite=False)
