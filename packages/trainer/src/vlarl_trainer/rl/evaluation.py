"""Evaluation on a replayable episode list: fixed episode ids per task and split, actions chosen as
``eval.sampling`` says, success per task and per split.

Every episode draws from a generator of its own, seeded by the run's seed and the episode (its reset
options), so an evaluation replays bit-identically, and an episode scores the same whichever envs,
workers and rounds the list is spread over.

The one evaluator of vlarl: the trainer runs ``evaluate`` on its own workers, and vlarl-eval and
vlarl-sft run ``evaluate_checkpoint``, which starts the same env and rollout workers for a saved
policy, so a checkpoint scores the same whichever command scores it. CALVIN's long-horizon chains play on
the same workers, one chain per env (``add_calvin_chains``)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from vlarl_trainer.config import VlarlConfig
from vlarl_trainer.progress import progress_bar
from vlarl_trainer.rl.eval_env import check_calvin_chains, check_eval_splits, env_tasks, evaluation_env
from vlarl_trainer.rl.rollout import Shards, run_episodes
from vlarl_trainer.rl.workers.env_worker import EPISODE_STATISTICS

IN_DISTRIBUTION_SPLITS = ("train", "test")
"""Every family's in-distribution splits; any other split (PutOnPlate's vision, semantic and execution,
LIBERO-Pro's, MetaWorld's unseen phrasings) is out of distribution."""
CHAIN_PREFIX = "eval/chains/"
"""CALVIN's chain metrics: ``success_1`` .. ``success_5`` and ``average_length``."""
OOD_AVERAGE = "ood_average"
"""The pseudo-split that holds the mean of the out-of-distribution splits' means (RLinf's OOD average)."""
GROUP_MEAN = "group_mean_success_once"
"""``eval/<split>/group_mean_success_once``: the unweighted mean of a split's group success rates, RLinf's
"Avg." of MT50 by difficulty (each group counts alike, whatever its number of tasks)."""


def evaluation_options(config: VlarlConfig) -> list[dict[str, Any]]:
    """Episode ids first_episode_id..+episodes_per_task-1 (``eval.*``) for every task of the evaluation env
    and every split, in a fixed order.

    Tasks alternate within an episode id, so when the number of envs is a multiple of the
    number of tasks, each env plays one task throughout: a multi-task env then builds one
    simulator, not one per task (MetaWorld MT10 on 20 envs: 20 simulators instead of 200)."""
    check_eval_splits(config)
    config = evaluation_env(config)
    return episode_options(env_tasks(config), config.eval.splits, config.eval.episodes_per_task,
                           config.eval.first_episode_id)


def episode_options(tasks: list[str], splits: list[str], episodes_per_task: int, first_episode_id: int
                    ) -> list[dict[str, Any]]:
    """Episode ids first_episode_id..+episodes_per_task-1 of every task in every split, tasks alternating
    within an id."""
    return [{"episode_id": episode_id, "split": split, "task": task}
            for split in splits
            for episode_id in range(first_episode_id, first_episode_id + episodes_per_task)
            for task in tasks]


def episode_seed(seed: int, option: dict[str, Any]) -> int:
    """The seed of an episode's own generator: a hash of the run's seed and the episode's reset options,
    the same in every process (Python's ``hash`` of a string is not)."""
    text = f"{seed}/{json.dumps(option, sort_keys=True, default=str)}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1


def evaluate(
    shards: Shards, options: list[dict[str, Any]], chunk_steps: int, seed: int, video_dir: Path | None = None,
    group_of: Callable[[str, str, int], str | None] | None = None, video_info: bool = True, progress: bool = False,
    sampling: str = "deterministic",
) -> dict[str, Any]:
    """Play every listed episode (in rounds of the envs) and aggregate per split, task and group.

    Args:
        sampling: how the policy acts (``eval.sampling``: ``deterministic``, ``sample`` or ``zero_start``).
        group_of: the env family's ``group(task, split, episode_id)`` (MetaWorld's difficulty,
            PutOnPlate's variation); None reports no groups.
        progress: show a bar over the rounds' chunk steps, with an ETA.

    Returns:
        ``metrics`` (``eval/<statistic>`` means over every episode, ``eval/<split>/success_once`` over a
        split's, ``eval/<split>/success_once/<task>`` and ``eval/<split>/group_success_once/<group>``),
        ``table`` {(split, task): success rate}, ``groups`` {(split, group): success rate}, ``splits``
        {split: success rate, and ``ood_average`` where an out-of-distribution split was scored},
        ``episodes`` (one dict per episode) and ``videos``.
    """
    num_envs = shards.num_envs
    per_episode: list[dict[str, Any]] = []
    videos = []
    rounds = range(0, len(options), num_envs)
    with progress_bar(len(rounds) * chunk_steps, "eval", "chunk", progress, leave=False) as bar:
        for round_index, start in enumerate(rounds):
            chunk = options[start : start + num_envs]
            # An env the last round leaves idle resets to its first-round episode, keeping its task (a task
            # of its own would build it another simulator: MT50's 50 idle envs of a 250-episode run, 5 GB),
            # and plays nothing.
            padded = chunk + [options[index % len(options)] for index in range(len(chunk), num_envs)]
            video_path = None
            if video_dir is not None:
                video_dir.mkdir(parents=True, exist_ok=True)
                video_path = str(video_dir / f"round_{round_index:03d}.mp4")
            results = run_episodes(shards, padded, chunk_steps, sampling, seed=seed, keep_trajectories=False,
                                   video_path=video_path, video_info=video_info, on_chunk=lambda: bar.update(1),
                                   idle=[index >= len(chunk) for index in range(num_envs)],
                                   episode_seeds=[episode_seed(seed, option) for option in padded])
            if results.get("video"):
                videos.append(results["video"])
            for index, entry in enumerate(chunk):
                task = entry.get("task") or results["tasks"][index]
                group = group_of(task, entry["split"], entry["episode_id"]) if group_of is not None else None
                per_episode.append({
                    "split": entry["split"],
                    "task": task,
                    "episode_id": entry["episode_id"],
                    "group": group,
                    **{name: float(results[name][index]) for name in EPISODE_STATISTICS},
                })
    metrics = {f"eval/{name}": float(np.mean([e[name] for e in per_episode])) for name in EPISODE_STATISTICS}
    table = success_by(per_episode, "task")
    groups = success_by([episode for episode in per_episode if episode["group"] is not None], "group")
    splits = with_ood_average({split: rate for (split, _), rate in success_by(per_episode, "split").items()})
    metrics.update({f"eval/{split}/success_once": rate for split, rate in splits.items()})
    metrics.update({f"eval/{split}/success_once/{task}": rate for (split, task), rate in table.items()})
    metrics.update({f"eval/{split}/group_success_once/{group}": rate for (split, group), rate in groups.items()})
    metrics.update({f"eval/{split}/{GROUP_MEAN}": rate for split, rate in group_means(groups).items()})
    return {"metrics": metrics, "table": table, "groups": groups, "splits": splits, "videos": videos,
            "episodes": per_episode}


def evaluate_config(config: VlarlConfig, shards: Shards, chunk_steps: int, video_dir: Path | None = None
                    ) -> dict[str, Any]:
    """``evaluate`` on what ``eval.*`` asks for: its episodes of the evaluation env (``evaluation_env``),
    that env family's groups, the run's seed and video captions."""
    from vlarl_envs import family_of

    scored = evaluation_env(config)
    options, group_of = evaluation_options(scored), family_of(scored.env.id).group
    report = evaluate(shards, options, chunk_steps, config.runner.seed, video_dir, group_of,
                      config.runner.video_info, config.runner.progress, config.eval.sampling)
    for mode in config.eval.also_sampling:
        other = evaluate(shards, options, chunk_steps, config.runner.seed, None, group_of,
                         progress=config.runner.progress, sampling=mode)
        add_other_sampling(report, other, mode)
    return report


def training_env_options(config: VlarlConfig) -> list[dict[str, Any]]:
    """The episodes ``eval.training_env_splits`` asks of the training env: the ids ``evaluation_options``
    plays, of its every task in each split named, in the same order."""
    splits = list(dict.fromkeys(config.eval.training_env_splits.values()))
    return episode_options(env_tasks(config), splits, config.eval.episodes_per_task, config.eval.first_episode_id)


def add_training_env_splits(report: dict[str, Any], config: VlarlConfig, shards: Shards, chunk_steps: int
                            ) -> None:
    """Score ``eval.training_env_splits`` on the training env's ``shards`` and join each to ``report`` (an
    evaluation of another env) as the split its key names: its success, per-task and per-group rates, group
    mean and episodes. ``eval/success_once`` and the OOD average stay the evaluation env's."""
    from vlarl_envs import family_of

    named = config.eval.training_env_splits
    if not named:
        return
    other = evaluate(shards, training_env_options(config), chunk_steps, config.runner.seed,
                     group_of=family_of(config.env.id).group, progress=config.runner.progress,
                     sampling=config.eval.sampling)
    other_group_means = group_means(other["groups"])
    for name, split in named.items():
        report["splits"][name] = other["splits"][split]
        report["metrics"][f"eval/{name}/success_once"] = other["splits"][split]
        for (scored_split, task), rate in other["table"].items():
            if scored_split == split:
                report["table"][(name, task)] = rate
                report["metrics"][f"eval/{name}/success_once/{task}"] = rate
        for (scored_split, group), rate in other["groups"].items():
            if scored_split == split:
                report["groups"][(name, group)] = rate
                report["metrics"][f"eval/{name}/group_success_once/{group}"] = rate
        if split in other_group_means:
            report["metrics"][f"eval/{name}/{GROUP_MEAN}"] = other_group_means[split]
        report["episodes"] += [{**episode, "split": name} for episode in other["episodes"] if episode["split"] == split]


def add_other_sampling(report: dict[str, Any], other: dict[str, Any], mode: str) -> None:
    """Each split's success in ``other``, an evaluation of the same episodes under sampling ``mode``, joins
    ``report`` as split ``<split>_<mode>`` (``splits`` and ``eval/<split>_<mode>/success_once``); the
    report's own splits keep scoring the run's ``eval.sampling``."""
    for split, rate in other["splits"].items():
        if split == OOD_AVERAGE:
            continue
        report["splits"][f"{split}_{mode}"] = rate
        report["metrics"][f"eval/{split}_{mode}/success_once"] = rate


def with_ood_average(splits: dict[str, float]) -> dict[str, float]:
    """``splits`` and, where any is out of distribution, ``ood_average``: the unweighted mean of those
    splits' success, so each kind of shift counts alike however many episodes it has."""
    held_out = [rate for split, rate in splits.items() if split not in IN_DISTRIBUTION_SPLITS]
    return {**splits, OOD_AVERAGE: float(np.mean(held_out))} if held_out else splits


def group_means(groups: dict[tuple[str, str], float]) -> dict[str, float]:
    """Per split, the unweighted mean of its groups' success rates (``GROUP_MEAN``)."""
    per_split: dict[str, list[float]] = defaultdict(list)
    for (split, _), rate in groups.items():
        per_split[split].append(rate)
    return {split: float(np.mean(rates)) for split, rates in per_split.items()}


def success_by(episodes: list[dict[str, Any]], key: str) -> dict[tuple[str, str], float]:
    """Mean ``success_once`` per (split, ``episode[key]``)."""
    grouped: dict[tuple[str, str], list[float]] = defaultdict(list)
    for episode in episodes:
        grouped[(episode["split"], episode[key])].append(episode["success_once"])
    return {label: float(np.mean(values)) for label, values in grouped.items()}


def evaluate_checkpoint(config: VlarlConfig, policy_dir: str | Path, video_dir: Path | None = None) -> dict[str, Any]:
    """Score the saved policy at ``policy_dir`` on ``env.*`` with ``eval.*``, then on ``eval.calvin_chains`` of
    CALVIN's chains, on workers placed as in training. ``eval.episodes_per_task=0`` with chains scores the
    chains alone.

    Returns ``evaluate``'s report, with ``time/eval`` among its metrics and, with chains, their
    ``eval/chains/...`` metrics and ``chains`` (``play_calvin_chains``' lengths and summary)."""
    import time

    from vlarl_trainer.rl.validation import validate

    config = evaluation_env(config)
    config = dataclasses.replace(config, policy=dataclasses.replace(config.policy, pretrained=str(policy_dir)))
    check_calvin_chains(config)
    layout = validate(config, training=False)
    started = time.perf_counter()
    report = evaluate_on_workers(config, layout, policy_dir, video_dir)
    report["metrics"]["time/eval"] = time.perf_counter() - started
    return report


def evaluate_on_workers(config: VlarlConfig, layout: Any, policy_dir: str | Path, video_dir: Path | None
                        ) -> dict[str, Any]:
    """``evaluate_config`` and CALVIN's chains (``eval.calvin_chains``) on env and rollout workers started
    for the saved policy and stopped after."""
    import ray

    from vlarl_trainer.rl.cluster import Deadline, start_ray
    from vlarl_trainer.rl.rollout import inference_placements, place_workers, start_inference_workers

    own_ray = not ray.is_initialized()
    start_ray(config.cluster.address, config.cluster.num_cpus)
    shards = gpus = None
    try:
        gpus = place_workers(inference_placements(layout), config.cluster.start_timeout)
        shards = start_inference_workers(config, layout, str(policy_dir), gpus, Deadline(config.cluster.call_timeout))
        for group in (shards.env, shards.rollout):
            group.identify(config.cluster.start_timeout)
        if config.eval.episodes_per_task > 0 or not config.eval.calvin_chains:
            report = evaluate_config(config, shards, layout.chunk_steps, video_dir)
        else:
            report = {"metrics": {}, "table": {}, "groups": {}, "videos": [], "episodes": []}
        if config.eval.calvin_chains:
            add_calvin_chains(report, config, shards)
        return report
    finally:
        if shards is not None:
            shards.env.kill()
            shards.rollout.kill()
        if gpus is not None:
            gpus.remove()
        if own_ray:
            ray.shutdown()


def add_calvin_chains(report: dict[str, Any], config: VlarlConfig, shards: Shards) -> None:
    """Score the policy of ``shards``' rollout workers on ``play_calvin_chains`` into an evaluation
    ``report``: the chains' metrics join its own, their lengths and summary go under ``chains``."""
    chains = play_calvin_chains(config, shards)
    report["metrics"].update(chains.pop("metrics"))
    report["chains"] = chains


def play_calvin_chains(config: VlarlConfig, shards: Shards) -> dict[str, Any]:
    """Play the first ``eval.calvin_chains`` evaluation chains, acting as ``eval.sampling`` says, on the
    evaluation env's workers (``shards``), one chain per env and as many at once as there are envs. A
    chain is one episode of the env (reset option ``chain``) and its return is the tasks it completed.
    The chains are CALVIN's, over all 34 tasks, whatever subset of them ``env.kwargs.tasks`` trains and
    scores single episodes on.

    Returns ``lengths`` (tasks completed per chain), ``summary`` (``vlarl_envs.calvin.chains.summarize``)
    and ``metrics``: ``eval/chains/success_1`` .. ``success_5`` and ``eval/chains/average_length``."""
    from vlarl_envs.calvin.chains import CHAIN_LENGTH, STEPS_PER_TASK, summarize

    check_calvin_chains(config)
    action_chunk = evaluation_env(config).env.action_chunk or 1
    # A task's first chunk starts at the task (a success ends the chunk), so each takes at most this many.
    chunk_steps = CHAIN_LENGTH * -(-STEPS_PER_TASK // action_chunk)
    options = [{"chain": index} for index in range(config.eval.calvin_chains)]
    num_envs = shards.num_envs
    lengths: list[int] = []
    with progress_bar(len(options), "chains", "chain", config.runner.progress) as bar:
        for start in range(0, len(options), num_envs):
            batch = options[start : start + num_envs]
            envs = spread_over_shards(len(batch), len(shards.keys()), shards.envs_per_stage)
            padded, idle = [batch[0]] * num_envs, [True] * num_envs
            for option, env in zip(batch, envs):
                padded[env], idle[env] = option, False
            results = run_episodes(shards, padded, chunk_steps, config.eval.sampling, seed=config.runner.seed,
                                   keep_trajectories=False, idle=idle, stop_when_done=True,
                                   episode_seeds=[episode_seed(config.runner.seed, option) for option in padded])
            lengths.extend(int(round(results["return"][env])) for env in envs)
            bar.update(len(batch))
    summary = summarize(lengths)
    return {"lengths": lengths, "summary": summary,
            "metrics": {f"{CHAIN_PREFIX}{name}": value for name, value in summary.items()}}


def spread_over_shards(count: int, num_shards: int, envs_per_shard: int) -> list[int]:
    """Global env indices for ``count`` episodes that load the shards evenly (episode ``j`` on shard
    ``j % num_shards``): each shard's envs step one after another in its worker, so a round lasts as long
    as its fullest shard (50 chains on two workers of 34 envs: 25 each, not 34 and 16)."""
    if count > num_shards * envs_per_shard:
        raise ValueError(f"{count} episodes do not fit {num_shards} shards of {envs_per_shard} envs")
    return [(j % num_shards) * envs_per_shard + j // num_shards for j in range(count)]


def resolve_policy(path: str | Path) -> tuple[Path, Path | None]:
    """The policy directory that ``eval.checkpoint`` names, and the run directory it belongs to (None when
    it is a bare policy): a run directory (its latest checkpoint), a checkpoint (``checkpoints/step_N``,
    holding ``policy/``) or a ``save_pretrained`` directory (an SFT checkpoint, a published policy)."""
    from vlarl_trainer.rl import checkpoint as checkpoints

    path = Path(path)
    if (path / "config.yaml").is_file() and (path / "checkpoints").is_dir():
        latest = checkpoints.latest_checkpoint(path)
        if latest is None:
            raise ValueError(f"eval.checkpoint={path}: the run has no complete checkpoint")
        return latest / "policy", path
    if (path / "policy").is_dir():
        policy = path / "policy"
    elif (path / "config.json").is_file():
        policy = path
    else:
        raise ValueError(f"eval.checkpoint={path}: expected a run directory, a checkpoint (checkpoints/step_N) or a "
                         "save_pretrained policy directory, found none of them")
    run_dir = path.parent.parent
    return policy, run_dir if path.parent.name == "checkpoints" and (run_dir / "config.yaml").is_file() else None


def report_json(report: dict[str, Any], sampling: str) -> dict[str, Any]:
    """An evaluation report as JSON can hold it: the ``eval.sampling`` mode it scored, the table as rows of
    split, task and success, and the CALVIN chains' lengths and summary when it scored them."""
    rows = [{"split": split, "task": task, "success": rate} for (split, task), rate in sorted(report["table"].items())]
    groups = [{"split": split, "group": group, "success": rate}
              for (split, group), rate in sorted(report.get("groups", {}).items())]
    chains = {"chains": report["chains"]} if "chains" in report else {}
    return {"sampling": sampling, "metrics": report["metrics"], "table": rows, "groups": groups,
            "episodes": report.get("episodes", []), **chains}


def logged_evaluation(metrics_path: Path, step: int) -> dict[str, Any] | None:
    """The ``metrics``, ``table`` and ``groups`` of the evaluation logged at ``step`` in metrics.jsonl (None
    when there is none): a resumed run's report of an evaluation an earlier process ran."""
    from vlarl_trainer.metrics import read_metrics

    logged = read_metrics(metrics_path).get(step, {}) if metrics_path.exists() else {}
    if "eval/success_once" not in logged:
        return None
    metrics = {key: value for key, value in logged.items() if key.startswith("eval/") or key == "time/eval"}
    table, groups, splits = {}, {}, {}
    for key, rate in metrics.items():
        parts = key.split("/", 3)
        if len(parts) == 3 and parts[2] == "success_once":
            splits[parts[1]] = rate
        elif len(parts) == 4 and parts[2] == "success_once":
            table[(parts[1], parts[3])] = rate
        elif len(parts) == 4 and parts[2] == "group_success_once":
            groups[(parts[1], parts[3])] = rate
    return {"metrics": metrics, "table": table, "groups": groups, "splits": splits}


def format_table(before: dict | None, after: dict, sampling: str | None = None) -> str:
    """A Markdown table of success per split and task, then per split and group and the mean of each
    split's groups, then each split's mean and the OOD average where there are several splits, then the
    mean over every episode, then CALVIN's chains where they were played: before and after, when both
    exist. With ``sampling`` (``eval.sampling``), a line above the table names the mode it scores."""
    nan = float("nan")
    rows = [(split, task, (before or {}).get("table", {}).get((split, task), nan), rate)
            for (split, task), rate in sorted(after["table"].items())]
    rows += [(split, f"group {group}", (before or {}).get("groups", {}).get((split, group), nan), rate)
             for (split, group), rate in sorted(after.get("groups", {}).items())]
    before_group_means = group_means((before or {}).get("groups", {}))
    rows += [(split, "mean of groups", before_group_means.get(split, nan), rate)
             for split, rate in group_means(after.get("groups", {})).items()]
    if len(after.get("splits", {})) > 1:
        rows += [(split, "mean of OOD splits" if split == OOD_AVERAGE else "mean",
                  (before or {}).get("splits", {}).get(split, nan), rate)
                 for split, rate in after["splits"].items()]
    rows.append(("all", "mean", before["metrics"]["eval/success_once"] if before else nan,
                 after["metrics"]["eval/success_once"]))
    rows += [("chains", name.removeprefix(CHAIN_PREFIX), (before or {}).get("metrics", {}).get(name, nan), value)
             for name, value in after["metrics"].items() if name.startswith(CHAIN_PREFIX)]
    if before:
        lines = ["| split | task | before | after |", "|---|---|---|---|"]
        lines += [f"| {split} | {label} | {was:.2f} | {rate:.2f} |" for split, label, was, rate in rows]
    else:
        lines = ["| split | task | success |", "|---|---|---|"]
        lines += [f"| {split} | {label} | {rate:.2f} |" for split, label, _, rate in rows]
    if sampling is not None:
        lines = [f"success under eval.sampling={sampling}", "", *lines]
    return "\n".join(lines)
