"""``vlarl-main-job``: the whole experiment, demonstrations to RL, in one command and one new folder.

    vlarl-main-job recipe=metaworld_10_ppo_openpi_tiny job=mt10_demo
    vlarl-main-job recipe=metaworld_10_ppo_openpi_tiny job=mt10 runner.seed=1
    vlarl-main-job recipe=metaworld_10_grpo_openpi_tiny job=mt10 actor.lr=5e-5
    vlarl-main-job recipe=metaworld_10_ppo_openpi_tiny job=mt10 collect.episodes_per_task=3 sft.steps=400
    vlarl-main-job resume=runs/main-mt10-metaworld_10_ppo_openpi_tiny-seed1-20261124-173000   # after a stop
    vlarl-main-job recipe=metaworld_10_ppo_openpi_tiny job=mt10 runner.name=mt10-seed0 resume=auto  # resubmittable

The stages read one config tree: scripted-expert demonstrations (``collect.*``) of every task of
``env.id``, SFT (``sft.*``) of ``policy.*`` on them, then RL from the SFT checkpoint with the rest of
the tree, whose evaluation before the first and after the last RL step replays the same test-split
episodes, so the two columns of the final table compare one policy before and after RL on
identical initial states. SFT and RL read the same ``policy`` and ``env`` sections, so the checkpoint
SFT writes is the policy RL expects. The demonstrations are the same for every seed; the seed
(``runner.seed``) sets SFT and RL.

    <output_dir>/<name>/demonstrations/   LeRobot v3.0 dataset (skipped with dataset=<dir>)
    <output_dir>/<name>/sft/              the vlarl-sft run (checkpoints/, metrics.jsonl, tensorboard/)
    <output_dir>/<name>/rl/               the vlarl-train run (metrics.jsonl, tensorboard/, videos/, checkpoints/)
    <output_dir>/<name>/job.json          the job's config tree and finished stages (what resume= reads)
    <output_dir>/<name>/results.json      success per task before and after RL, stage timings, paths
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vlarl_trainer.config import VlarlConfig, config_from_dict, to_dict
from vlarl_trainer.metrics import logged_seconds
from vlarl_trainer.plots import job_learning_curve
from vlarl_trainer.rl.evaluation import CHAIN_PREFIX, format_table, group_means
from vlarl_trainer.rl.stopping import RunStopped
from vlarl_trainer.run_dirs import make_run_dir, run_dir_path, run_exists_error, write_atomically

EXISTING_JOB_HINT = "the main job never overwrites a run (choose another runner.name)"


def job_dir_of(config: VlarlConfig) -> Path:
    """``<runner.output_dir>/<runner.name>``, by default ``main-<job size>-<recipe>-seed<N>-<time>``."""
    stem = f"main-{config.job.size}-{config.recipe or 'run'}-seed{config.runner.seed}"
    return run_dir_path(config.runner.output_dir, config.runner.name, stem)


def stage_config(config: VlarlConfig, job_dir: Path, stage: str) -> VlarlConfig:
    """The job's tree with the stage's run directory ``<job>/<stage>``."""
    return dataclasses.replace(config, runner=dataclasses.replace(config.runner, output_dir=str(job_dir), name=stage))


def sft_stage_config(config: VlarlConfig, job_dir: Path, dataset: Path) -> VlarlConfig:
    """SFT on the job's demonstrations; the trainer's evaluation before RL scores its checkpoint, so SFT
    evaluates nothing itself."""
    sft = stage_config(config, job_dir, "sft")
    return dataclasses.replace(sft, dataset=str(dataset), sft=dataclasses.replace(config.sft, evaluate=False))


def sft_checkpoint(config: VlarlConfig, job_dir: Path) -> Path:
    return job_dir / "sft" / "checkpoints" / f"step_{config.sft.steps}"


def rl_stage_start(config: VlarlConfig, job_dir: Path) -> VlarlConfig:
    """RL from the SFT checkpoint, always evaluated before its first step."""
    rl = stage_config(config, job_dir, "rl")
    policy = dataclasses.replace(config.policy, pretrained=str(sft_checkpoint(config, job_dir)))
    return dataclasses.replace(rl, dataset=None, policy=policy, eval=dataclasses.replace(config.eval, at_start=True))


def collect(config: VlarlConfig, dataset: Path) -> None:
    """Expert demonstrations of every task of the job's env, with its image size and horizon, collected in
    a child process: a multi-task env builds a simulator per task (MT50: 50 of them, 5 GB) and a process
    keeps the memory its simulators held after they close, so the job's process, which drives SFT and RL,
    would carry it through both."""
    print(in_child_process(collection_table, config, dataset), flush=True)


def collection_table(config: VlarlConfig, dataset: Path) -> str:
    """``collect_from_config``'s summary table (expert success and episodes kept per task)."""
    from vlarl_trainer.data.collector import collect_from_config

    return collect_from_config(config, dataset).table()


def in_child_process(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` run in a fresh (spawned) process: its result, or its exception raised here."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def reinforce(config: VlarlConfig) -> dict[str, Any]:
    """``vlarl-train`` on the config: its results hold the ``before`` and ``after`` evaluation reports. A Ray
    the stage starts is shut down after it; one the caller started keeps running."""
    import ray

    from vlarl_trainer.rl.runner import Trainer

    own_ray = not ray.is_initialized()
    try:
        trainer = Trainer(config)
        try:
            return trainer.run()
        finally:
            trainer.close()
    finally:
        if own_ray:
            ray.shutdown()


def job_results(config: VlarlConfig, overrides: list[str], before: dict[str, Any], after: dict[str, Any],
                sft_loss: dict[str, float], seconds: dict[str, float], paths: dict[str, Any],
                resumed_from: int | None = None) -> dict[str, Any]:
    """What results.json holds: the settings (the recipe, job size, seed, the evaluation's ``eval.sampling`` and
    the user's overrides, so that a record names every number its run changed, and the whole tree), success
    per task and split (``<split>_<mode>`` for a split ``eval.also_sampling`` scores in another mode), per
    group (the env family's: MetaWorld's difficulty, PutOnPlate's variation), the unweighted mean of each
    split's groups (RLinf's MT50 "Avg."), per split and, where CALVIN's chains were played, their success
    for 1 to 5 tasks in a row and average length before and after RL, the SFT loss at its first and last
    log, timings, paths, and the RL step a resumed job continued from."""
    rows = [{"split": split, "task": task, "before": before["table"].get((split, task)), "after": rate}
            for (split, task), rate in sorted(after["table"].items())]
    groups = [{"split": split, "group": group, "before": before.get("groups", {}).get((split, group)), "after": rate}
              for (split, group), rate in sorted(after.get("groups", {}).items())]
    before_group_means = group_means(before.get("groups", {}))
    group_averages = [{"split": split, "before": before_group_means.get(split), "after": rate}
                      for split, rate in group_means(after.get("groups", {})).items()]
    splits = [{"split": split, "before": before.get("splits", {}).get(split), "after": rate}
              for split, rate in after.get("splits", {}).items()]
    chains = {name.removeprefix(CHAIN_PREFIX): {"before": before["metrics"].get(name), "after": value}
              for name, value in after["metrics"].items() if name.startswith(CHAIN_PREFIX)}
    return {
        "recipe": config.recipe,
        "job": config.job.size,
        "seed": config.runner.seed,
        "sampling": config.eval.sampling,
        "overrides": list(overrides),
        "config": to_dict(config),
        "success": rows,
        "groups": groups,
        "group_means": group_averages,
        "splits": splits,
        **({"chains": chains} if chains else {}),
        "mean": {"before": before["metrics"]["eval/success_once"], "after": after["metrics"]["eval/success_once"]},
        "sft_loss": sft_loss,
        "seconds": seconds,
        "paths": paths,
        "resumed_from_step": resumed_from,
    }


def write_json(path: Path, content: dict[str, Any]) -> None:
    """Written whole or not at all (``write_atomically``), as every file of a run is."""
    write_atomically(path, json.dumps(content, indent=2) + "\n")


def summary_text(before: dict[str, Any], after: dict[str, Any], paths: dict[str, Any], sampling: str) -> str:
    """The final table (success per task before and after RL under ``eval.sampling``, and the mean) and where
    to look next."""
    lines = [format_table(before, after, sampling), ""]
    lines += [f"tensorboard ({stage}): {path}" for stage, path in paths["tensorboard"].items()]
    lines.append(f"videos: {paths['videos']} ({len(paths['video_files'])} files)")
    lines.append(f"learning curve: {paths['learning_curve']}")
    lines.append(f"results: {paths['results']}")
    return "\n".join(lines)


JOB_STATE = "job.json"
"""The job's config tree, its overrides and the timings of its finished stages, rewritten after each
stage: what ``resume=`` continues from."""


def check_stages(config: VlarlConfig, job_dir: Path) -> None:
    """Every stage's settings as that stage checks them, the RL stage's evaluation env and CALVIN chains
    included: a bad setting stops the job before it writes anything, not after the demonstrations and SFT."""
    from vlarl_trainer.data.collector import check_collect_config
    from vlarl_trainer.rl.validation import validate_run
    from vlarl_trainer.sft.train import check_sft_config

    check_collect_config(config)
    check_sft_config(sft_stage_config(config, job_dir, job_dir / "demonstrations"))
    validate_run(rl_stage_start(config, job_dir))


def run_main_job(config: VlarlConfig, overrides: list[str] | None = None) -> tuple[dict[str, Any], str]:
    """Run every stage in a new folder (``job_dir_of``); returns results.json's content and the summary text."""
    job_dir = job_dir_of(config)
    # A taken name stops the job here, as a bad setting does.
    if job_dir.exists():
        raise run_exists_error(job_dir, EXISTING_JOB_HINT)
    check_stages(config, job_dir)
    make_run_dir(job_dir, EXISTING_JOB_HINT)
    state = {"config": to_dict(config), "overrides": list(overrides or []), "seconds": {}}
    write_json(job_dir / JOB_STATE, state)
    return continue_job(job_dir, state)


def auto_resume_main_job(config: VlarlConfig, overrides: list[str]) -> str:
    """``resume=auto``: the job ``runner.name`` names, continued when its folder exists (with the overrides it
    was started with), started otherwise; returns the summary text."""
    if config.runner.name is None:
        raise ValueError("resume=auto continues the job runner.name names: set runner.name=<name>")
    job_dir = job_dir_of(config)
    if not (job_dir / JOB_STATE).exists():
        return run_main_job(dataclasses.replace(config, resume=None), overrides)[1]
    saved = json.loads((job_dir / JOB_STATE).read_text()).get("overrides", [])
    if sorted(saved) != sorted(overrides):
        raise ValueError(f"resume=auto: the job at {job_dir} was started with {saved}, not {overrides}; "
                         "repeat its command or choose another runner.name")
    if (job_dir / "results.json").exists():
        return f"resume=auto: the job at {job_dir} has finished already; results: {job_dir / 'results.json'}"
    print(f"resume=auto: continuing {job_dir}", flush=True)
    return resume_main_job(job_dir)[1]


def resume_main_job(job_dir: str | Path) -> tuple[dict[str, Any], str]:
    """Finish a stopped job. A stage it stopped in starts again, its partial folder set aside
    (``<stage>-interrupted-N``), except RL, which continues from its last checkpoint (the trainer's
    ``resume=``); finished stages are kept."""
    job_dir = Path(job_dir)
    if not (job_dir / JOB_STATE).exists():
        raise ValueError(f"resume={job_dir}: expected a vlarl-main-job run directory with {JOB_STATE}, found none")
    if (job_dir / "results.json").exists():
        raise FileExistsError(f"resume={job_dir}: the job has finished already (results.json exists)")
    state = json.loads((job_dir / JOB_STATE).read_text())
    if "config" not in state:
        raise ValueError(f"resume={job_dir}: its {JOB_STATE} holds no config tree (a job of vlarl-trainer before "
                         "0.15); continue its RL run with vlarl-train resume=<job>/rl instead")
    return continue_job(job_dir, state)


def continue_job(job_dir: Path, state: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The stages job.json does not record as finished, then results.json."""
    from vlarl_trainer.sft.train import run_sft

    config, seconds = config_from_dict(state["config"]), state["seconds"]
    dataset_path = Path(config.dataset) if config.dataset is not None else job_dir / "demonstrations"
    started, runs_every_stage = time.perf_counter(), not seconds
    if "collect" not in seconds:
        mark = time.perf_counter()
        if config.dataset is None:
            set_aside(dataset_path)
            print(f"== demonstrations: {describe_collection(config)} of {config.env.id}", flush=True)
            collect(config, dataset_path)
        seconds["collect"] = time.perf_counter() - mark
        write_json(job_dir / JOB_STATE, state)

    if "sft" not in seconds:
        mark = time.perf_counter()
        set_aside(job_dir / "sft")
        print(f"== SFT: {config.sft.steps} steps", flush=True)
        sft = run_sft(sft_stage_config(config, job_dir, dataset_path))
        seconds["sft"] = time.perf_counter() - mark
        state["sft"] = {"run_dir": str(sft.run_dir), "checkpoint": str(sft.checkpoint),
                        "loss": {"first": sft.first_loss, "final": sft.final_loss}}
        write_json(job_dir / JOB_STATE, state)
    sft_dir = Path(state["sft"]["run_dir"])

    mark = time.perf_counter()
    rl_config, resumed_from = rl_stage_config(job_dir, rl_stage_start(config, job_dir))
    print(f"== RL: {rl_config.recipe}, {rl_config.runner.max_steps} steps from "
          f"{rl_config.policy.pretrained if resumed_from is None else f'step {resumed_from}'}", flush=True)
    try:
        trained = reinforce(rl_config)
    except RunStopped as stop:
        stop.resume_dir = job_dir
        raise
    seconds["rl"] = time.perf_counter() - mark
    rl_dir = Path(trained["run_dir"])
    before = trained.get("before")
    if before is None:
        raise ValueError(f"resume={job_dir}: {rl_dir / 'metrics.jsonl'} has lost the evaluation before RL")
    if resumed_from is not None:
        # The steps kept from before the stop count with their logged times; the replayed ones count once.
        seconds["rl"] += sum(value for step, value in logged_seconds(rl_dir / "metrics.jsonl").items()
                             if step <= resumed_from)
    # A resumed job's total is the sum of its stages: the time between the stop and resume= is no work.
    seconds["total"] = (time.perf_counter() - started if runs_every_stage
                        else seconds["collect"] + seconds["sft"] + seconds["rl"])
    after = trained["after"]
    seconds["eval_before"] = before["metrics"]["time/eval"]
    seconds["eval_after"] = after["metrics"]["time/eval"]

    videos = rl_dir / "videos"
    paths = {
        "run": str(job_dir),
        "dataset": str(dataset_path),
        "sft_checkpoint": state["sft"]["checkpoint"],
        "rl_run": str(rl_dir),
        "tensorboard": {"sft": str(sft_dir / "tensorboard"), "rl": str(rl_dir / "tensorboard")},
        "metrics": {"sft": str(sft_dir / "metrics.jsonl"), "rl": str(rl_dir / "metrics.jsonl")},
        "videos": str(videos),
        "video_files": sorted(str(path) for path in videos.rglob("*.mp4")),
        "learning_curve": str(job_learning_curve(
            rl_dir / "metrics.jsonl", job_dir / "learning_curve.png",
            f"{config.recipe or config.env.id}, {config.job.size} job, seed {config.runner.seed}")),
        "results": str(job_dir / "results.json"),
    }
    results = job_results(config, state["overrides"], before, after, state["sft"]["loss"], seconds, paths,
                          resumed_from)
    write_json(job_dir / "results.json", results)
    return results, summary_text(before, after, paths, config.eval.sampling)


def describe_collection(config: VlarlConfig) -> str:
    extra = "".join(f", {count} of {task}" for task, count in config.collect.task_episodes.items())
    return f"{config.collect.episodes_per_task} per task{extra}"


def rl_stage_config(job_dir: Path, config: VlarlConfig) -> tuple[VlarlConfig, int | None]:
    """The trainer config that carries the RL stage on, and the step it resumes from (None: from the start).
    An RL run that stopped before its first checkpoint is moved aside, kept, and RL starts again."""
    from vlarl_trainer.rl import checkpoint as checkpoints
    from vlarl_trainer.rl.runner import resumed_config

    rl_dir = job_dir / config.runner.name
    if not rl_dir.exists():
        return config, None
    latest = checkpoints.latest_intact_checkpoint(rl_dir)
    if latest is None or not (rl_dir / "config.yaml").exists():
        set_aside(rl_dir)
        return config, None
    return resumed_config(str(rl_dir), []), checkpoints.read_state(latest)["step"]


def set_aside(stage_dir: Path) -> None:
    """Rename what a stopped stage left at ``stage_dir`` to ``<name>-interrupted-N``: kept, never reused."""
    if not stage_dir.exists():
        return
    attempt = 1
    while stage_dir.with_name(f"{stage_dir.name}-interrupted-{attempt}").exists():
        attempt += 1
    stage_dir.rename(stage_dir.with_name(f"{stage_dir.name}-interrupted-{attempt}"))
