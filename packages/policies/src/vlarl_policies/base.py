"""The policy contract of vlarl: outputs of ``act`` / ``evaluate_actions``, the config base and the module base.

Every policy is a ``torch.nn.Module`` whose public surface is the contract in
``shared/ARCHITECTURE.md``: ``act(obs_batch)`` samples an action chunk and returns everything
``evaluate_actions(forward_inputs)`` needs to recompute its log-probability with gradients. Configs are
dataclasses serialised to ``config.json`` with a ``type`` tag, weights go to ``model.safetensors``
and the tokenizer files sit next to them.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import typing
import uuid
from abc import abstractmethod
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from vlarl_policies.sampling import Generators
from vlarl_policies.tokenizer import PromptTokenizer

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
# A model with random weights trains its own small tokenizer; a published vocabulary is larger.
MAX_TRAINED_VOCAB = 1024

ConfigT = TypeVar("ConfigT", bound="PolicyConfig")
PolicyT = TypeVar("PolicyT", bound="VLAPolicy")


@dataclass
class ActOutput:
    """What ``act`` returns for a batch of B observations.

    actions:        float32 [B, C, A]  normalized env actions (unclipped; the env clips to [-1, 1])
    logprobs:       float32 [B, C, A]  log-density of the sampled chunk, per action dimension
    values:         float32 [B] or None
    forward_inputs: CPU tensors batched on dim 0, everything ``evaluate_actions`` needs
    """

    actions: Tensor
    logprobs: Tensor
    values: Tensor | None
    forward_inputs: dict[str, Tensor]


@dataclass
class EvalOutput:
    """What ``evaluate_actions`` returns: log-probs [B, C, A], entropy [B, C, A] or None, values [B] or None."""

    logprobs: Tensor
    entropy: Tensor | None
    values: Tensor | None


@dataclass
class PolicyConfig:
    """Base of the registered policy configs; subclasses set ``type`` and add their fields."""

    type: ClassVar[str] = ""
    sampling_fields: ClassVar[tuple[str, ...]] = ()
    """Fields that only change how ``act`` samples, never what the weights mean (pi0's flow-SDE noise,
    OpenVLA's temperature): an RL run may sample a saved policy with other values (``resample_saved``)."""
    state_in_prompt: ClassVar[bool] = False
    """Whether the state is normalized by its 1st and 99th percentiles (pi0.5 writes it into the prompt as
    tokens): ``set_state_stats`` then takes ``q01``/``q99``, otherwise ``mean``/``std``."""
    interface_fields: ClassVar[tuple[str, ...]] = (
        "action_dim", "state_dim", "camera_keys", "action_chunk", "action_horizon")
    """What a trainer reads of every policy's config: the env's action size A and state size S, the cameras
    (``<name>_images`` keys of ``obs_batch``, the first required), the chunk C the env executes and the
    horizon H of a demonstration sample ``sft_loss`` reads (H >= C). Each subclass must provide all of them
    (a dataclass field or a property); a subclass missing one fails at import time."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = {name for klass in cls.__mro__ for name in vars(klass).get("__annotations__", {})}
        missing = [name for name in PolicyConfig.interface_fields if name not in declared and not hasattr(cls, name)]
        if missing:
            raise TypeError(f"policy config {cls.__name__} must define {missing} (PolicyConfig.interface_fields)")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the ``type`` tag first; tuples become lists."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {"type": self.type, **{k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}}

    @classmethod
    def from_dict(cls: type[ConfigT], data: Mapping[str, Any]) -> ConfigT:
        """Build the config from ``to_dict`` output; unknown keys or a wrong ``type`` raise ValueError."""
        data = dict(data)
        found_type = data.pop("type", cls.type)
        if found_type != cls.type:
            raise ValueError(f"config type mismatch: {cls.__name__} expects type {cls.type!r}, got {found_type!r}")
        return cls(**_coerce_fields(cls, data))

    def replace(self: ConfigT, **changes: Any) -> ConfigT:
        """A copy with ``changes`` applied (validated again by ``__post_init__``)."""
        return dataclasses.replace(self, **_coerce_fields(type(self), changes))


def _coerce_fields(cls: type[PolicyConfig], data: Mapping[str, Any]) -> dict[str, Any]:
    """Reject unknown field names and turn lists back into tuples where the field is a tuple."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s) {unknown}; known fields: {sorted(names)}")
    hints = typing.get_type_hints(cls)
    coerced = {}
    for key, value in data.items():
        if typing.get_origin(hints[key]) is tuple and isinstance(value, list):
            value = tuple(value)
        coerced[key] = value
    return coerced


class VLAPolicy(nn.Module):
    """Base of every policy: the act/evaluate_actions contract plus save_pretrained / from_pretrained.

    Subclasses declare ``name`` (the registry name) and ``config_class``; a subclass missing either
    fails at import time, not at first use.
    """

    name: ClassVar[str]
    config_class: ClassVar[type[PolicyConfig]]
    # Named size presets for ``make``: field overrides on top of the config defaults.
    presets: ClassVar[Mapping[str, Mapping[str, Any]]] = {"base": {}}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for attribute in ("name", "config_class"):
            if attribute not in cls.__dict__:
                raise TypeError(f"policy class {cls.__name__} must define the class attribute {attribute!r}")

    def __init__(self, config: PolicyConfig, tokenizer: PromptTokenizer) -> None:
        super().__init__()
        self.config = config
        self.tokenizer = tokenizer
        self.value_head: nn.Module | None = None
        """The critic, when the policy has one; ``parameter_groups`` gives it its own learning rate."""
        self._action_queue: deque[Tensor] = deque()

    @classmethod
    def build_tokenizer(cls, config: PolicyConfig, corpus: Sequence[str]) -> PromptTokenizer:
        """The tokenizer ``make`` trains for a model with random weights: a byte-level BPE on ``corpus``
        (instruction-like text) with at most the model's ``vocab_size`` tokens, capped at ``MAX_TRAINED_VOCAB``.
        Policies whose vocabulary has a fixed layout (OpenVLA's action bins) override it."""
        return PromptTokenizer.train(corpus, min(config.vocab_size, MAX_TRAINED_VOCAB))

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @abstractmethod
    def act(self, obs_batch: Mapping[str, Any], deterministic: bool = False, generator: Generators = None,
            zero_start: bool = False) -> ActOutput:
        """Sample an action chunk for a batch of observations (the env contract with a batch axis).

        Args:
            deterministic: the policy's evaluation mode instead of its exploration: a token policy's most
                likely tokens, a flow policy's plain ODE from start noise drawn at random (as RLinf and
                openpi evaluate).
            generator: what the draws come from: torch's global generator (None), one generator, or one
                per row, so that a row's draws do not depend on the rows it shares a batch with.
            zero_start: with ``deterministic``, a flow policy's ODE from zero start noise, the same chunk
                every time; a token policy has no start noise and ignores it.
        """

    @abstractmethod
    def example_forward_inputs(self, obs_batch: Mapping[str, Any]) -> dict[str, Tensor]:
        """``forward_inputs`` with the keys, shapes and dtypes ``act(obs_batch)`` gives, without running the
        model: the observations encoded as ``act`` encodes them, the sampled parts (chains, action tokens)
        as placeholders. It is what a memory estimate of ``evaluate_actions`` needs, at the cost of the
        encoding alone where ``act`` would run the whole model (a dry run at published size)."""

    @abstractmethod
    def set_gradient_checkpointing(self, enabled: bool = True) -> None:
        """Recompute the transformer layers' activations in the backward pass instead of keeping them
        (``enabled``), or keep them again.

        Activation memory of ``evaluate_actions`` / ``sft_loss`` with gradients drops to about one layer's plus
        each layer's input, for about one more forward pass of compute; results and gradients do not
        change. It is meant for the actor's train mode: ``act`` runs under no_grad and keeps no activations
        anyway. A training-time switch, not part of the config: a saved policy loads the same with or
        without it.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement gradient checkpointing")

    def set_state_stats(self, *, mean: Any = None, std: Any = None, q01: Any = None, q99: Any = None) -> None:
        """Store the state's normalization statistics in the weights (they travel with ``save_pretrained``):
        ``q01``/``q99`` when ``config.state_in_prompt``, else ``mean``/``std``, each of the env's state size."""
        raise NotImplementedError

    def set_global_step(self, step: int) -> None:
        """The trainer's current step, for policies whose sampling follows a schedule over training
        (pi0's ``noise_anneal``); policies without one ignore it."""

    @abstractmethod
    def evaluate_actions(
        self, forward_inputs: Mapping[str, Tensor], compute_entropy: bool = True, compute_values: bool = True
    ) -> EvalOutput:
        """Recompute log-probs (and entropy, values) of what ``act`` sampled, with gradients (the name is
        Stable-Baselines3's; "evaluation" in vlarl means scoring a policy in held-out episodes)."""

    @abstractmethod
    def sft_loss(self, batch: Mapping[str, Any]) -> tuple[Tensor, dict[str, float]]:
        """Supervised loss on demonstrations: ``batch`` is an obs batch plus ``actions`` [B, H, A]."""

    def forward(self, batch: Mapping[str, Any]) -> tuple[Tensor, dict[str, float]]:
        """LeRobot-style ``forward``: the supervised loss and its metrics."""
        return self.sft_loss(batch)

    def parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        """Trainable parameters split into ``policy`` and ``value_head`` (which RL trains with its own lr)."""
        value_ids = {id(p) for p in self.value_head.parameters()} if self.value_head is not None else set()
        trainable = [p for p in self.parameters() if p.requires_grad]
        return {
            "policy": [p for p in trainable if id(p) not in value_ids],
            "value_head": [p for p in trainable if id(p) in value_ids],
        }

    # LeRobot-style deployment: a chunk at a time, served one action per env step.

    @torch.no_grad()
    def predict_action_chunk(self, obs_batch: Mapping[str, Any]) -> Tensor:
        """The evaluation chunk [B, C, A]: the actions of ``act(obs_batch, deterministic=True)`` (a flow policy
        draws its start noise from torch's global generator, as LeRobot's pi0 does)."""
        return self.act(obs_batch, deterministic=True).actions

    @torch.no_grad()
    def select_action(self, obs_batch: Mapping[str, Any]) -> Tensor:
        """One action [B, A] at a time, predicting a new chunk whenever the queue runs empty."""
        if not self._action_queue:
            self._action_queue.extend(self.predict_action_chunk(obs_batch).unbind(dim=1))
        return self._action_queue.popleft()

    def reset(self) -> None:
        """Forget queued actions; call on environment reset."""
        self._action_queue.clear()

    def save_pretrained(self, directory: str | Path, overwrite: bool = False) -> Path:
        """Write config.json, model.safetensors and the tokenizer files to ``directory``.

        The files go to a temporary sibling directory that is renamed at the end, so ``directory``
        is never half-written. An existing non-empty ``directory`` raises FileExistsError unless
        ``overwrite`` is true.
        """
        state = {key: value.detach().cpu().contiguous() for key, value in self.state_dict().items()}

        def write(target: Path) -> None:
            (target / CONFIG_FILE).write_text(json.dumps(self.config.to_dict(), indent=2) + "\n")
            save_file(state, str(target / WEIGHTS_FILE), metadata={"format": "pt", "policy": self.name})
            self.tokenizer.save(target)

        return write_directory_atomically(Path(directory), write, overwrite=overwrite)

    @classmethod
    def from_pretrained(cls: type[PolicyT], directory: str | Path) -> PolicyT:
        """Rebuild a policy saved by ``save_pretrained``; returned in eval mode on the CPU."""
        directory = Path(directory)
        config = cls.config_class.from_dict(read_config(directory))
        policy = cls(config, PromptTokenizer.load(directory))
        load_state_dict_strictly(policy, load_file(str(directory / WEIGHTS_FILE)), source=str(directory))
        return policy.eval()


def read_config(directory: Path) -> dict[str, Any]:
    """The parsed ``config.json`` of a saved policy; a missing file raises FileNotFoundError."""
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {CONFIG_FILE} in {directory}: not a directory written by save_pretrained")
    return json.loads(path.read_text())


def load_state_dict_strictly(module: nn.Module, state: Mapping[str, Tensor], source: str) -> None:
    """Load ``state`` into ``module``; any missing or unexpected key raises ValueError listing both."""
    expected = set(module.state_dict())
    missing = sorted(expected - set(state))
    unexpected = sorted(set(state) - expected)
    if missing or unexpected:
        raise ValueError(describe_key_mismatch(source, missing, unexpected))
    module.load_state_dict(dict(state), strict=True)


def describe_key_mismatch(source: str, missing: list[str], unexpected: list[str]) -> str:
    """An error message naming the keys a checkpoint lacks and the keys nobody expected."""
    return (
        f"checkpoint {source} does not match the model: "
        f"{len(missing)} missing key(s) {missing}; {len(unexpected)} unexpected key(s) {unexpected}"
    )


def write_directory_atomically(target: Path, write: Callable[[Path], None], overwrite: bool) -> Path:
    """Run ``write(tmp)`` into a fresh sibling directory, then rename it to ``target``."""
    if target.exists() and not target.is_dir():
        raise FileExistsError(f"{target} exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        raise FileExistsError(f"{target} exists and is not empty; pass overwrite=True to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    staging = target.parent / f".{target.name}.tmp-{tag}"
    staging.mkdir()
    try:
        write(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if target.is_dir():
        retired = target.parent / f".{target.name}.old-{tag}"
        target.rename(retired)
        staging.rename(target)
        shutil.rmtree(retired)
    else:
        staging.rename(target)
    return target
