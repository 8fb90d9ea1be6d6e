"""Input processing: validation errors, image resize, state statistics, prompts and the tokenizer."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vlarl_policies.processors import (
    StateNormalizer,
    as_tensor,
    build_prompts,
    discretize_state,
    normalize_images,
    resize_with_pad,
)
from vlarl_policies.tokenizer import PromptTokenizer, instruction_corpus


@pytest.fixture(scope="module")
def tokenizer() -> PromptTokenizer:
    return PromptTokenizer.train(instruction_corpus(["wipe the whiteboard"]), vocab_size=400)


def test_resize_with_pad_keeps_aspect_ratio_and_pads_black():
    images = torch.full((2, 32, 64, 3), 200, dtype=torch.uint8)
    resized = resize_with_pad(images, 64)
    assert resized.shape == (2, 3, 64, 64) and resized.dtype == torch.uint8
    assert bool((resized[:, :, :16] == 0).all()) and bool((resized[:, :, 48:] == 0).all())
    assert bool((resized[:, :, 16:48] == 200).all())


def test_resize_is_identity_at_the_model_size():
    images = torch.randint(0, 256, (1, 64, 64, 3), dtype=torch.uint8)
    assert torch.equal(resize_with_pad(images, 64), images.permute(0, 3, 1, 2))


def test_pixels_span_minus_one_to_one():
    pixels = normalize_images(torch.tensor([0, 255], dtype=torch.uint8), torch.float32)
    assert torch.allclose(pixels, torch.tensor([-1.0, 1.0]))


@settings(deadline=None, max_examples=30)
@given(values=st.lists(st.floats(min_value=-3, max_value=3), min_size=1, max_size=16))
def test_discretized_state_bins_are_monotone_and_in_range(values):
    normalized = torch.tensor(sorted(values), dtype=torch.float32)[None]
    bins = discretize_state(normalized)[0]
    assert bool((bins >= 0).all()) and bool((bins <= 255).all())
    assert bool((bins[1:] >= bins[:-1]).all())


def test_discretize_matches_openpi_binning():
    """openpi: np.digitize(state, np.linspace(-1, 1, 257)[:-1]) - 1."""
    state = np.array([-1.0, -0.5, -0.0039, 0.0, 0.42, 0.999, 1.0], dtype=np.float32)
    expected = np.digitize(state, bins=np.linspace(-1, 1, 257)[:-1]) - 1
    assert discretize_state(torch.from_numpy(state)).tolist() == expected.tolist()


def test_state_normalizer_uses_mean_std_or_quantiles():
    normalizer = StateNormalizer(2)
    normalizer.set_mean_std([1.0, -1.0], [2.0, 0.5])
    assert torch.allclose(normalizer(torch.tensor([[3.0, -1.5]])), torch.tensor([[1.0, -1.0]]))
    normalizer.set_quantiles([0.0, -4.0], [2.0, 4.0])
    assert torch.allclose(normalizer(torch.tensor([[0.0, 4.0]])), torch.tensor([[-1.0, 1.0]]))
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        normalizer.set_mean_std([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])


def test_prompts_follow_the_pi0_and_pi05_formats():
    assert build_prompts([" open_the drawer\n"], None) == ["open the drawer\n"]
    pi05 = build_prompts(["open the drawer"], torch.tensor([[0, 128, 255]]))
    assert pi05 == ["Task: open the drawer, State: 0 128 255;\nAction: "]


def test_tokenizer_pads_with_bos_first(tokenizer):
    ids, mask = tokenizer.encode_batch(["pick up the red cube", "wipe the whiteboard"], max_len=24)
    assert ids.shape == (2, 24) and ids.dtype == torch.long
    assert bool((ids[:, 0] == tokenizer.bos_id).all())
    assert bool((ids[~mask] == tokenizer.pad_id).all())
    assert tokenizer.decode(ids[0][mask[0]].tolist()) == "pick up the red cube"


def test_tokenizer_warns_when_truncating(tokenizer):
    with pytest.warns(UserWarning, match="max_token_len=4"):
        ids, mask = tokenizer.encode_batch(["pick up the red cube and put it on the plate"], max_len=4)
    assert bool(mask.all())


def test_tokenizer_round_trips_through_files(tokenizer, tmp_path):
    tokenizer.save(tmp_path)
    loaded = PromptTokenizer.load(tmp_path)
    text = ["Task: stack the blue block, State: 3 17 255;\nAction: "]
    assert torch.equal(loaded.encode_batch(text, 40)[0], tokenizer.encode_batch(text, 40)[0])
    assert loaded.vocab_size == tokenizer.vocab_size


def test_unknown_words_still_encode_byte_by_byte(tokenizer):
    ids, mask = tokenizer.encode_batch(["zygomorphic quokka ✓"], 64)
    assert tokenizer.decode(ids[0][mask[0]].tolist()) == "zygomorphic quokka ✓"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"main_images": np.zeros((4, 64, 64, 3), dtype=np.float32)}, "must have dtype uint8, got torch.float32"),
        ({"main_images": np.zeros((4, 64, 64), dtype=np.uint8)}, r"must have shape \[B=4, H, W, 3\]"),
        ({"main_images": np.zeros((3, 64, 64, 3), dtype=np.uint8)}, r"must have shape \[B=4, H, W, 3\]"),
        ({"states": np.zeros((4, 7), dtype=np.float32)}, r"must have shape \[B, 5\].*got \(4, 7\)"),
        ({"states": np.full((4, 5), np.nan, dtype=np.float32)}, "NaN or inf"),
        ({"task_description": "pick up the cube"}, "list or tuple of 4 str"),
        ({"task_description": ["a", "b"]}, "must hold 4 str"),
        ({"main_images": [[0]]}, "numpy array or torch tensor, got list"),
    ],
)
def test_bad_observations_raise_clear_errors(make_tiny, make_obs, change, message):
    policy = make_tiny("pi0")
    obs = {**make_obs(4), **change}
    with pytest.raises(ValueError, match=message):
        policy.act(obs)


def test_missing_keys_are_named(make_tiny, make_obs):
    policy = make_tiny("pi0")
    obs = make_obs(2)
    with pytest.raises(ValueError, match="lacks the required camera 'main_images'"):
        policy.act({key: value for key, value in obs.items() if key != "main_images"})
    with pytest.raises(ValueError, match="lacks 'states'"):
        policy.act({key: value for key, value in obs.items() if key != "states"})


def test_missing_optional_camera_is_masked(make_tiny, make_obs):
    policy = make_tiny("pi0", camera_keys=("main_images", "wrist_images"))
    out = policy.act(make_obs(2))
    assert out.forward_inputs["images"].shape == (2, 2, 3, 64, 64)
    assert out.forward_inputs["image_masks"].tolist() == [[True, False], [True, False]]


def test_read_only_arrays_become_tensors_of_their_own_memory():
    """Ray hands observations over as read-only views of its object store."""
    frozen = np.arange(12, dtype=np.uint8).reshape(3, 4)
    frozen.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensor = as_tensor(frozen, "main_images")
    tensor += 1
    assert frozen[0, 0] == 0 and tensor[0, 0] == 1
