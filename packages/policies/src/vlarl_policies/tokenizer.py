"""Prompt tokenizers: a byte-level BPE trained by code for tiny models, or a published tokenizer file.

Nothing is downloaded at run time. Tiny policies train a small BPE on instruction-like text (the
built-in corpus below plus any strings the caller adds) and save it as ``tokenizer.json`` next to
the weights; a published checkpoint brings its own ``tokenizer.json`` (PaliGemma's or Llama 2's,
in Hugging Face ``tokenizers`` format). Byte-level BPE never produces an unknown token, so any
instruction encodes, only less compactly when its words were not in the corpus.
"""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from torch import Tensor

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
BOS_TOKEN = "<bos>"
PAD_TOKEN = "<pad>"

_VERBS = ("pick up", "put", "place", "push", "pull", "open", "close", "lift", "move", "reach", "stack", "turn on",
          "turn off", "slide", "grasp", "insert", "press", "rotate", "drop", "take")
_OBJECTS = ("cube", "block", "plate", "bowl", "mug", "drawer", "door", "window", "button", "handle", "bottle",
            "can", "cup", "basket", "box", "peg", "hole", "lever", "faucet", "goal", "target", "object", "sponge")
_COLORS = ("red", "green", "blue", "yellow", "black", "white", "orange", "purple", "pink", "brown", "gray")
_PLACES = ("on the plate", "in the basket", "into the drawer", "to the goal", "on the table", "to the left",
           "to the right", "on top of the box", "in the bowl", "next to the mug", "up", "down", "forward", "back")


def instruction_corpus(extra: Iterable[str] = ()) -> list[str]:
    """Instruction-like sentences, the pi0.5 prompt template and the numbers 0..255 (discretized state).

    ``extra`` strings (for example an environment's task descriptions) are added three times so their
    words become single tokens.
    """
    sentences = [
        f"{verb} the {color} {obj} {place}"
        for verb, obj, color, place in itertools.product(_VERBS, _OBJECTS, _COLORS[:4], _PLACES[:5])
    ]
    sentences += [f"{verb} the {color} {obj}" for verb, color, obj in itertools.product(_VERBS, _COLORS, _OBJECTS)]
    numbers = [str(n) for n in range(256)]
    sentences += [f"Task: {sentences[i]}, State: {' '.join(numbers[i:i + 8])};\nAction: " for i in range(0, 256, 8)]
    sentences += [" ".join(numbers)] * 4
    extras = [text.strip().lower() for text in extra]
    return sentences + extras * 3


class PromptTokenizer:
    """A ``tokenizers.Tokenizer`` plus the BOS and PAD conventions of PaliGemma prompts."""

    def __init__(self, tokenizer: Tokenizer, bos_token: str = BOS_TOKEN, pad_token: str = PAD_TOKEN) -> None:
        self._tokenizer = tokenizer
        self.bos_token, self.pad_token = bos_token, pad_token
        self.bos_id = self._require_id(bos_token)
        self.pad_id = self._require_id(pad_token)

    def _require_id(self, token: str) -> int:
        token_id = self._tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(f"tokenizer has no {token!r} token; it needs a BOS and a PAD token")
        return token_id

    @classmethod
    def train(cls, corpus: Iterable[str], vocab_size: int, tail_tokens: Sequence[str] = ()) -> PromptTokenizer:
        """Train a byte-level BPE with at most ``vocab_size`` tokens (PAD is id 0, BOS id 1).

        ``tail_tokens`` take exactly the last ids, ``vocab_size - len(tail_tokens)`` up to ``vocab_size``:
        the BPE learns at most the ids below, and ``<unused_i>`` tokens fill the ids it leaves free, so a
        model can address the tail (OpenVLA's action bins) by id whatever the corpus taught the BPE.
        """
        text_vocab_size = vocab_size - len(tail_tokens)
        if text_vocab_size < 260:
            raise ValueError(
                f"vocab_size must leave at least 260 ids (256 bytes + specials) besides {len(tail_tokens)} tail "
                f"tokens, got {vocab_size}"
            )
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=text_vocab_size,
            special_tokens=[PAD_TOKEN, BOS_TOKEN],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tokenizer.train_from_iterator(list(corpus), trainer=trainer)
        if tail_tokens:
            unused = [f"<unused_{index}>" for index in range(text_vocab_size - tokenizer.get_vocab_size())]
            tokenizer.add_special_tokens(unused + list(tail_tokens))
        return cls(tokenizer)

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    def encode_batch(self, texts: Sequence[str], max_len: int, padding_side: str = "right") -> tuple[Tensor, Tensor]:
        """BOS + tokens of each text, padded to ``max_len`` (longer texts are truncated with a warning).

        ``padding_side="right"`` puts the padding after the text and truncates its end. ``"left"`` keeps
        BOS in column 0, puts the padding between BOS and the text and truncates the text's start, so
        every prompt ends in the last column: what a decoder that continues the prompt needs.

        Returns ids int64 [B, max_len] and mask bool [B, max_len] (True on real tokens).
        """
        if padding_side not in ("right", "left"):
            raise ValueError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        ids = torch.full((len(encodings), max_len), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(encodings), max_len), dtype=torch.bool)
        for row, encoding in enumerate(encodings):
            text_ids = encoding.ids
            if len(text_ids) + 1 > max_len:
                warnings.warn(
                    f"prompt of {len(text_ids) + 1} tokens truncated to max_token_len={max_len}: {texts[row]!r}; "
                    "raise max_token_len in the policy config",
                    stacklevel=2,
                )
                keep = max_len - 1
                text_ids = text_ids[:keep] if padding_side == "right" else text_ids[len(text_ids) - keep:]
            if padding_side == "right":
                columns = slice(0, len(text_ids) + 1)
                tokens = [self.bos_id] + text_ids
            else:
                ids[row, 0], mask[row, 0] = self.bos_id, True
                columns = slice(max_len - len(text_ids), max_len)
                tokens = text_ids
            ids[row, columns] = torch.tensor(tokens, dtype=torch.long)
            mask[row, columns] = True
        return ids, mask

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=True)

    def save(self, directory: Path) -> None:
        """Write ``tokenizer.json`` and ``tokenizer_config.json`` (the BOS and PAD token strings)."""
        self._tokenizer.save(str(directory / TOKENIZER_FILE))
        config = {"bos_token": self.bos_token, "pad_token": self.pad_token}
        (directory / TOKENIZER_CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")

    @classmethod
    def load(cls, directory: str | Path) -> PromptTokenizer:
        """Load from a directory holding ``tokenizer.json`` (ours or a Hugging Face export)."""
        directory = Path(directory)
        path = directory / TOKENIZER_FILE
        if not path.is_file():
            raise FileNotFoundError(f"no {TOKENIZER_FILE} in {directory}")
        config_path = directory / TOKENIZER_CONFIG_FILE
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        return cls(
            Tokenizer.from_file(str(path)),
            bos_token=_token_string(config.get("bos_token", BOS_TOKEN)),
            pad_token=_token_string(config.get("pad_token", PAD_TOKEN)),
        )


def _token_string(entry: str | dict) -> str:
    """Hugging Face configs store special tokens either as a string or as ``{"content": ...}``."""
    return entry["content"] if isinstance(entry, dict) else entry
