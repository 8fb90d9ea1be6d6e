"""Registry, presets, parameter counts and the save_pretrained / from_pretrained round trip."""

from __future__ import annotations

import json

import pytest
import torch

import vlarl_policies
from vlarl_policies.pi0 import Pi0Config, Pi05Config


@pytest.mark.parametrize(
    ("name", "config"),
    [("pi0", {"noise_method": "flow_noise"}), ("pi05", {"noise_method": "flow_noise"}), ("pi0", {"lora_rank": 2}),
     ("openvla", {"top_k": 7}), ("openvla_oft", {"use_proprio": True, "value_type": "action_level"}),
     ("openvla_oft", {"lora_rank": 2, "action_chunk": 2})],
)
def test_save_then_load_gives_identical_actions(make_tiny, make_obs, tmp_path, name, config):
    policy = make_tiny(name, **config)
    policy.set_state_stats(q01=[-2.0] * 5, q99=[2.0] * 5)
    obs = make_obs(3)
    expected = policy.act(obs, generator=torch.Generator().manual_seed(7))
    policy.save_pretrained(tmp_path / "ckpt")
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"
    ]
    loaded = vlarl_policies.from_pretrained(tmp_path / "ckpt")
    assert type(loaded) is type(policy) and not loaded.training
    assert loaded.config == policy.config and loaded.tokenizer.vocab_size == policy.tokenizer.vocab_size
    again = loaded.act(obs, generator=torch.Generator().manual_seed(7))
    for key in ("actions", "logprobs", "values"):
        assert torch.equal(getattr(again, key), getattr(expected, key))
    for key, value in expected.forward_inputs.items():
        assert torch.equal(again.forward_inputs[key], value)


def test_config_json_carries_the_type_tag(make_tiny, tmp_path):
    make_tiny("pi05").save_pretrained(tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert config["type"] == "pi05" and config["camera_keys"] == ["main_images"]
    assert Pi05Config.from_dict(config).camera_keys == ("main_images",)


def test_save_refuses_to_overwrite_unless_asked(make_tiny, tmp_path):
    policy = make_tiny("pi0")
    target = tmp_path / "ckpt"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not empty"):
        policy.save_pretrained(target)
    assert (target / "notes.txt").read_text() == "keep me"
    policy.save_pretrained(target, overwrite=True)
    assert not (target / "notes.txt").exists() and (target / "model.safetensors").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_a_failed_save_leaves_nothing_behind(make_tiny, tmp_path, monkeypatch):
    policy = make_tiny("pi0")

    def broken_save(directory):
        raise OSError("disk full")

    monkeypatch.setattr(policy.tokenizer, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        policy.save_pretrained(tmp_path / "ckpt")
    assert list(tmp_path.iterdir()) == []


def test_loading_mismatched_weights_lists_the_keys(make_tiny, tmp_path):
    make_tiny("pi0").save_pretrained(tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    config["add_value_head"] = False
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"0 missing key\(s\).*unexpected key\(s\) \['value_head.mlp.0.bias'"):
        vlarl_policies.from_pretrained(tmp_path / "ckpt")


def test_unknown_names_presets_and_fields_raise(tmp_path):
    with pytest.raises(ValueError,
                       match=r"unknown policy 'pi1'; registered policies: \['openvla', 'openvla_oft', 'pi0', 'pi05'\]"):
        vlarl_policies.make("pi1")
    with pytest.raises(ValueError, match=r"unknown preset 'huge'.*available presets: \['base', 'tiny'\]"):
        vlarl_policies.make("pi0", preset="huge")
    with pytest.raises(ValueError, match=r"unknown Pi0Config field\(s\) \['action_dims'\]"):
        vlarl_policies.make("pi0", preset="tiny", action_dims=3)
    with pytest.raises(FileNotFoundError, match="no config.json"):
        vlarl_policies.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"action_chunk": 9}, r"action_chunk \(9\) must be <= action_horizon \(8\)"),
        ({"action_dim": 9}, r"action_dim \(9\) must be <= max_action_dim \(8\)"),
        ({"noise_method": "flow_cps"}, "noise_method must be one of"),
        ({"train_expert_only": True, "lora_rank": 8}, "choose one"),
        ({"image_size": 70}, r"image_size \(70\) must be a multiple of patch_size \(16\)"),
    ],
)
def test_config_validation_names_the_fields(change, message):
    with pytest.raises(ValueError, match=message):
        vlarl_policies.make("pi0", preset="tiny", **change)


def test_tiny_presets_are_small(count_parameters):
    assert 5e5 < count_parameters("pi0", "tiny") < 5e6
    assert 5e5 < count_parameters("pi05", "tiny") < 5e6


@pytest.mark.slow
def test_published_presets_are_pi0_sized(count_parameters):
    """SigLIP so400m (0.4 B) + Gemma 2B (2.5 B with its 257k-token embedding) + Gemma 300M expert."""
    assert 3.1e9 < count_parameters("pi0", "base") < 3.4e9
    assert 3.1e9 < count_parameters("pi05", "base") < 3.4e9
    assert Pi0Config().action_horizon == 50 and Pi05Config().action_horizon == 10


@pytest.mark.parametrize(("name", "settings"), [("pi05", {"noise_level": 0.2}),
                                                ("pi0", {"noise_anneal": True, "noise_params": [0.6, 0.2, 50]}),
                                                ("pi0", {"noise_level": 0.2, "start_noise_scale": 0.0}),
                                                ("openvla_oft", {"temperature": 0.5, "top_k": 9})])
def test_resample_saved_changes_only_the_sampling_settings(make_tiny, make_obs, tmp_path, name, settings):
    policy = make_tiny(name)
    policy.save_pretrained(tmp_path / "sft")
    written = vlarl_policies.resample_saved(tmp_path / "sft", tmp_path / "rl", **settings)
    resampled = vlarl_policies.from_pretrained(written)
    assert resampled.config == policy.config.replace(**settings) != policy.config
    for key, value in policy.state_dict().items():
        assert torch.equal(resampled.state_dict()[key], value)
    obs = make_obs(2)
    same_chunk = {"deterministic": True, "zero_start": True}  # the start noise's scale is a sampling setting
    assert torch.equal(resampled.act(obs, **same_chunk).actions, policy.act(obs, **same_chunk).actions)
    assert vlarl_policies.from_pretrained(tmp_path / "sft").config == policy.config


def test_resample_saved_refuses_other_fields_bad_values_and_an_existing_target(make_tiny, tmp_path):
    make_tiny("pi0").save_pretrained(tmp_path / "sft")
    with pytest.raises(ValueError, match=r"only its sampling settings \['noise_level', 'noise_anneal', "
                                         r"'noise_params', 'start_noise_scale'\], got \['action_chunk'\]"):
        vlarl_policies.resample_saved(tmp_path / "sft", tmp_path / "rl", action_chunk=2, noise_level=0.2)
    with pytest.raises(ValueError, match="noise_level must be >= 0, got -1"):
        vlarl_policies.resample_saved(tmp_path / "sft", tmp_path / "rl", noise_level=-1)
    assert not (tmp_path / "rl").exists()
    (tmp_path / "rl").mkdir()
    (tmp_path / "rl" / "kept.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        vlarl_policies.resample_saved(tmp_path / "sft", tmp_path / "rl", noise_level=0.2)
    assert [p.name for p in (tmp_path / "rl").iterdir()] == ["kept.txt"]
