"""OpenVLA's inputs: the prompt, the tokenizer whose last 256 ids are the action bins, left padding, obs checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vlarl_policies import PromptTokenizer
from vlarl_policies.openvla import OpenVLAPolicy
from vlarl_policies.openvla.inputs import build_prompts
from vlarl_policies.registry import preset_config
from vlarl_policies.tokenizer import instruction_corpus


def test_the_prompt_is_openvlas_lower_cased():
    assert build_prompts(["Put_the carrot on the plate\n"]) == [
        "In: What action should the robot take to put the carrot on the plate?\nOut: "
    ]


def test_the_trained_tokenizer_ends_with_the_action_bins():
    _, config = preset_config("openvla", "tiny")
    tokenizer = OpenVLAPolicy.build_tokenizer(config, instruction_corpus(["slide the puck"]))
    assert tokenizer.vocab_size == config.tokenizer_vocab_size == 1024
    begin = config.action_token_begin
    assert begin == 1024 - 256
    vocabulary = tokenizer._tokenizer.get_vocab()
    assert [vocabulary[f"<action_bin_{k}>"] for k in range(256)] == list(range(begin, 1024))
    ids, mask = tokenizer.encode_batch(build_prompts(["slide the puck", "open the drawer"]), 40, padding_side="left")
    assert bool((ids[mask] < begin).all()), "prompt text never encodes to an action-bin id"
    assert tokenizer.decode(ids[0][mask[0]].tolist()).startswith("In: What action should the robot take to slide")


def test_a_small_corpus_leaves_unused_ids_before_the_bins():
    tokenizer = PromptTokenizer.train(["push"], vocab_size=600, tail_tokens=[f"<bin_{k}>" for k in range(256)])
    assert tokenizer.vocab_size == 600
    assert tokenizer._tokenizer.token_to_id("<bin_0>") == 344
    assert tokenizer._tokenizer.token_to_id("<unused_0>") is not None
    with pytest.raises(ValueError, match="must leave at least 260 ids"):
        PromptTokenizer.train(["push"], vocab_size=400, tail_tokens=[f"<bin_{k}>" for k in range(256)])


def test_left_padding_keeps_bos_first_and_every_prompt_ending_in_the_last_column():
    tokenizer = PromptTokenizer.train(instruction_corpus(), vocab_size=400)
    texts = ["pick up the red cube", "push"]
    right, right_mask = tokenizer.encode_batch(texts, 16)
    left, left_mask = tokenizer.encode_batch(texts, 16, padding_side="left")
    assert bool((left[:, 0] == tokenizer.bos_id).all()) and bool(left_mask[:, 0].all()) and bool(left_mask[:, -1].all())
    for row in range(2):
        assert left[row][left_mask[row]].tolist() == right[row][right_mask[row]].tolist()
        padding = ~left_mask[row]
        assert bool((left[row][padding] == tokenizer.pad_id).all())
    with pytest.warns(UserWarning, match="truncated"):
        truncated, _ = tokenizer.encode_batch(["pick up the red cube and put it on the plate"], 4, padding_side="left")
    full, full_mask = tokenizer.encode_batch(["pick up the red cube and put it on the plate"], 40)
    assert truncated[0, 0] == tokenizer.bos_id
    assert truncated[0, 1:].tolist() == full[0][full_mask[0]].tolist()[-3:], "left truncation keeps the prompt's end"
    with pytest.raises(ValueError, match="padding_side"):
        tokenizer.encode_batch(texts, 16, padding_side="middle")


def test_stored_inputs_and_state_normalization(make_tiny, make_obs):
    policy = make_tiny("openvla_oft")
    policy.set_state_stats(q01=[-2.0] * 5, q99=[2.0] * 5)
    obs = make_obs(2)
    inputs = policy.observation_encoder(obs)
    assert inputs["images"].dtype == torch.uint8 and inputs["images"].shape == (2, 2, 3, 64, 64)
    torch.testing.assert_close(inputs["states"], torch.from_numpy(obs["states"]) / 2.0)
    rows = zip(inputs["tokens"], inputs["token_masks"], strict=True)
    prompts = [policy.tokenizer.decode(row[mask].tolist()) for row, mask in rows]
    assert prompts == build_prompts(obs["task_description"])


def test_observation_errors_name_the_key(make_tiny, make_obs):
    policy = make_tiny("openvla_oft")
    obs = make_obs(2)
    with pytest.raises(ValueError, match="lacks the required camera 'main_images'"):
        policy.act({key: value for key, value in obs.items() if key != "main_images"})
    with pytest.raises(ValueError, match="lacks 'states'"):
        policy.act({key: value for key, value in obs.items() if key != "states"})
    with pytest.raises(ValueError, match=r"must hold 2 str"):
        policy.act({**obs, "task_description": ("one",)})
    with pytest.raises(ValueError, match="must have dtype uint8"):
        policy.act({**obs, "main_images": obs["main_images"].astype(np.float32)})
    with pytest.raises(ValueError, match=r"shape \[B, 5\]"):
        policy.act({**obs, "states": np.zeros((2, 4), np.float32)})
