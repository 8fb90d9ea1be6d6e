"""Loading the published pi0 / pi0.5 PyTorch layout, exercised with tiny models written in that layout.

The layout is built here the way openpi's ``PI0Pytorch`` builds it, from transformers' own
``PaliGemmaForConditionalGeneration`` and ``GemmaForCausalLM`` (expert embedding removed, pi0.5's
norms replaced by a ``dense`` modulation layer), and saved with ``safetensors.torch.save_model`` as
openpi's converter does. The parameter names therefore come from transformers, not from our table.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file, save_model
from torch import nn
from transformers import (
    GemmaConfig,
    GemmaForCausalLM,
    PaliGemmaConfig,
    PaliGemmaForConditionalGeneration,
    SiglipVisionConfig,
)

import vlarl_policies
from vlarl_policies.pi0 import load_published
from vlarl_policies.registry import preset_config
from vlarl_policies.tokenizer import instruction_corpus

STATE_DIM, ACTION_DIM = 5, 3


class AdaptiveNorm(nn.Module):
    """openpi's adaRMS parameter layout: only a ``dense`` layer producing scale, shift and gate."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.dense = nn.Linear(width, 3 * width)


def openpi_layout(name: str) -> tuple[nn.Module, vlarl_policies.PolicyConfig]:
    """A tiny randomly initialised module tree with openpi's ``PI0Pytorch`` parameter names."""
    _, config = preset_config(name, "tiny", action_dim=ACTION_DIM, state_dim=STATE_DIM)
    text = GemmaConfig(vocab_size=config.vocab_size, hidden_size=config.vlm_width,
                       intermediate_size=config.vlm_mlp_dim, num_hidden_layers=config.depth,
                       num_attention_heads=config.num_heads, num_key_value_heads=config.num_kv_heads,
                       head_dim=config.head_dim)
    vision = SiglipVisionConfig(hidden_size=config.vision_width, intermediate_size=config.vision_mlp_dim,
                                num_hidden_layers=config.vision_depth, num_attention_heads=config.vision_heads,
                                image_size=config.image_size, patch_size=config.patch_size, vision_use_head=False)
    paligemma_config = PaliGemmaConfig(vision_config=vision.to_dict(), text_config=text.to_dict(),
                                       projection_dim=config.vlm_width, vocab_size=config.vocab_size)
    expert_config = GemmaConfig(vocab_size=config.vocab_size, hidden_size=config.expert_width,
                                intermediate_size=config.expert_mlp_dim, num_hidden_layers=config.depth,
                                num_attention_heads=config.num_heads, num_key_value_heads=config.num_kv_heads,
                                head_dim=config.head_dim)
    root = nn.Module()
    root.paligemma_with_expert = nn.Module()
    root.paligemma_with_expert.paligemma = PaliGemmaForConditionalGeneration(paligemma_config)
    expert = GemmaForCausalLM(expert_config)
    expert.model.embed_tokens = None
    width = config.expert_width
    if name == "pi05":
        for layer in expert.model.layers:
            layer.input_layernorm, layer.post_attention_layernorm = AdaptiveNorm(width), AdaptiveNorm(width)
        expert.model.norm = AdaptiveNorm(width)
        root.time_mlp_in, root.time_mlp_out = nn.Linear(width, width), nn.Linear(width, width)
    else:
        root.state_proj = nn.Linear(config.max_state_dim, width)
        root.action_time_mlp_in, root.action_time_mlp_out = nn.Linear(2 * width, width), nn.Linear(width, width)
    root.paligemma_with_expert.gemma_expert = expert
    root.action_in_proj = nn.Linear(config.max_action_dim, width)
    root.action_out_proj = nn.Linear(width, config.max_action_dim)
    for parameter in root.parameters():
        nn.init.normal_(parameter, std=0.05)
    return root, config


def write_checkpoint(directory, layout: nn.Module) -> None:
    directory.mkdir()
    save_model(layout, str(directory / "model.safetensors"))
    vlarl_policies.PromptTokenizer.train(instruction_corpus(), vocab_size=512).save(directory)


def load_tiny(directory, name: str, **kwargs):
    return load_published(directory, name, preset="tiny", action_dim=ACTION_DIM, state_dim=STATE_DIM, **kwargs)


@pytest.mark.parametrize("name", ["pi0", "pi05"])
def test_published_layout_lands_on_the_right_parameters(tmp_path, make_obs, name):
    layout, _ = openpi_layout(name)
    write_checkpoint(tmp_path / "ckpt", layout)
    policy = load_tiny(tmp_path / "ckpt", name)
    source = layout.paligemma_with_expert
    tower = source.paligemma.model.vision_tower
    vision = getattr(tower, "vision_model", tower)  # transformers 5's SiglipVisionModel holds its layers itself
    pairs = [
        (vision.embeddings.patch_embedding.weight,
         policy.vlm.vision_tower.vision_model.embeddings.patch_embedding.weight),
        (vision.encoder.layers[1].mlp.fc2.bias, policy.vlm.vision_tower.vision_model.encoder.layers[1].mlp.fc2.bias),
        (vision.post_layernorm.weight, policy.vlm.vision_tower.vision_model.post_layernorm.weight),
        (source.paligemma.model.multi_modal_projector.linear.weight, policy.vlm.projector.weight),
        (source.paligemma.model.language_model.embed_tokens.weight, policy.vlm.language_model.embed_tokens.weight),
        (source.paligemma.model.language_model.layers[2].self_attn.k_proj.weight,
         policy.vlm.language_model.layers[2].self_attn.k_proj.weight),
        (source.paligemma.model.language_model.norm.weight, policy.vlm.language_model.norm.weight),
        (source.gemma_expert.model.layers[0].mlp.down_proj.weight, policy.expert.layers[0].mlp.down_proj.weight),
        (layout.action_in_proj.weight, policy.action_in_proj.weight),
        (layout.action_out_proj.bias, policy.action_out_proj.bias),
    ]
    if name == "pi05":
        pairs += [
            (source.gemma_expert.model.layers[1].input_layernorm.dense.weight,
             policy.expert.layers[1].input_layernorm.dense.weight),
            (source.gemma_expert.model.norm.dense.bias, policy.expert.norm.dense.bias),
            (layout.time_mlp_out.weight, policy.time_mlp_out.weight),
        ]
    else:
        pairs += [
            (source.gemma_expert.model.layers[1].post_attention_layernorm.weight,
             policy.expert.layers[1].post_attention_layernorm.weight),
            (layout.state_proj.weight, policy.state_proj.weight),
            (layout.action_time_mlp_in.bias, policy.action_time_mlp_in.bias),
        ]
    for published, ours in pairs:
        assert torch.equal(published, ours)
    assert not policy.training
    out = policy.act(make_obs(2))
    assert out.actions.shape == (2, 4, ACTION_DIM) and bool(torch.isfinite(out.actions).all())


def test_lerobot_prefix_and_legacy_transformers_names_load(tmp_path):
    layout, _ = openpi_layout("pi0")
    state = {}
    for key, value in layout.state_dict().items():
        legacy = key.replace("paligemma.model.language_model.", "paligemma.language_model.model.")
        legacy = legacy.replace("paligemma.model.vision_tower.", "paligemma.vision_tower.")
        state[f"model.{legacy}"] = value.contiguous()
    (tmp_path / "ckpt").mkdir()
    save_file({k: v for k, v in state.items() if not k.endswith("paligemma.lm_head.weight")},
              str(tmp_path / "ckpt" / "model.safetensors"))
    vlarl_policies.PromptTokenizer.train(["open the drawer"], vocab_size=300).save(tmp_path / "ckpt")
    policy = load_tiny(tmp_path / "ckpt", "pi0")
    assert torch.equal(policy.vlm.language_model.layers[0].self_attn.q_proj.weight,
                       layout.paligemma_with_expert.paligemma.model.language_model.layers[0].self_attn.q_proj.weight)


def test_key_mismatches_list_missing_and_unexpected_keys(tmp_path):
    layout, _ = openpi_layout("pi0")
    write_checkpoint(tmp_path / "ckpt", layout)
    path = tmp_path / "ckpt" / "model.safetensors"
    state = load_file(str(path))
    del state["paligemma_with_expert.gemma_expert.model.layers.1.self_attn.o_proj.weight"]
    state["paligemma_with_expert.gemma_expert.model.layers.1.extra_gate.weight"] = torch.zeros(2)
    save_file(state, str(path))
    with pytest.raises(ValueError) as error:
        load_tiny(tmp_path / "ckpt", "pi0")
    message = str(error.value)
    assert "1 missing key(s) ['expert.layers.1.self_attn.o_proj.weight']" in message
    assert "1 unexpected key(s) ['expert.layers.1.extra_gate.weight']" in message


def test_pi0_weights_do_not_load_into_pi05(tmp_path):
    layout, _ = openpi_layout("pi0")
    write_checkpoint(tmp_path / "ckpt", layout)
    with pytest.raises(ValueError, match=r"missing key\(s\) \[.*time_mlp_in.bias.*unexpected key\(s\) \[.*state_proj"):
        load_tiny(tmp_path / "ckpt", "pi05")


def test_wrong_shapes_are_reported(tmp_path):
    layout, _ = openpi_layout("pi0")
    write_checkpoint(tmp_path / "ckpt", layout)
    with pytest.raises(ValueError, match=r"action_in_proj.weight: checkpoint \[96, 8\], model \[96, 16\]"):
        load_tiny(tmp_path / "ckpt", "pi0", max_action_dim=16)


def test_lora_and_norm_stats_with_a_published_checkpoint(tmp_path):
    layout, _ = openpi_layout("pi05")
    write_checkpoint(tmp_path / "ckpt", layout)
    stats = {"norm_stats": {"state": {"mean": [0.0] * 5, "std": [1.0] * 5, "q01": [-2.0] * 5, "q99": [4.0] * 5}}}
    (tmp_path / "norm_stats.json").write_text(json.dumps(stats))
    policy = load_tiny(tmp_path / "ckpt", "pi05", lora_rank=2, norm_stats=tmp_path / "norm_stats.json")
    assert torch.equal(policy.vlm.language_model.layers[0].mlp.up_proj.base_layer.weight,
                       layout.paligemma_with_expert.paligemma.model.language_model.layers[0].mlp.up_proj.weight)
    normalizer = policy.observation_encoder.state_normalizer
    assert torch.allclose(normalizer.offset, torch.ones(5)) and torch.allclose(normalizer.scale, torch.full((5,), 3.0))


def test_a_checkpoint_without_tokenizer_asks_for_one(tmp_path):
    layout, _ = openpi_layout("pi0")
    (tmp_path / "ckpt").mkdir()
    save_model(layout, str(tmp_path / "ckpt" / "model.safetensors"))
    with pytest.raises(FileNotFoundError, match="pass tokenizer_dir="):
        load_tiny(tmp_path / "ckpt", "pi0")


def act_with_seed(policy, obs) -> torch.Tensor:
    torch.manual_seed(0)
    return policy.act(obs).actions


@pytest.mark.parametrize("name", ["pi0", "pi05"])
def test_vlarl_convert_round_trips_the_published_layout(tmp_path, make_obs, name):
    from safetensors.torch import load_file

    from vlarl_policies.convert import main as convert
    from vlarl_policies.pi0.checkpoint import published_to_ours

    layout, _ = openpi_layout(name)
    write_checkpoint(tmp_path / "published", layout)
    stats = {"norm_stats": {"state": {"mean": [0.5] * 5, "std": [2.0] * 5, "q01": [-2.0] * 5, "q99": [4.0] * 5}}}
    (tmp_path / "norm_stats.json").write_text(json.dumps(stats))
    dims = ["--action-dim", str(ACTION_DIM), "--state-dim", str(STATE_DIM), "--preset", "tiny"]
    assert convert(["import", name, str(tmp_path / "published"), str(tmp_path / "ours"), *dims,
                    "--norm-stats", str(tmp_path / "norm_stats.json")]) == 0
    imported = vlarl_policies.from_pretrained(tmp_path / "ours")
    assert convert(["export", str(tmp_path / "ours"), str(tmp_path / "exported")]) == 0
    # Both through the loader's renaming: PaliGemma's tied output head may stand under either name.
    original = published_to_ours(load_file(str(tmp_path / "published" / "model.safetensors")))
    exported = published_to_ours(load_file(str(tmp_path / "exported" / "model.safetensors")))
    assert set(exported) == set(original)
    for key, value in exported.items():
        assert torch.equal(value, original[key]), key
    reloaded = load_tiny(tmp_path / "exported", name, norm_stats=tmp_path / "exported" / "norm_stats.json")
    obs = make_obs(2)
    torch.testing.assert_close(act_with_seed(reloaded, obs), act_with_seed(imported, obs))
    assert convert(["export", str(tmp_path / "ours"), str(tmp_path / "exported")]) == 2  # never overwritten


def test_export_merges_lora_adapters_into_the_published_weights(tmp_path, make_obs):
    from vlarl_policies.pi0.checkpoint import save_published

    layout, _ = openpi_layout("pi0")
    write_checkpoint(tmp_path / "published", layout)
    policy = load_tiny(tmp_path / "published", "pi0", lora_rank=2)
    with torch.no_grad():
        for parameter_name, parameter in policy.named_parameters():
            if "lora_B" in parameter_name:
                parameter.normal_(std=0.05)
    obs = make_obs(2)
    adapted = act_with_seed(policy, obs)
    save_published(policy, tmp_path / "merged")
    merged = load_tiny(tmp_path / "merged", "pi0")
    torch.testing.assert_close(act_with_seed(merged, obs), adapted, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(act_with_seed(load_tiny(tmp_path / "published", "pi0"), obs), adapted)

