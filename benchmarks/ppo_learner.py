"""A small PPO learner for state-based gymnasium vector environments, built from vlarl_algos.

It lives beside ``ppo_vs_sb3.py``, its only user, which pits it against Stable-Baselines3; it
is the reference user of vlarl_algos' functions (GAE with truncation bootstrapping,
masked advantage normalization, the clipped actor loss, the value loss, the entropy bonus)
It reads
top to bottom in the order of the algorithm: collect a rollout into preallocated
time-first buffers, bootstrap, compute GAE, then run epochs of shuffled minibatches.

It is fast because nothing in the hot loops is per env or per object: one batched forward
pass gives the actions and values of every env; the actor and critic MLPs are evaluated
together (one batched matmul per layer for both); the env-side buffers are numpy and the
action noise is drawn once per rollout; the minibatches of an epoch are slices of a single
shuffled copy of the rollout, normalized in one call; metrics stay tensors until the end
of an iteration.

The environment must be a ``gymnasium.vector.VectorEnv`` with a flat ``Box`` observation,
a ``Box`` action space and ``autoreset_mode=SAME_STEP`` (the final observation of a
finished episode comes in ``info["final_obs"]``); this module never imports gymnasium.
"""

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from vlarl_algos.gae import compute_gae
from vlarl_algos.masks import explained_variance, normalize_advantages
from vlarl_algos.ppo import entropy_loss, ppo_actor_loss, value_loss

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


@dataclass
class PPOConfig:
    """Hyperparameters of :func:`train_ppo`; the defaults are Stable-Baselines3's PPO defaults."""

    total_timesteps: int = 100_000
    """env steps to train for, summed over all envs"""
    num_steps: int = 2048
    """steps per env in each rollout"""
    minibatch_size: int = 64
    """samples per gradient step"""
    update_epochs: int = 10
    """passes over each rollout"""
    learning_rate: float = 3e-4
    """Adam learning rate"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    norm_adv: bool = True
    """normalize advantages inside each minibatch"""
    clip_low: float = 0.2
    """ratio clip below 1 - clip_low"""
    clip_high: float = 0.2
    """ratio clip above 1 + clip_high"""
    clip_vloss: float | None = None
    """value clipping half-width; None disables value clipping"""
    ent_coef: float = 0.0
    """entropy bonus coefficient"""
    vf_coef: float = 0.5
    """value loss coefficient"""
    max_grad_norm: float = 0.5
    """global gradient norm clip"""
    target_kl: float | None = None
    """stop the epochs of an iteration once approx_kl exceeds 1.5 * target_kl; None never stops"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """widths of the actor's and of the critic's tanh hidden layers"""
    log_std_init: float = 0.0
    """initial log standard deviation of the Gaussian policy"""
    seed: int = 0
    """seeds the network, the action noise, the minibatch order and the first env reset"""

    def __post_init__(self) -> None:
        if self.num_steps < 1 or self.minibatch_size < 2 or self.update_epochs < 1:
            raise ValueError(
                "PPOConfig needs num_steps >= 1, minibatch_size >= 2 and update_epochs >= 1, got "
                f"{self.num_steps}, {self.minibatch_size} and {self.update_epochs}"
            )
        if not self.hidden_sizes:
            raise ValueError("PPOConfig.hidden_sizes must name at least one hidden layer, got ()")


def _orthogonal(shape_out_in: tuple[int, int], gain: float, generator: torch.Generator) -> torch.Tensor:
    """An orthogonally initialized ``[in, out]`` weight, as ``nn.Linear``'s ``[out, in]`` transposed."""
    return nn.init.orthogonal_(torch.empty(shape_out_in), gain=gain, generator=generator).T.contiguous()


class ActorCritic(nn.Module):
    """Gaussian MLP actor and MLP critic with the same hidden widths, evaluated together.

    Mathematically two separate tanh MLPs (no shared weights) with orthogonal init (gain
    sqrt(2) on hidden layers, 0.01 on the action mean, 1 on the value) and a
    state-independent log std. Each hidden layer of the two is one batched matmul over a
    leading axis of size 2, so a forward pass costs the operations of a single MLP.

    Args:
        obs_dim: size of the flat observation.
        action_dim: size of the action.
        hidden_sizes: hidden widths (each used by both the actor and the critic).
        log_std_init: initial log std of every action dimension.
        generator: seeds the initialization.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden_sizes: tuple[int, ...] = (64, 64),
        log_std_init: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        generator = generator if generator is not None else torch.Generator().manual_seed(0)
        hidden_gain = math.sqrt(2.0)
        widths = (obs_dim, *hidden_sizes)
        # Layer k of the actor and of the critic, stacked on a leading axis of size 2.
        self.hidden_weights = nn.ParameterList(
            nn.Parameter(torch.stack([_orthogonal((out, inp), hidden_gain, generator) for _ in range(2)]))
            for inp, out in zip(widths[:-1], widths[1:])
        )
        self.hidden_biases = nn.ParameterList(nn.Parameter(torch.zeros(2, 1, out)) for out in hidden_sizes)
        last = hidden_sizes[-1]
        self.mean_weight = nn.Parameter(_orthogonal((action_dim, last), 0.01, generator))
        self.mean_bias = nn.Parameter(torch.zeros(action_dim))
        self.value_weight = nn.Parameter(_orthogonal((1, last), 1.0, generator))
        self.value_bias = nn.Parameter(torch.zeros(1))
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Action mean ``[N, action_dim]`` and value ``[N]`` for observations ``[N, obs_dim]``."""
        hidden = obs.expand(2, *obs.shape)  # [2 (actor, critic), N, obs_dim], no copy
        for weight, bias in zip(self.hidden_weights, self.hidden_biases):
            hidden = torch.tanh(torch.baddbmm(bias, hidden, weight))
        actor_hidden, critic_hidden = hidden.unbind(0)
        mean = torch.addmm(self.mean_bias, actor_hidden, self.mean_weight)
        value = torch.addmm(self.value_bias, critic_hidden, self.value_weight).squeeze(-1)
        return mean, value

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Value ``[N]`` of observations ``[N, obs_dim]``."""
        return self.forward(obs)[1]


@dataclass
class PPOResult:
    """What :func:`train_ppo` returns: the trained network and one metrics row per iteration."""

    policy: ActorCritic
    history: list[dict[str, float]] = field(default_factory=list)


@dataclass
class _Rollout:
    """Preallocated time-first buffers; the env-side ones are numpy, written without torch calls.

    ``obs`` and ``dones`` carry row ``T`` (the observation after the last step and its
    done), which becomes row 0 of the next rollout; ``values`` carries the bootstrap value.
    """

    obs: np.ndarray  # [T + 1, B, obs_dim] float32
    dones: np.ndarray  # [T + 1, B] bool
    rewards: np.ndarray  # [T, B] float32
    truncations: np.ndarray  # [T, B] bool: cut by a time limit, not terminated
    actions: torch.Tensor  # [T, B, action_dim] unclipped Gaussian samples
    noise: torch.Tensor  # [T, B, action_dim] standard normal draws behind the actions
    values: torch.Tensor  # [T + 1, B]
    final_values: torch.Tensor  # [T, B] values of the final observations of truncated episodes
    episode_return: np.ndarray  # [B] running return of each env's current episode
    episode_len: np.ndarray  # [B]

    @classmethod
    def allocate(cls, num_steps: int, num_envs: int, obs_dim: int, action_dim: int) -> "_Rollout":
        return cls(
            obs=np.zeros((num_steps + 1, num_envs, obs_dim), np.float32),
            dones=np.zeros((num_steps + 1, num_envs), bool),
            rewards=np.zeros((num_steps, num_envs), np.float32),
            truncations=np.zeros((num_steps, num_envs), bool),
            actions=torch.zeros(num_steps, num_envs, action_dim),
            noise=torch.zeros(num_steps, num_envs, action_dim),
            values=torch.zeros(num_steps + 1, num_envs),
            final_values=torch.zeros(num_steps, num_envs),
            episode_return=np.zeros(num_envs),
            episode_len=np.zeros(num_envs, np.int64),
        )


def _check_envs(envs: Any) -> None:
    """Raises ValueError unless ``envs`` is a SAME_STEP vector env with flat Box spaces."""
    mode = envs.metadata.get("autoreset_mode")
    if getattr(mode, "value", mode) != "SameStep":
        raise ValueError(
            "train_ppo needs a vector env with autoreset_mode=AutoresetMode.SAME_STEP (the final "
            f"observation in info['final_obs']), got autoreset_mode={mode!r}"
        )
    obs_shape = getattr(envs.single_observation_space, "shape", None)
    action_space = envs.single_action_space
    if obs_shape is None or len(obs_shape) != 1 or not hasattr(action_space, "low") or len(action_space.shape) != 1:
        raise ValueError(
            "train_ppo needs a flat Box observation and a flat Box action space, got "
            f"{envs.single_observation_space} and {action_space}"
        )


@torch.no_grad()
def _collect(envs: Any, policy: ActorCritic, rollout: _Rollout, generator: torch.Generator) -> list[np.ndarray]:
    """Steps every env ``T`` times with one batched forward per step; returns finished (return, length) pairs."""
    num_steps = rollout.rewards.shape[0]
    low, high = envs.single_action_space.low, envs.single_action_space.high
    rollout.obs[0], rollout.dones[0] = rollout.obs[num_steps], rollout.dones[num_steps]
    rollout.truncations[:] = False
    rollout.final_values.zero_()
    torch.randn(rollout.noise.shape, generator=generator, out=rollout.noise)
    std = policy.log_std.exp()
    obs = torch.from_numpy(rollout.obs)  # shares memory: rows written by the env are seen here
    actions = rollout.actions.numpy()
    finished = []
    for step in range(num_steps):
        mean, rollout.values[step] = policy(obs[step])
        torch.addcmul(mean, std, rollout.noise[step], out=rollout.actions[step])
        next_obs, reward, terminated, truncated, info = envs.step(np.minimum(np.maximum(actions[step], low), high))
        rollout.obs[step + 1] = next_obs
        rollout.rewards[step] = reward
        done = np.logical_or(terminated, truncated)
        rollout.dones[step + 1] = done
        rollout.episode_return += reward
        rollout.episode_len += 1
        if done.any():
            finished.append(np.stack([rollout.episode_return[done], rollout.episode_len[done]], axis=1))
            rollout.episode_return[done] = 0.0
            rollout.episode_len[done] = 0
            cut = np.logical_and(truncated, np.logical_not(terminated))
            if cut.any():
                # The episode goes on past the time limit: bootstrap from its real final
                # observation, not from the reset observation that replaced it.
                final_obs = torch.as_tensor(np.stack(info["final_obs"][cut]), dtype=torch.float32)
                rollout.final_values[step, torch.from_numpy(np.flatnonzero(cut))] = policy.value(final_obs)
                rollout.truncations[step] = cut
    rollout.values[num_steps] = policy.value(obs[num_steps])
    return finished


def _clip_grad_norm_(parameters: list[nn.Parameter], max_norm: float) -> None:
    """Scales the gradients to a global norm of at most ``max_norm``, as ``nn.utils.clip_grad_norm_``.

    The same arithmetic in five foreach operations, without the per-tensor device and dtype
    bookkeeping that dominates the cost for a small network.
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    torch._foreach_mul_(grads, torch.clamp(max_norm / (total_norm + 1e-6), max=1.0))


def _update(
    policy: ActorCritic,
    optimizer: torch.optim.Optimizer,
    config: PPOConfig,
    generator: torch.Generator,
    batch: dict[str, torch.Tensor],
) -> list[dict[str, torch.Tensor]]:
    """Epochs of shuffled minibatches over the flat batch; returns the metrics of every step.

    Each epoch gathers one shuffled copy of the batch and slices its minibatches from it;
    samples past the last full minibatch sit out that epoch (a different few each time).
    """
    batch_size = batch["obs"].shape[0]
    minibatch_size = config.minibatch_size
    num_minibatches = batch_size // minibatch_size
    action_dim = batch["actions"].shape[1]
    parameters = list(policy.parameters())
    metrics = []
    for _ in range(config.update_epochs):
        perm = torch.randperm(batch_size, generator=generator)[: num_minibatches * minibatch_size]
        epoch = {name: tensor[perm] for name, tensor in batch.items()}
        if config.norm_adv:
            # Per-minibatch normalization, all minibatches of the epoch in one call.
            grouped = epoch["advantages"].view(num_minibatches, minibatch_size)
            epoch["advantages"] = normalize_advantages(grouped, dim=1).view(-1)
        for start in range(0, num_minibatches * minibatch_size, minibatch_size):
            mb = {name: tensor[start : start + minibatch_size] for name, tensor in epoch.items()}
            mean, newvalue = policy(mb["obs"])
            log_std = policy.log_std
            newlogprob = -0.5 * ((mb["actions"] - mean) * torch.exp(-log_std)).square() - (log_std + LOG_SQRT_2PI)
            pg_loss, actor_metrics = ppo_actor_loss(
                newlogprob.unsqueeze(1), mb["logprobs"], mb["advantages"],
                clip_low=config.clip_low, clip_high=config.clip_high,
            )
            v_loss, critic_metrics = value_loss(newvalue, mb["values"], mb["returns"], clip_range=config.clip_vloss)
            loss = pg_loss + config.vf_coef * v_loss
            if config.ent_coef != 0.0:
                # The Gaussian's entropy depends on log_std only; it is the same for every sample.
                entropy = (log_std + 0.5 + LOG_SQRT_2PI).expand(minibatch_size, 1, action_dim)
                loss = loss + config.ent_coef * entropy_loss(entropy)[0]
            for parameter in parameters:  # optimizer.zero_grad(set_to_none=True), minus its profiler hook
                parameter.grad = None
            loss.backward()
            _clip_grad_norm_(parameters, config.max_grad_norm)
            optimizer.step()
            metrics.append(actor_metrics | critic_metrics)
            if config.target_kl is not None and actor_metrics["approx_kl"].item() > 1.5 * config.target_kl:
                return metrics
    return metrics


def train_ppo(envs: Any, config: PPOConfig) -> PPOResult:
    """Trains a Gaussian MLP policy with PPO on a gymnasium vector env.

    Args:
        envs: a ``gymnasium.vector.VectorEnv`` of ``B`` envs with ``autoreset_mode=SAME_STEP``,
            a flat ``Box`` observation and a flat ``Box`` action space. Actions are sampled
            unbounded and clipped to the action space only when sent to the env.
        config: the hyperparameters.

    Returns:
        The trained :class:`ActorCritic` and, per iteration, ``global_step``, ``env/return``
        and ``env/episode_len`` (means over the episodes finished in it; NaN if none),
        ``train/actor/{policy_loss,approx_kl,clip_fraction,entropy_loss}``,
        ``train/critic/{value_loss,value_clip_ratio,explained_variance}`` and ``time/sps``.
    """
    _check_envs(envs)
    num_envs = envs.num_envs
    obs_dim = envs.single_observation_space.shape[0]
    action_dim = envs.single_action_space.shape[0]
    batch_size = config.num_steps * num_envs
    if batch_size < config.minibatch_size:
        raise ValueError(
            f"PPOConfig.minibatch_size must be at most num_steps * num_envs = {batch_size}, got {config.minibatch_size}"
        )
    generator = torch.Generator().manual_seed(config.seed)
    policy = ActorCritic(obs_dim, action_dim, config.hidden_sizes, config.log_std_init, generator)
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate, eps=1e-5, fused=True)
    rollout = _Rollout.allocate(config.num_steps, num_envs, obs_dim, action_dim)
    first_obs, _ = envs.reset(seed=config.seed)
    rollout.obs[config.num_steps] = first_obs
    result = PPOResult(policy)

    for iteration in range(1, max(config.total_timesteps // batch_size, 1) + 1):
        start = time.perf_counter()
        finished = _collect(envs, policy, rollout, generator)
        with torch.no_grad():
            log_std = policy.log_std.detach()
            logprobs = -0.5 * rollout.noise.square() - (log_std + LOG_SQRT_2PI)
            advantages, returns = compute_gae(
                torch.from_numpy(rollout.rewards), rollout.values, torch.from_numpy(rollout.dones),
                gamma=config.gamma, gae_lambda=config.gae_lambda,
                truncations=torch.from_numpy(rollout.truncations), final_values=rollout.final_values,
            )
        batch = {
            "obs": torch.from_numpy(rollout.obs[:-1]).reshape(batch_size, obs_dim),
            "actions": rollout.actions.reshape(batch_size, action_dim),
            "logprobs": logprobs.reshape(batch_size, 1, action_dim),
            "advantages": advantages.reshape(batch_size),
            "returns": returns.reshape(batch_size),
            "values": rollout.values[:-1].reshape(batch_size),
        }
        metrics = _update(policy, optimizer, config, generator, batch)

        row = {name: torch.stack([m[name] for m in metrics]).mean().item() for name in metrics[0]}
        entropy = (policy.log_std.detach() + 0.5 + LOG_SQRT_2PI).reshape(1, 1, action_dim)
        episodes = np.concatenate(finished) if finished else np.full((1, 2), np.nan)
        result.history.append(
            {
                "global_step": iteration * batch_size,
                "env/return": float(episodes[:, 0].mean()),
                "env/episode_len": float(episodes[:, 1].mean()),
                "train/actor/policy_loss": row["policy_loss"],
                "train/actor/approx_kl": row["approx_kl"],
                "train/actor/clip_fraction": row["clip_fraction"],
                "train/actor/entropy_loss": entropy_loss(entropy)[1]["entropy_loss"].item(),
                "train/critic/value_loss": row["value_loss"],
                "train/critic/value_clip_ratio": row["value_clip_ratio"],
                "train/critic/explained_variance": explained_variance(batch["values"], batch["returns"]).item(),
                "time/sps": batch_size / (time.perf_counter() - start),
            }
        )
    return result
