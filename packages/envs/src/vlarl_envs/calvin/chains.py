"""CALVIN's long-horizon protocol: 1000 chains of five tasks, each played in one scene while its tasks succeed.

The chains are the ones calvin's ``multistep_sequences.get_sequences(1000)`` generates, reproduced here from
its rules: the 192 start states split the chains between them as evenly as ``numpy.array_split`` does;
start state ``i`` draws five distinct tasks from numpy's legacy generator seeded with ``i`` until a draw is
possible from that state with no two tasks of one category; the list of (start state, chain) pairs is then
shuffled by the legacy generator seeded with 0. The legacy generator's streams are fixed across numpy
versions, so the chains are too.

A chain plays as calvin's ``evaluate_policy`` plays it, as one episode of ``CalvinEnv`` (reset option
``chain``): the scene starts in the chain's start state, each task gets 360 steps with CALVIN's validation
instruction and succeeds when the task oracle sees it done relative to the state the task started in; the
chain stops at the first failure. ``play_chain`` plays one in this process; the trainer plays a batch on
its env workers, one chain per env. A chain's score is the number of tasks completed, and ``summarize``
turns the scores into the success rate of 1 to 5 tasks in a row and the average length. The full 1000
chains are the benchmark; an experiment on a CPU may score the first N. One difference from calvin: a
start state's block poses are drawn from the chain's index, where calvin's
``get_env_state_for_initial_condition`` puts blocks on fixed spots.

    python -m vlarl_envs.calvin --show 5                     # the first five chains
    python -m vlarl_envs.calvin --play 3 --image-size 64     # three chains with random actions
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vlarl_envs.calvin.tasks import CALVIN_TASKS, TASK_NAMES, SymbolicState, chain_is_possible, initial_conditions
from vlarl_envs.wrappers.action_chunk import REPLAN

NUM_CHAINS = 1000
CHAIN_LENGTH = 5
STEPS_PER_TASK = 360
"""calvin's ``EP_LEN``: the steps each task of a chain gets."""

SHUFFLE_SEED = 0

_CATEGORIES = tuple(CALVIN_TASKS[name].category for name in TASK_NAMES)


@dataclass(frozen=True)
class Chain:
    """An evaluation chain: the symbolic state the scene starts in and the five tasks to do in turn."""

    initial_condition: SymbolicState
    tasks: tuple[str, ...]


@functools.cache
def chains_of_state(state_index: int) -> tuple[tuple[str, ...], ...]:
    """The chains of start state ``state_index``: draws of five distinct tasks from the legacy generator
    seeded with the index, kept where they play from the state. ``permutation(34)[:5]`` is what legacy
    ``choice(34 names, 5, replace=False)`` draws, without its per-call overhead (a state takes about
    40,000 draws); the category rule, the cheaper half of the test, runs first."""
    state = initial_conditions()[state_index]
    count = _chain_counts()[state_index]
    rng = np.random.RandomState(state_index)
    chains = []
    while len(chains) < count:
        draw = rng.permutation(len(TASK_NAMES))[:CHAIN_LENGTH].tolist()
        if len({_CATEGORIES[index] for index in draw}) < CHAIN_LENGTH:
            continue
        names = tuple(TASK_NAMES[index] for index in draw)
        if chain_is_possible(state, names):
            chains.append(names)
    return tuple(chains)


@functools.cache
def _chain_counts() -> tuple[int, ...]:
    """How many of the 1000 chains each start state gets (``numpy.array_split`` of the chain indices)."""
    return tuple(len(part) for part in np.array_split(np.arange(NUM_CHAINS), len(initial_conditions())))


@functools.cache
def _shuffled_order() -> tuple[int, ...]:
    """Position k of the benchmark's list holds chain ``order[k]`` of the list ordered by start state: the
    legacy shuffle's swaps depend on the list's length alone, so shuffling indices shuffles the chains."""
    order = list(range(NUM_CHAINS))
    np.random.RandomState(SHUFFLE_SEED).shuffle(order)
    return tuple(order)


def evaluation_chains(count: int = NUM_CHAINS) -> tuple[Chain, ...]:
    """The first ``count`` of CALVIN's 1000 evaluation chains, in calvin's order (``get_sequences(1000)``).

    Only the start states those chains come from are drawn: the first 50 take a few seconds, all 1000
    about half a minute on one core.
    """
    return tuple(evaluation_chain(index) for index in range(checked_count(count)))


def checked_count(count: int) -> int:
    """``count``, or a ValueError where it is not a number of CALVIN's chains (0..1000)."""
    if not 0 <= count <= NUM_CHAINS:
        raise ValueError(f"CALVIN has {NUM_CHAINS} evaluation chains, asked for {count}")
    return count


def evaluation_chain(index: int) -> Chain:
    """Chain ``index`` (0..999) of calvin's list; only its start state's chains are drawn."""
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < NUM_CHAINS:
        raise ValueError(f"CALVIN's evaluation chains are numbered 0..{NUM_CHAINS - 1}, got {index!r}")
    position = _shuffled_order()[index]
    first_of_state = np.cumsum((0,) + _chain_counts())
    state_index = int(np.searchsorted(first_of_state, position, side="right")) - 1
    tasks = chains_of_state(state_index)[position - first_of_state[state_index]]
    return Chain(dict(initial_conditions()[state_index]), tasks)


Policy = Callable[[Mapping[str, Any]], np.ndarray]
"""obs -> an action (7,) or a chunk of actions (C, 7); with a ``reset()`` method, it is called before each
task, as calvin calls its model's ``reset``."""


def play_chain(env: Any, policy: Policy, chain_index: int, steps_per_task: int = STEPS_PER_TASK) -> int:
    """Play evaluation chain ``chain_index`` in one CALVIN env (any wrapper of a ``CalvinEnv``) as the chain
    episode ``reset(options={"chain": ...})`` starts; the number of tasks completed in a row.

    Only the observation the policy sees next, after a chunk's last action, has its cameras rendered:
    rendering both cameras takes about twice the physics of a step, and the sub-steps' images are
    never looked at. The images come from the state the chunk leaves, so they are the ones a render
    at every step would have shown. A chunk stops where its task succeeds, and the policy plans the next
    task from there."""
    calvin = env.unwrapped
    observation, info = calvin.reset(options={"chain": chain_index, "steps_per_task": steps_per_task})
    ended = False
    while not ended:
        if hasattr(policy, "reset"):
            policy.reset()
        observation, info, ended = play_task(calvin, policy, observation)
    return info["chain_length"]


def play_task(calvin: Any, policy: Policy, observation: Mapping[str, Any]
              ) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """Step ``policy``'s chunks in a chain episode until its current task succeeds or the episode ends;
    the last observation (without images where the episode ended), the last step's info and whether the
    episode ended."""
    while True:
        chunk = np.reshape(policy(observation), (-1, calvin.action_space.shape[0]))
        calvin.defer_images = True
        try:
            for action in chunk:
                observation, _, terminated, truncated, info = calvin.step(np.asarray(action, np.float32))
                if terminated or truncated or info.get(REPLAN):
                    break
        finally:
            calvin.defer_images = False
        if terminated or truncated:  # no policy sees this observation: its images stay unrendered
            return observation, info, True
        observation = calvin.complete_observation(observation)
        if info.get(REPLAN):
            return observation, info, False


def evaluate_chains(env: Any, policy: Policy, num_chains: int = NUM_CHAINS,
                    steps_per_task: int = STEPS_PER_TASK) -> list[int]:
    """The completed length of each of the first ``num_chains`` evaluation chains, one after another."""
    return [play_chain(env, policy, index, steps_per_task) for index in range(checked_count(num_chains))]


def summarize(lengths: Iterable[int]) -> dict[str, float]:
    """``success_k``: the fraction of chains that completed at least k tasks in a row (k = 1..5);
    ``average_length``: the mean number of tasks completed (CALVIN's headline number, 0 to 5)."""
    lengths = np.asarray(list(lengths), dtype=np.int64)
    if lengths.size == 0:
        raise ValueError("summarize needs at least one chain length")
    if lengths.min() < 0 or lengths.max() > CHAIN_LENGTH:
        raise ValueError(f"chain lengths must lie in 0..{CHAIN_LENGTH}, got {lengths.tolist()}")
    summary = {f"success_{k}": float(np.mean(lengths >= k)) for k in range(1, CHAIN_LENGTH + 1)}
    summary["average_length"] = float(lengths.mean())
    return summary


def format_summary(summary: Mapping[str, float]) -> str:
    """One line as calvin prints it: ``1/5: 90.0% | ... | 5/5: 40.0% || average length 3.10``."""
    rates = " | ".join(f"{k}/{CHAIN_LENGTH}: {summary[f'success_{k}'] * 100:.1f}%" for k in range(1, CHAIN_LENGTH + 1))
    return f"{rates} || average length {summary['average_length']:.2f}"
