"""OpenVLA presets, parameter counts, config validation and what config.json keeps (the round trip of every
policy is in test_save_load.py)."""

from __future__ import annotations

import json

import pytest

import vlarl_policies
from vlarl_policies.openvla import OpenVLAConfig, OpenVLAOFTConfig


def test_config_json_carries_the_type_tag_and_norm_stats(make_tiny, tmp_path):
    stats = {"bridge_orig": {"action": {"q01": [-1.0] * 3, "q99": [1.0] * 3, "mask": [True, True, False]}}}
    make_tiny("openvla", norm_stats=stats, unnorm_key="bridge_orig").save_pretrained(tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert config["type"] == "openvla" and config["camera_keys"] == ["main_images"]
    assert OpenVLAConfig.from_dict(config).norm_stats == stats


def test_unknown_names_list_the_openvla_policies():
    with pytest.raises(ValueError, match=r"registered policies: \['openvla', 'openvla_oft', 'pi0', 'pi05'\]"):
        vlarl_policies.make("openvla2")
    assert vlarl_policies.policy_class("openvla_oft").config_class is OpenVLAOFTConfig


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        ("openvla", {"image_size": 70}, r"image_size \(70\) must be a multiple of patch_size \(16\)"),
        ("openvla", {"top_k": 300}, r"top_k must be in \[0, n_action_bins=256\]"),
        ("openvla", {"temperature": 0.0}, "temperature must be > 0"),
        ("openvla", {"tokenizer_vocab_size": 2048}, r"tokenizer_vocab_size \(2048\) <= vocab_size \(1024\)"),
        ("openvla", {"dino_depth": 1}, "second-to-last block"),
        ("openvla", {"unnorm_key": "bridge"}, "unnorm_key 'bridge' is not in norm_stats"),
        ("openvla_oft", {"value_type": "token_level"}, "value_type must be one of"),
    ],
)
def test_config_validation_names_the_fields(name, change, message):
    with pytest.raises(ValueError, match=message):
        vlarl_policies.make(name, preset="tiny", **change)


def test_tiny_presets_are_under_20m_parameters(count_parameters):
    assert 1e6 < count_parameters("openvla", "tiny") < 20e6
    assert 1e6 < count_parameters("openvla_oft", "tiny", use_proprio=True) < 20e6


def test_published_presets_are_openvla_7b_sized(count_parameters):
    """DINOv2 ViT-L (0.30 B) + SigLIP so400m (0.43 B) + projector (0.07 B) + Llama 2 7B with 32,064 rows (6.74 B)."""
    assert 7.4e9 < count_parameters("openvla", "base", add_value_head=False) < 7.7e9
    assert OpenVLAConfig().action_token_begin == 31744 and OpenVLAOFTConfig().action_chunk == 8
