"""OpenVLA as an RL policy: action tokens decoded one by one, exact categorical log-probabilities.

The language model reads ``[BOS, image patches, prompt]`` (Prismatic puts the patches right after
BOS) and then writes C * A action tokens, each one of the 256 bins at the end of the tokenizer's
vocabulary (all other ids masked). ``act`` decodes them autoregressively against a key/value cache,
sampling each bin from the masked logits with the config's temperature and top-k, or taking the
argmax when deterministic; it stores the chosen token ids. ``evaluate_actions`` feeds prompt and stored
tokens through the model once (teacher forcing) and reads the same distributions, so it returns
the log-probs ``act`` drew with, plus their entropy. The critic reads the LM's last hidden state
at the last prompt position, the state from which the first action token is predicted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import DynamicCache, LlamaForCausalLM

from vlarl_policies.base import ActOutput, EvalOutput, VLAPolicy
from vlarl_policies.openvla import action_tokens
from vlarl_policies.openvla.configuration_openvla import PRESETS, OpenVLAConfig
from vlarl_policies.openvla.finetuning import apply_lora
from vlarl_policies.openvla.inputs import ObservationEncoder, build_prompts, check_forward_inputs
from vlarl_policies.openvla.prismatic import FusedVisionBackbone, Projector, llama_config, positions_from_mask
from vlarl_policies.sampling import Generators
from vlarl_policies.tokenizer import PromptTokenizer
from vlarl_policies.value_head import ValueHead


class OpenVLAPolicy(VLAPolicy):
    """OpenVLA: DINOv2 + SigLIP patches, a 3-layer MLP projector and a Llama that writes action-bin tokens."""

    name: ClassVar[str] = "openvla"
    config_class: ClassVar[type[OpenVLAConfig]] = OpenVLAConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = PRESETS["openvla"]
    reads_states: ClassVar[bool] = False
    """Whether ``forward_inputs`` carry the normalized state (OpenVLA-OFT's proprio input)."""
    config: OpenVLAConfig

    def __init__(self, config: OpenVLAConfig, tokenizer: PromptTokenizer) -> None:
        super().__init__(config, tokenizer)
        if tokenizer.vocab_size > config.vocab_size:
            raise ValueError(
                f"tokenizer has {tokenizer.vocab_size} tokens but the model's vocab_size is {config.vocab_size}"
            )
        self.vision_backbone = FusedVisionBackbone(config)
        self.projector = Projector(self.vision_backbone.embed_dim, config.llm_width)
        self.language_model = LlamaForCausalLM(llama_config(config))
        self.build_state_input()
        dtype = getattr(torch, config.dtype)
        for parameter in self.parameters():
            parameter.data = parameter.data.to(dtype)
        self.observation_encoder = ObservationEncoder(config, tokenizer, reads_states=self.reads_states)
        self.value_head = (ValueHead(config.llm_width, config.value_head_hidden, self.values_per_sample)
                           if config.add_value_head else None)
        if config.lora_rank > 0:
            alpha = config.lora_rank if config.lora_alpha is None else config.lora_alpha
            apply_lora(self.vision_backbone, self.projector, self.language_model, config.lora_rank, alpha)
        if config.gradient_checkpointing:
            self.set_gradient_checkpointing(True)
        self.register_buffer("bin_centres", action_tokens.bin_centres(config.n_action_bins), persistent=False)

    # ----------------------------------------------------------------- vocabulary and tokenizer

    @classmethod
    def build_tokenizer(cls, config: OpenVLAConfig, corpus: Sequence[str]) -> PromptTokenizer:
        """A byte-level BPE of ``tokenizer_vocab_size`` ids whose last ``n_action_bins`` are the action
        bins, trained on the corpus as instructions and as OpenVLA prompts (so the template's words are
        single tokens)."""
        bins = [f"<action_bin_{index}>" for index in range(config.n_action_bins)]
        return PromptTokenizer.train(list(corpus) + build_prompts(corpus), config.tokenizer_vocab_size, bins)

    # ----------------------------------------------------------------- model pieces

    @property
    def values_per_sample(self) -> int:
        """1: values [B]."""
        return 1

    def build_state_input(self) -> None:
        """OpenVLA reads no state; OFT adds its proprio projector here."""

    def state_tokens(self, inputs: Mapping[str, Tensor]) -> list[tuple[Tensor, Tensor]]:
        """(embeddings [B, n, W], mask [B, n]) pairs placed after the image patches; none for OpenVLA."""
        return []

    @property
    def model_dtype(self) -> torch.dtype:
        return self.language_model.model.norm.weight.dtype

    def set_gradient_checkpointing(self, enabled: bool = True) -> None:
        """Recompute the ViT blocks (timm's switch) and the Llama layers (transformers', non-reentrant so
        frozen inputs under LoRA still carry gradients to the adapters) in the backward pass.

        transformers checkpoints only in train mode, and drops a key/value cache while it does; the
        autoregressive ``act`` therefore decodes with the language model in eval mode.
        """
        self.vision_backbone.set_grad_checkpointing(enabled)
        if enabled:
            self.language_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            self.language_model.gradient_checkpointing_disable()

    def set_state_stats(self, *, mean: Any = None, std: Any = None, q01: Any = None, q99: Any = None) -> None:
        """State statistics, (mean, std) or (q01, q99); stored where the policy reads the state (OFT's
        proprio), accepted and ignored otherwise, so a trainer treats every policy alike."""
        self.observation_encoder.set_state_stats(mean=mean, std=std, q01=q01, q99=q99)

    def image_tokens(self, images: Tensor, image_masks: Tensor) -> tuple[Tensor, Tensor]:
        """Projected patches [B, n * P, W] and their mask of the cameras present in the batch.

        A camera no row has (an optional wrist camera the env does not send) is left out rather than
        run and masked: masked tokens take no position and no attention, so both give the same model.
        """
        present = image_masks.any(dim=0)
        if not bool(present.all()):
            images, image_masks = images[:, present], image_masks[:, present]
        batch, cameras = images.shape[:2]
        patches = self.vision_backbone(images.flatten(0, 1), self.model_dtype)
        embeds = self.projector(patches).view(batch, cameras * patches.shape[1], -1)
        return embeds, image_masks.repeat_interleave(patches.shape[1], dim=1)

    def prefix(self, inputs: Mapping[str, Tensor]) -> tuple[Tensor, Tensor]:
        """Embeddings [B, P, W] and mask [B, P] of BOS, image patches, state tokens and the prompt."""
        tokens, token_masks = inputs["tokens"], inputs["token_masks"]
        text = self.language_model.get_input_embeddings()(tokens)
        images, image_mask = self.image_tokens(inputs["images"], inputs["image_masks"])
        parts = [(text[:, :1], token_masks[:, :1]), (images, image_mask), *self.state_tokens(inputs),
                 (text[:, 1:], token_masks[:, 1:])]
        return torch.cat([e.to(images.dtype) for e, _ in parts], dim=1), torch.cat([m for _, m in parts], dim=1)

    def hidden_states(self, embeds: Tensor, mask: Tensor) -> Tensor:
        """The LM's final hidden states [B, T, W] under the causal mask; padding takes no position."""
        return self.language_model.model(
            inputs_embeds=embeds, attention_mask=mask, position_ids=positions_from_mask(mask), use_cache=False
        ).last_hidden_state

    def bin_logits(self, hidden: Tensor) -> Tensor:
        """float32 logits [..., n_bins] of the action-bin ids (through the full head, so LoRA on it counts)."""
        begin = self.config.action_token_begin
        return self.language_model.lm_head(hidden)[..., begin: begin + self.config.n_action_bins].float()

    def bin_log_probs(self, hidden: Tensor) -> Tensor:
        """Log-probs [..., n_bins] of the sampling distribution (temperature, top-k, other ids masked)."""
        return action_tokens.bin_log_probs(self.bin_logits(hidden), self.config.temperature, self.config.top_k)

    def critic(self, prompt_end: Tensor) -> Tensor:
        """Values from the hidden state at the last prompt position [B, W]."""
        features = prompt_end.float()
        if self.config.detach_critic_input:
            features = features.detach()
        return self.value_head(features)

    def action_hidden(self, inputs: Mapping[str, Tensor], token_ids: Tensor) -> tuple[Tensor, Tensor]:
        """Hidden states [B, C * A, W] that predict the action tokens ``token_ids`` [B, C * A] (teacher
        forcing: the prompt's last position predicts the first token), and the prompt's last one [B, W]."""
        prefix, prefix_mask = self.prefix(inputs)
        previous = self.language_model.get_input_embeddings()(token_ids[:, :-1]).to(prefix.dtype)
        embeds = torch.cat([prefix, previous], dim=1)
        mask = torch.cat([prefix_mask, torch.ones_like(token_ids[:, :-1], dtype=torch.bool)], dim=1)
        hidden = self.hidden_states(embeds, mask)
        prompt_end = prefix.shape[1] - 1
        return hidden[:, prompt_end:], hidden[:, prompt_end]

    # ----------------------------------------------------------------- RL interface

    @torch.no_grad()
    def act(self, obs_batch: Mapping[str, Any], deterministic: bool = False, generator: Generators = None,
            zero_start: bool = False) -> ActOutput:
        """Sample a chunk: actions and log-probs [B, C, A], values or None, CPU forward_inputs.

        ``deterministic`` takes the most likely token of every action dimension, with or without
        ``zero_start`` (a flow policy's option: a token policy has no start noise)."""
        config = self.config
        inputs = self.observation_encoder(obs_batch)
        on_device = {key: value.to(self.device) for key, value in inputs.items()}
        bins, log_probs, prompt_end = self.sample_bins(on_device, deterministic, generator)
        shape = (bins.shape[0], config.action_chunk, config.action_dim)
        values = self.critic(prompt_end) if self.value_head is not None else None
        forward_inputs = {**inputs, "action_tokens": (bins + config.action_token_begin).view(shape).cpu()}
        return ActOutput(
            actions=self.bin_centres[bins].view(shape).cpu(),
            logprobs=log_probs.view(shape).cpu(),
            values=None if values is None else values.float().cpu(),
            forward_inputs=forward_inputs,
        )

    def example_forward_inputs(self, obs_batch: Mapping[str, Any]) -> dict[str, Tensor]:
        """The encoded observations and every action token at the first bin's id."""
        config = self.config
        inputs = self.observation_encoder(obs_batch)
        shape = (inputs["tokens"].shape[0], config.action_chunk, config.action_dim)
        return {**inputs, "action_tokens": torch.full(shape, config.action_token_begin, dtype=torch.long)}

    def sample_bins(self, inputs: Mapping[str, Tensor], deterministic: bool, generator: Generators
                    ) -> tuple[Tensor, Tensor, Tensor]:
        """Bins [B, C * A], their log-probs [B, C * A] and the prompt's last hidden state [B, W].

        Autoregressive: the prefix fills a key/value cache, then each chosen token is fed back at the
        next position. Gradient checkpointing would drop that cache in train mode, so the language model
        decodes in eval mode (no layer here behaves differently in train mode otherwise).
        """
        config = self.config
        prefix, mask = self.prefix(inputs)
        positions = positions_from_mask(mask)
        cache = DynamicCache(config=self.language_model.config)
        embed = self.language_model.get_input_embeddings()
        bins, log_probs = [], []
        with _eval_mode(self.language_model):
            hidden = self.language_model.model(inputs_embeds=prefix, attention_mask=mask, position_ids=positions,
                                               past_key_values=cache, use_cache=True).last_hidden_state[:, -1]
            prompt_end = hidden
            next_position = positions[:, -1:] + 1
            for step in range(config.num_action_tokens):
                step_log_probs = self.bin_log_probs(hidden)
                chosen = (step_log_probs.argmax(dim=-1) if deterministic
                          else action_tokens.sample_bins(step_log_probs, generator))
                bins.append(chosen)
                log_probs.append(step_log_probs.gather(-1, chosen[:, None]).squeeze(-1))
                if step == config.num_action_tokens - 1:
                    break
                token = embed(chosen[:, None] + config.action_token_begin).to(prefix.dtype)
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
                hidden = self.language_model.model(inputs_embeds=token, attention_mask=mask, position_ids=next_position,
                                                   past_key_values=cache, use_cache=True).last_hidden_state[:, -1]
                next_position = next_position + 1
        return torch.stack(bins, dim=1), torch.stack(log_probs, dim=1), prompt_end

    def evaluate_actions(self, forward_inputs: Mapping[str, Tensor], compute_entropy: bool = True,
                         compute_values: bool = True) -> EvalOutput:
        """Log-probs [B, C, A] of the stored action tokens with gradients, the entropy [B, C, A] of their
        masked distributions, and values, from one forward pass."""
        config = self.config
        keys = self.observation_encoder.keys + ("action_tokens",)
        check_forward_inputs(forward_inputs, keys, config)
        inputs = {key: forward_inputs[key].to(self.device) for key in keys}
        token_ids = inputs["action_tokens"].flatten(1)
        hidden, prompt_end = self.action_hidden(inputs, token_ids)
        log_probs = self.bin_log_probs(hidden)
        bins = action_tokens.token_ids_to_bins(token_ids, config.action_token_begin)
        shape = inputs["action_tokens"].shape
        chosen = log_probs.gather(-1, bins[..., None]).squeeze(-1).view(shape)
        entropy = action_tokens.categorical_entropy(log_probs).view(shape) if compute_entropy else None
        values = self.critic(prompt_end) if compute_values and self.value_head is not None else None
        return EvalOutput(logprobs=chosen, entropy=entropy, values=values)

    # ----------------------------------------------------------------- supervised pre-training

    def sft_loss(self, batch: Mapping[str, Any]) -> tuple[Tensor, dict[str, Tensor]]:
        """Cross-entropy of the demonstrated action tokens: ``batch`` = obs batch + ``actions`` [B, C, A]
        normalized to [-1, 1], binned as OpenVLA bins them.

        The categorical is the one ``act`` samples from at temperature 1: the 256 bins, all other ids
        masked. Metrics are detached 0-dim tensors (no device sync): the loss (also as
        ``sft/loss_env_dims``, every token being an env dimension), the argmax accuracy and the mean
        absolute error of the argmax bin centres.
        """
        config = self.config
        inputs = {key: value.to(self.device) for key, value in self.observation_encoder(batch).items()}
        targets = self.observation_encoder.target_actions(batch, inputs["tokens"].shape[0]).to(self.device)
        bins = action_tokens.actions_to_bins(targets, config.n_action_bins).flatten(1)
        hidden, _ = self.action_hidden(inputs, bins + config.action_token_begin)
        logits = self.bin_logits(hidden)
        loss = F.cross_entropy(logits.flatten(0, 1), bins.flatten())
        predicted = logits.argmax(dim=-1)
        metrics = {
            "sft/loss": loss.detach(),
            "sft/loss_env_dims": loss.detach(),
            "sft/accuracy": (predicted == bins).float().mean().detach(),
            "sft/action_l1": (self.bin_centres[predicted] - targets.flatten(1)).abs().mean().detach(),
        }
        return loss, metrics

    # ----------------------------------------------------------------- deployment helpers

    def unnormalize(self, actions: Tensor, unnorm_key: str | None = None) -> Tensor:
        """Normalized actions [..., A] -> robot units with the checkpoint's ``norm_stats`` (q01, q99, mask).

        ``unnorm_key`` names the dataset; without one, the config's ``unnorm_key`` or the only dataset.
        """
        stats = self.config.norm_stats or {}
        key = unnorm_key if unnorm_key is not None else self.config.unnorm_key
        if key is None:
            if len(stats) != 1:
                raise ValueError(f"pass unnorm_key= one of the datasets in norm_stats: {sorted(stats)}")
            key = next(iter(stats))
        if key not in stats:
            raise ValueError(f"unnorm_key {key!r} is not in norm_stats {sorted(stats)}")
        return action_tokens.unnormalize_actions(actions, stats[key]["action"])


@contextmanager
def _eval_mode(module: nn.Module) -> Iterator[None]:
    """``module`` in eval mode inside the block, in its previous mode after it."""
    was_training = module.training
    module.eval()
    try:
        yield
    finally:
        module.train(was_training)
