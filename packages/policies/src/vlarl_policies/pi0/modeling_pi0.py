"""pi0 and pi0.5 policies: flow-matching action chunks with exact log-probabilities for RL.

``act`` encodes the prefix once, then walks K Euler steps from noise (t = 1) to actions (t = 0)
against the cached prefix. Which steps are stochastic depends on the config:

- flow_sde: one step per sample, drawn uniformly, follows the marginal-preserving SDE with noise
  level a; the others are Euler steps. The log-prob is that step's Gaussian density.
- flow_noise: the step's std comes from a learned head; with ``joint_logprob`` every step is
  stochastic and the log-prob is the mean of the K + 1 log-densities (the initial noise included),
  RLinf's normalization of the joint density, which keeps its scale that of a single step.
- flow_ode, or ``deterministic=True``: no stochastic step (the plain ODE); log-probs are zero. The start
  noise is still drawn at random, as RLinf's and openpi's evaluations draw it, so a deterministic chunk
  comes from the same start distribution the rollouts explore from; ``zero_start=True`` starts from zero
  noise instead and returns the same chunk every time.

The whole chain x_{t_0..t_K} [B, K + 1, H, D] and the stochastic step indices are stored in
``forward_inputs``; ``evaluate_actions`` re-encodes the prefix and recomputes only those transitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vlarl_policies import sampling
from vlarl_policies.base import ActOutput, EvalOutput, VLAPolicy
from vlarl_policies.pi0 import flow
from vlarl_policies.pi0.backbone import ActionExpert, PaliGemmaPrefix, PrefixCache
from vlarl_policies.pi0.configuration_pi0 import PRESETS, Pi0Config, Pi05Config
from vlarl_policies.pi0.finetuning import apply_lora, freeze_vlm
from vlarl_policies.pi0.inputs import FORWARD_INPUT_KEYS, ObservationEncoder, check_forward_inputs
from vlarl_policies.pi0.noise_head import NoiseStdHead
from vlarl_policies.sampling import Generators
from vlarl_policies.tokenizer import PromptTokenizer
from vlarl_policies.value_head import ValueHead


class Pi0Policy(VLAPolicy):
    """pi0: PaliGemma prefix, action expert with a state token, sinusoidal time through an MLP."""

    name: ClassVar[str] = "pi0"
    config_class: ClassVar[type[Pi0Config]] = Pi0Config
    presets: ClassVar[dict[str, dict[str, Any]]] = PRESETS["pi0"]
    config: Pi0Config

    def __init__(self, config: Pi0Config, tokenizer: PromptTokenizer) -> None:
        super().__init__(config, tokenizer)
        self.global_step = 0
        if tokenizer.vocab_size > config.vocab_size:
            raise ValueError(
                f"tokenizer has {tokenizer.vocab_size} tokens but the model's vocab_size is {config.vocab_size}"
            )
        width = config.expert_width
        self.vlm = PaliGemmaPrefix(config)
        self.expert = ActionExpert(config)
        self.action_in_proj = nn.Linear(config.max_action_dim, width)
        self.action_out_proj = nn.Linear(width, config.max_action_dim)
        if config.adarms_expert:
            self.time_mlp_in = nn.Linear(width, width)
            self.time_mlp_out = nn.Linear(width, width)
        else:
            self.state_proj = nn.Linear(config.max_state_dim, width)
            self.action_time_mlp_in = nn.Linear(2 * width, width)
            self.action_time_mlp_out = nn.Linear(width, width)
        dtype = getattr(torch, config.dtype)
        for parameter in self.parameters():
            parameter.data = parameter.data.to(dtype)
        self.observation_encoder = ObservationEncoder(config, tokenizer)
        self.noise_head = (
            NoiseStdHead(width, config.noise_head_hidden, config.max_action_dim, config.noise_logvar_range)
            if config.noise_method == "flow_noise" else None
        )
        value_width = config.vlm_width if config.value_after_vlm else width
        self.value_head = ValueHead(value_width, config.value_head_hidden) if config.add_value_head else None
        if config.train_expert_only:
            freeze_vlm(self.vlm)
        if config.lora_rank > 0:
            apply_lora(self.vlm, config.lora_rank, config.lora_alpha)
        self.register_buffer("time_grid", flow.time_grid(config.num_steps), persistent=False)

    # ----------------------------------------------------------------- model pieces

    @property
    def model_dtype(self) -> torch.dtype:
        return self.action_in_proj.weight.dtype

    def set_gradient_checkpointing(self, enabled: bool = True) -> None:
        """Recompute the layers of SigLIP, Gemma and the action expert in the backward pass."""
        self.vlm.set_gradient_checkpointing(enabled)
        self.expert.gradient_checkpointing = enabled

    def set_state_stats(self, *, mean: Any = None, std: Any = None, q01: Any = None, q99: Any = None) -> None:
        """Store state normalization statistics in the weights: (mean, std) or, for pi0.5, (q01, q99)."""
        self.observation_encoder.set_state_stats(mean=mean, std=std, q01=q01, q99=q99)

    def encode_prefix(self, inputs: Mapping[str, Tensor], keep_hidden: bool) -> PrefixCache:
        """Prefix cache from stored inputs; without VLM gradients it runs under no_grad."""
        pixels = self.observation_encoder.pixels(inputs["images"], self.model_dtype)
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.config.vlm_trainable):
            embeds, pad_mask = self.vlm.embed(pixels, inputs["image_masks"], inputs["tokens"], inputs["token_masks"])
            return self.vlm.encode(embeds, pad_mask, keep_hidden)

    def velocity(self, cache: PrefixCache, states: Tensor, x: Tensor, t: Tensor) -> tuple[Tensor, Tensor]:
        """Velocity v float32 [B, H, D] and the expert's action-token outputs [B, H, W_e] at x [B, H, D], t [B]."""
        config = self.config
        dtype = self.model_dtype
        time_features = flow.sinusoidal_time_embedding(
            t, config.expert_width, config.time_min_period, config.time_max_period
        ).to(dtype)
        action_tokens = self.action_in_proj(x.to(dtype))
        horizon = x.shape[1]
        if config.adarms_expert:
            cond = F.silu(self.time_mlp_out(F.silu(self.time_mlp_in(time_features))))
            embeds = action_tokens
            blocks = torch.zeros(horizon, dtype=torch.long, device=x.device)
        else:
            cond = None
            fused = torch.cat([action_tokens, time_features[:, None, :].expand_as(action_tokens)], dim=-1)
            action_tokens = self.action_time_mlp_out(F.silu(self.action_time_mlp_in(fused)))
            embeds = torch.cat([self.state_proj(states.to(dtype))[:, None, :], action_tokens], dim=1)
            blocks = torch.cat([torch.zeros(1, dtype=torch.long, device=x.device),
                                torch.ones(horizon, dtype=torch.long, device=x.device)])
        hidden = self.expert(cache, embeds, blocks, cond)[:, -horizon:]
        return self.action_out_proj(hidden).float(), hidden

    def step_distribution(self, x: Tensor, v: Tensor, steps: Tensor, hidden: Tensor, noise_levels: Tensor
                          ) -> tuple[Tensor, Tensor]:
        """Mean and std [B, H, D] of a stochastic transition (flow_sde or flow_noise) at integer steps [B];
        ``noise_levels`` [B] are flow_sde's levels the samples were drawn at."""
        delta = 1.0 / self.config.num_steps
        if self.config.noise_method == "flow_sde":
            sigma = flow.sde_sigma(steps, self.config.num_steps, noise_levels)
            return flow.sde_step(x, v, self.time_grid[steps], delta, sigma)
        return flow.ode_mean(x, v, delta), self.noise_head(hidden.float())

    def critic(self, cache: PrefixCache, expert_hidden: Tensor | None) -> Tensor:
        """Values [B]: from the VLM (mean over real prefix tokens) or the expert (mean over action tokens)."""
        if self.config.value_after_vlm:
            weights = cache.pad_mask.float()[..., None]
            features = (cache.hidden.float() * weights).sum(1) / weights.sum(1).clamp_min(1.0)
        else:
            features = expert_hidden.float().mean(dim=1)
        if self.config.detach_critic_input:
            features = features.detach()
        return self.value_head(features)

    def set_global_step(self, step: int) -> None:
        """Under ``noise_anneal``, flow_sde samples at the level the schedule gives this training step."""
        if step < 0:
            raise ValueError(f"global step must be >= 0, got {step}")
        self.global_step = step

    @property
    def sampling_noise_level(self) -> float:
        """flow_sde's noise level now: ``noise_level``, or the annealing schedule at ``global_step``."""
        config = self.config
        if not config.noise_anneal:
            return config.noise_level
        return flow.annealed_noise_level(*config.noise_params, self.global_step)

    def _stochastic_steps(self, batch: int, deterministic: bool, generator: Generators) -> Tensor:
        """int64 [B, n]: the steps sampled with noise (n = 0, 1 or K)."""
        config = self.config
        if deterministic or config.noise_method == "flow_ode":
            return torch.zeros((batch, 0), dtype=torch.long)
        if config.joint_logprob:
            return torch.arange(config.num_steps).expand(batch, -1).clone()
        return sampling.integers(config.num_steps, (batch, 1), generator)

    # ----------------------------------------------------------------- RL interface

    @torch.no_grad()
    def act(self, obs_batch: Mapping[str, Any], deterministic: bool = False, generator: Generators = None,
            zero_start: bool = False) -> ActOutput:
        """Sample a chunk: actions and log-probs [B, C, A], values [B] or None, CPU forward_inputs.

        ``deterministic`` integrates the plain ODE from start noise drawn from ``generator``;
        ``zero_start`` (with ``deterministic``) from zero noise. ``generator`` is one generator or one
        per row of the batch (``vlarl_policies.sampling``)."""
        if zero_start and not deterministic:
            raise ValueError("zero_start=True needs deterministic=True: a sampled chunk starts from drawn noise")
        config = self.config
        inputs = self.observation_encoder(obs_batch)
        device = self.device
        on_device = {key: value.to(device) for key, value in inputs.items()}
        batch = inputs["states"].shape[0]
        shape = (batch, config.action_horizon, config.max_action_dim)
        stochastic_steps = self._stochastic_steps(batch, deterministic, generator)
        cache = self.encode_prefix(on_device, keep_hidden=self.value_head is not None and config.value_after_vlm)
        x = (torch.zeros(shape, device=device) if zero_start
             else config.start_noise_scale * sampling.normal(shape, device, generator))
        noise_levels = torch.full((batch,), self.sampling_noise_level, device=device)
        chain, logprob, first_hidden = [x], torch.zeros(shape, device=device), None
        steps_on_device = stochastic_steps.to(device)
        for step in range(config.num_steps):
            t = self.time_grid[step].expand(batch)
            v, hidden = self.velocity(cache, on_device["states"], x, t)
            if step == 0:
                first_hidden = hidden
            next_x = flow.ode_mean(x, v, 1.0 / config.num_steps)
            noisy = (steps_on_device == step).any(dim=1)
            if bool(noisy.any()):
                mean, std = self.step_distribution(x, v, torch.full((batch,), step, device=device), hidden,
                                                   noise_levels)
                sample = mean + std * sampling.normal(shape, device, generator, only=noisy)
                next_x = torch.where(noisy[:, None, None], sample, next_x)
                step_logprob = flow.gaussian_logprob(next_x, mean, std)
                logprob = logprob + torch.where(noisy[:, None, None], step_logprob, torch.zeros_like(step_logprob))
            x = next_x
            chain.append(x)
        if config.joint_logprob and stochastic_steps.shape[1] > 0:
            logprob = (logprob + _prior_logprob(chain[0], config.start_noise_scale)) / (config.num_steps + 1)
        values = self.critic(cache, first_hidden) if self.value_head is not None else None
        forward_inputs = {
            **inputs,
            "chains": torch.stack(chain, dim=1).cpu(),
            "denoise_inds": stochastic_steps,
            "noise_levels": noise_levels.cpu(),
        }
        return ActOutput(
            actions=self._executed(x).cpu(),
            logprobs=self._executed(logprob).cpu(),
            values=None if values is None else values.float().cpu(),
            forward_inputs=forward_inputs,
        )

    def example_forward_inputs(self, obs_batch: Mapping[str, Any]) -> dict[str, Tensor]:
        """The encoded observations, zero chains and as many stochastic steps as ``act`` stores. A drawn step
        is the last one here, never the first: the critic then needs an expert column of its own in
        ``evaluate_actions``, the costlier of the two cases a sampled batch can give. The steps' count comes
        from ``act``'s own choice, drawn from a generator of its own so that torch's global one stays as the
        caller left it."""
        config = self.config
        inputs = self.observation_encoder(obs_batch)
        batch = inputs["states"].shape[0]
        steps = self._stochastic_steps(batch, deterministic=False, generator=torch.Generator())
        return {
            **inputs,
            "chains": torch.zeros(batch, config.num_steps + 1, config.action_horizon, config.max_action_dim),
            "denoise_inds": steps if config.joint_logprob else torch.full_like(steps, config.num_steps - 1),
            "noise_levels": torch.full((batch,), self.sampling_noise_level),
        }

    def evaluate_actions(self, forward_inputs: Mapping[str, Tensor], compute_entropy: bool = True,
                         compute_values: bool = True) -> EvalOutput:
        """Recompute log-probs [B, C, A] (entropy for flow_noise, values [B]) of stored chains, with gradients.

        The prefix is encoded once; the expert then runs on all stored stochastic steps of all
        samples in one batch (plus the first step when the critic reads the expert).
        """
        config = self.config
        check_forward_inputs(forward_inputs, config)
        device = self.device
        inputs = {key: forward_inputs[key].to(device) for key in FORWARD_INPUT_KEYS}
        chains, stochastic_steps = inputs["chains"].float(), inputs["denoise_inds"].long()
        batch, stochastic = stochastic_steps.shape
        want_values = compute_values and self.value_head is not None
        cache = self.encode_prefix(inputs, keep_hidden=want_values and config.value_after_vlm)
        steps, value_column = stochastic_steps, None
        if want_values and not config.value_after_vlm:
            if stochastic > 0 and bool((steps[:, 0] == 0).all()):
                value_column = 0
            else:
                steps = torch.cat([steps, torch.zeros((batch, 1), dtype=torch.long, device=device)], dim=1)
                value_column = steps.shape[1] - 1
        x = v = hidden = None
        if steps.shape[1] > 0:
            x, v, hidden = self._expert_at_steps(cache, inputs["states"], chains, steps)
        logprob, entropy = torch.zeros_like(chains[:, 0]), None
        if stochastic > 0:
            mean, std = self.step_distribution(
                x[:, :stochastic].flatten(0, 1), v[:, :stochastic].flatten(0, 1),
                stochastic_steps.flatten(), hidden[:, :stochastic].flatten(0, 1),
                inputs["noise_levels"].float().repeat_interleave(stochastic),
            )
            mean, std = mean.unflatten(0, (batch, stochastic)), std.unflatten(0, (batch, stochastic))
            logprob = flow.gaussian_logprob(_gather_steps(chains, stochastic_steps + 1), mean, std).sum(dim=1)
            if config.joint_logprob:
                logprob = (logprob + _prior_logprob(chains[:, 0], config.start_noise_scale)) / (config.num_steps + 1)
            if compute_entropy and config.noise_method == "flow_noise":
                entropy = self._executed(flow.gaussian_entropy(std).mean(dim=1))
        values = None
        if want_values:
            values = self.critic(cache, None if value_column is None else hidden[:, value_column])
        return EvalOutput(logprobs=self._executed(logprob), entropy=entropy, values=values)

    def _expert_at_steps(self, cache: PrefixCache, states: Tensor, chains: Tensor, steps: Tensor
                         ) -> tuple[Tensor, Tensor, Tensor]:
        """Chain entries x, velocities v [B, n, H, D] and expert outputs [B, n, H, W_e] at steps [B, n], n >= 1."""
        x = _gather_steps(chains, steps)
        repeats = steps.shape[1]
        v, hidden = self.velocity(
            cache.repeat_interleave(repeats),
            states.repeat_interleave(repeats, dim=0),
            x.flatten(0, 1),
            self.time_grid[steps].flatten(),
        )
        return x, v.unflatten(0, steps.shape), hidden.unflatten(0, steps.shape)

    def _executed(self, per_step: Tensor) -> Tensor:
        """[B, H, D] -> [B, C, A]: the executed chunk in the environment's action dims."""
        return per_step[:, : self.config.action_chunk, : self.config.action_dim]

    # ----------------------------------------------------------------- supervised pre-training

    def sft_loss(self, batch: Mapping[str, Any]) -> tuple[Tensor, dict[str, Tensor]]:
        """Flow-matching loss on demonstrations: ``batch`` = obs batch + ``actions`` float [B, H, A] normalized.

        Regresses the velocity noise - actions at x_t = t noise + (1 - t) actions with t ~ Beta,
        averaged over all max_action_dim dims (padding included, as openpi does, so the padded
        dims learn to stay at zero). Metrics are detached 0-dim tensors (no device sync).
        """
        config = self.config
        inputs = {key: value.to(self.device) for key, value in self.observation_encoder(batch).items()}
        actions = self.observation_encoder.target_actions(batch, inputs["states"].shape[0]).to(self.device)
        noise = torch.randn_like(actions)
        t = flow.sample_training_time(actions.shape[0], config.time_beta, actions.device)
        x_t = t[:, None, None] * noise + (1.0 - t[:, None, None]) * actions
        cache = self.encode_prefix(inputs, keep_hidden=False)
        v, _ = self.velocity(cache, inputs["states"], x_t, t)
        squared_error = (v - (noise - actions)) ** 2
        loss = squared_error.mean()
        metrics = {
            "sft/loss": loss.detach(),
            "sft/loss_env_dims": squared_error[..., : config.action_dim].mean().detach(),
        }
        return loss, metrics


class Pi05Policy(Pi0Policy):
    """pi0.5: adaRMSNorm time conditioning in the expert and the discretized state in the prompt."""

    name: ClassVar[str] = "pi05"
    config_class: ClassVar[type[Pi05Config]] = Pi05Config
    presets: ClassVar[dict[str, dict[str, Any]]] = PRESETS["pi05"]


def _prior_logprob(noise: Tensor, scale: float) -> Tensor:
    """Element-wise log N(noise; 0, scale^2) of the chain's starting point [B, H, D]."""
    return flow.gaussian_logprob(noise, torch.zeros_like(noise), torch.full_like(noise, scale))


def _gather_steps(chains: Tensor, steps: Tensor) -> Tensor:
    """chains [B, K + 1, H, D], steps [B, n] -> the chain entries [B, n, H, D]."""
    index = steps[:, :, None, None].expand(-1, -1, *chains.shape[2:])
    return torch.gather(chains, 1, index)
