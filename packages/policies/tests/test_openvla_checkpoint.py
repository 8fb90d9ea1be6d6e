"""Loading the published OpenVLA layout, exercised with tiny checkpoints written the way Hugging Face writes 7B ones.

The module tree is built here as OpenVLA's remote code builds it: timm's DINOv2 and SigLIP under
``vision_backbone.featurizer`` / ``fused_featurizer`` with LayerScale ``gamma`` renamed
``scale_factor``, a ``projector`` of three Linear layers, transformers' ``LlamaForCausalLM`` as
``language_model``. The weights go out in bf16 into two shards plus ``model.safetensors.index.json``,
next to an HF-style ``config.json`` with ``norm_stats``. Parameter names therefore come from timm and
transformers, not from our mapping.
"""

from __future__ import annotations

import json

import pytest
import timm
import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

from vlarl_policies.openvla import OpenVLAPolicy, load_published
from vlarl_policies.registry import preset_config
from vlarl_policies.tokenizer import instruction_corpus

ACTION_DIM, STATE_DIM = 3, 5
NORM_STATS = {
    "bridge_orig": {
        "action": {"q01": [-0.5, 0.0, 10.0], "q99": [0.5, 2.0, 20.0], "mask": [True, True, False]},
        "proprio": {"q01": [-2.0] * STATE_DIM, "q99": [2.0] * STATE_DIM},
    }
}


def published_layout() -> tuple[nn.Module, dict]:
    """A tiny random OpenVLA module tree with the published parameter names, and its HF ``config.json``."""
    _, config = preset_config("openvla", "tiny")
    sizes = {"pretrained": False, "num_classes": 0, "img_size": config.image_size, "patch_size": config.patch_size}
    root = nn.Module()
    root.vision_backbone = nn.Module()
    root.vision_backbone.featurizer = timm.create_model(
        "vit_large_patch14_reg4_dinov2.lvd142m", embed_dim=config.dino_width, depth=config.dino_depth,
        num_heads=config.dino_heads, **sizes)
    root.vision_backbone.fused_featurizer = timm.create_model(
        "vit_so400m_patch14_siglip_224", embed_dim=config.siglip_width, depth=config.siglip_depth,
        num_heads=config.siglip_heads, mlp_ratio=config.siglip_mlp_ratio, **sizes)
    fused = config.dino_width + config.siglip_width
    root.projector = nn.Module()
    root.projector.fc1 = nn.Linear(fused, 4 * fused)
    root.projector.fc2 = nn.Linear(4 * fused, config.llm_width)
    root.projector.fc3 = nn.Linear(config.llm_width, config.llm_width)
    text_config = {"model_type": "llama", "vocab_size": config.tokenizer_vocab_size + 64, "pad_token_id": 1024,
                   "hidden_size": config.llm_width, "intermediate_size": config.llm_mlp_dim,
                   "num_hidden_layers": config.llm_depth, "num_attention_heads": config.llm_heads,
                   "num_key_value_heads": config.llm_kv_heads, "rms_norm_eps": config.rms_norm_eps,
                   "max_position_embeddings": config.max_position_embeddings}
    root.language_model = LlamaForCausalLM(LlamaConfig(**text_config))
    for parameter in root.parameters():
        nn.init.normal_(parameter, std=0.05)
    hf_config = {
        "architectures": ["OpenVLAForActionPrediction"], "model_type": "openvla", "n_action_bins": 256,
        "norm_stats": NORM_STATS, "pad_to_multiple_of": 64, "text_config": text_config,
        "image_sizes": [config.image_size, config.image_size], "use_fused_vision_backbone": True,
        "timm_model_ids": ["vit_large_patch14_reg4_dinov2.lvd142m", "vit_so400m_patch14_siglip_224"],
        "vision_backbone_id": "dinosiglip-vit-so-224px", "llm_backbone_id": "llama2-7b-pure",
    }
    return root, hf_config


def published_state(layout: nn.Module) -> dict[str, torch.Tensor]:
    """The layout's weights as OpenVLA saves them: LayerScale ``gamma`` -> ``scale_factor``, bf16."""
    return {key.replace(".gamma", ".scale_factor"): value.to(torch.bfloat16).contiguous()
            for key, value in layout.state_dict().items()}


def write_checkpoint(directory, layout: nn.Module, hf_config: dict, extra: dict | None = None) -> dict:
    """Two safetensors shards and the index Hugging Face writes for sharded models, config.json, tokenizer."""
    directory.mkdir()
    state = {**published_state(layout), **(extra or {})}
    keys = sorted(state)
    shards = {"model-00001-of-00002.safetensors": keys[::2], "model-00002-of-00002.safetensors": keys[1::2]}
    for file_name, shard_keys in shards.items():
        save_file({key: state[key] for key in shard_keys}, str(directory / file_name), metadata={"format": "pt"})
    index = {"metadata": {"total_size": sum(v.numel() * v.element_size() for v in state.values())},
             "weight_map": {key: file_name for file_name, shard_keys in shards.items() for key in shard_keys}}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    (directory / "config.json").write_text(json.dumps(hf_config))
    _, config = preset_config("openvla", "tiny")
    OpenVLAPolicy.build_tokenizer(config, instruction_corpus(["put the carrot on the plate"])).save(directory)
    return state


def load_tiny(directory, name: str = "openvla", **config):
    return load_published(directory, name, preset="tiny", action_dim=ACTION_DIM, state_dim=STATE_DIM, **config)


def test_published_layout_reproduces_every_written_weight(tmp_path, make_obs):
    layout, hf_config = published_layout()
    critic = {"value_head.mlp.0.weight": torch.zeros(4, 4)}  # RLinf's critic, another layout: skipped
    state = write_checkpoint(tmp_path / "ckpt", layout, hf_config, extra=critic)
    policy = load_tiny(tmp_path / "ckpt")
    ours = policy.state_dict()
    for key, value in state.items():
        if key in critic:
            continue
        assert torch.equal(ours[key.replace(".scale_factor", ".gamma")], value.float()), key
    assert torch.equal(policy.vision_backbone.featurizer.blocks[1].ls2.gamma,
                       layout.vision_backbone.featurizer.blocks[1].ls2.gamma.to(torch.bfloat16).float())
    assert not policy.training
    config = policy.config
    assert (config.vocab_size, config.tokenizer_vocab_size, config.action_token_begin) == (1088, 1024, 768)
    assert config.norm_stats == NORM_STATS
    out = policy.act(make_obs(2), deterministic=True)
    assert out.actions.shape == (2, 1, ACTION_DIM)
    robot = policy.unnormalize(torch.tensor([[-1.0, 1.0, 0.5]]))
    torch.testing.assert_close(robot, torch.tensor([[-0.5, 2.0, 0.5]]))


def test_vision_features_are_openvlas_second_to_last_block_patches(tmp_path, make_obs):
    layout, hf_config = published_layout()
    write_checkpoint(tmp_path / "ckpt", layout, hf_config)
    policy = load_tiny(tmp_path / "ckpt")
    images = torch.from_numpy(make_obs(2)["main_images"]).permute(0, 3, 1, 2)
    pixels = images.float() / 255.0
    mean, std = torch.tensor([0.485, 0.456, 0.406])[:, None, None], torch.tensor([0.229, 0.224, 0.225])[:, None, None]
    dino = (pixels - mean) / std
    siglip = (pixels - 0.5) / 0.5
    expected = []
    towers = layout.vision_backbone
    for vit, normalized in ((towers.featurizer, dino), (towers.fused_featurizer, siglip)):
        vit.load_state_dict({key: value.to(torch.bfloat16).float() for key, value in vit.state_dict().items()})
        with torch.no_grad():
            expected.append(vit.get_intermediate_layers(normalized, n={len(vit.blocks) - 2})[0])
    with torch.no_grad():
        features = policy.vision_backbone(images, torch.float32)
    torch.testing.assert_close(features, torch.cat(expected, dim=-1), atol=1e-5, rtol=1e-5)


def test_oft_merged_checkpoint_with_its_proprio_projector_file(tmp_path, make_obs):
    layout, hf_config = published_layout()
    write_checkpoint(tmp_path / "ckpt", layout, hf_config)
    projector = {"module.fc1.weight": torch.randn(256, STATE_DIM), "module.fc1.bias": torch.randn(256),
                 "module.fc2.weight": torch.randn(256, 256), "module.fc2.bias": torch.randn(256)}
    torch.save(projector, tmp_path / "ckpt" / "proprio_projector--150000_checkpoint.pt")
    policy = load_tiny(tmp_path / "ckpt", "openvla_oft", use_proprio=True, unnorm_key="bridge_orig")
    assert torch.equal(policy.proprio_projector.fc1.weight, projector["module.fc1.weight"])
    assert torch.equal(policy.proprio_projector.fc2.bias, projector["module.fc2.bias"])
    normalizer = policy.observation_encoder.state_normalizer
    assert torch.equal(normalizer.offset, torch.zeros(STATE_DIM))
    assert torch.equal(normalizer.scale, torch.full((STATE_DIM,), 2.0))
    out = policy.act(make_obs(2))
    assert out.actions.shape == (2, 8, ACTION_DIM)
    torch.testing.assert_close(policy.evaluate_actions(out.forward_inputs).logprobs, out.logprobs, atol=1e-5, rtol=0)


def test_openvla_weights_start_an_oft_policy_with_a_new_proprio_projector_and_lora(tmp_path):
    layout, hf_config = published_layout()
    write_checkpoint(tmp_path / "ckpt", layout, hf_config)
    policy = load_tiny(tmp_path / "ckpt", "openvla_oft", use_proprio=True, lora_rank=2)
    published = layout.language_model.model.layers[0].self_attn.v_proj.weight.to(torch.bfloat16).float()
    assert torch.equal(policy.language_model.model.layers[0].self_attn.v_proj.base_layer.weight, published)
    assert torch.isfinite(policy.proprio_projector.fc1.weight).all()


def test_key_mismatches_list_missing_and_unexpected_keys(tmp_path):
    layout, hf_config = published_layout()
    write_checkpoint(tmp_path / "ckpt", layout, hf_config)
    path = tmp_path / "ckpt" / "model-00002-of-00002.safetensors"
    state = load_file(str(path))
    removed = sorted(state)[0]
    del state[removed]
    state["projector.fc4.weight"] = torch.zeros(2)
    save_file(state, str(path))
    with pytest.raises(ValueError) as error:
        load_tiny(tmp_path / "ckpt")
    message = str(error.value)
    assert f"1 missing key(s) ['{removed.replace('.scale_factor', '.gamma')}']" in message
    assert "1 unexpected key(s) ['projector.fc4.weight']" in message


def test_wrong_shapes_are_reported(tmp_path):
    layout, hf_config = published_layout()
    write_checkpoint(tmp_path / "ckpt", layout, hf_config)
    with pytest.raises(ValueError, match=r"featurizer.cls_token: checkpoint \[1, 1, 96\], model \[1, 1, 128\]"):
        load_tiny(tmp_path / "ckpt", dino_width=128, dino_heads=4)


def test_unsupported_or_incomplete_checkpoints_say_why(tmp_path):
    layout, hf_config = published_layout()
    write_checkpoint(tmp_path / "ckpt", layout, hf_config)
    (tmp_path / "ckpt" / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="lists shards that are not there"):
        load_tiny(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({**hf_config, "use_fused_vision_backbone": False}))
    with pytest.raises(ValueError, match="only the fused DINOv2 \\+ SigLIP one"):
        load_tiny(tmp_path / "ckpt")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_tiny(tmp_path)


@pytest.mark.parametrize("name, extra", [("openvla", {}), ("openvla_oft", {"use_proprio": True, "lora_rank": 2})])
def test_vlarl_convert_round_trips_the_published_layout(tmp_path, make_obs, name, extra):
    from vlarl_policies.convert import main as convert
    from vlarl_policies.openvla.checkpoint import save_published

    layout, hf_config = published_layout()
    state = write_checkpoint(tmp_path / "published", layout, hf_config)
    policy = load_tiny(tmp_path / "published", name, unnorm_key="bridge_orig", **extra)
    with torch.no_grad():  # adapters that change the function, so that the export has to merge them
        for parameter_name, parameter in policy.named_parameters():
            if "lora_B" in parameter_name:
                parameter.normal_(std=0.05)
    obs = make_obs(2)
    expected = policy.act(obs, deterministic=True)
    policy.save_pretrained(tmp_path / "ours")
    assert convert(["export", str(tmp_path / "ours"), str(tmp_path / "exported")]) == 0
    exported = load_file(str(tmp_path / "exported" / "model.safetensors"))
    assert set(state) <= set(exported)  # every published weight under its published name, scale_factor included
    if not extra:
        for key, value in state.items():
            assert torch.equal(exported[key], value.float()), key
    dims = ["--action-dim", str(ACTION_DIM), "--state-dim", str(STATE_DIM), "--preset", "tiny"]
    settings = [f"--set={field}={json.dumps(value)}" for field, value in extra.items() if field != "lora_rank"]
    assert convert(["import", name, str(tmp_path / "exported"), str(tmp_path / "again"), *dims,
                    "--unnorm-key", "bridge_orig", *settings]) == 0
    import vlarl_policies

    again = vlarl_policies.from_pretrained(tmp_path / "again")
    assert again.config.norm_stats == NORM_STATS
    got = again.act(obs, deterministic=True)
    torch.testing.assert_close(got.actions, expected.actions)
    if extra:
        assert torch.equal(again.proprio_projector.fc1.weight, policy.proprio_projector.fc1.weight)
    with pytest.raises(FileExistsError):
        save_published(policy, tmp_path / "exported")


def test_vlarl_convert_says_what_it_expected(tmp_path, capsys):
    from vlarl_policies.convert import main as convert

    assert convert(["import", "openvla", str(tmp_path / "nowhere"), str(tmp_path / "out"), "--action-dim", "7",
                    "--state-dim", "8", "--norm-stats", str(tmp_path / "norm_stats.json")]) == 2
    assert "--norm-stats is for pi0 and pi05" in capsys.readouterr().err
    assert convert(["import", "openvla", str(tmp_path / "nowhere"), str(tmp_path / "out"), "--action-dim", "7",
                    "--state-dim", "8"]) == 2
    assert "not a published OpenVLA checkpoint" in capsys.readouterr().err
    assert convert(["import", "pi0", str(tmp_path), str(tmp_path / "out"), "--action-dim", "7", "--state-dim", "8",
                    "--set", "lora_rank"]) == 2
    assert "--set takes FIELD=VALUE, got 'lora_rank'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()

