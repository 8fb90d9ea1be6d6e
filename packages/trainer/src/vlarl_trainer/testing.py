"""What tests and benchmarks share: a training run of seconds, for those that need a whole run rather than a
real one, and ``load_script`` for the repository's scripts.

    vlarl-train recipe=metaworld_10_ppo_openpi_tiny <SMALL_RUN ...> runner.max_steps=2

Two envs of MetaWorld reach-v3 at 64 px play 10-step episodes (two chunk steps), one rollout epoch
a step, in one pipeline stage of one env worker; the update makes two passes of two micro-batches. The reward is the
simulator's dense one, so every step's episodes differ in reward and the policy updates (a sparse reward
at random init gives groups without signal, which ``algorithm.skip_no_signal`` leaves out).
"""

import importlib.util
import os
import sys
import types
from pathlib import Path

SMALL_RUN = [
    "env.id=vlarl/MetaWorld-reach-v3",
    "env.num_envs=2",
    "env.max_steps=10",
    "rollout.rollout_epoch=1",
    "rollout.pipeline_stage_num=1",
    "env.kwargs={obs_mode: rgb, image_size: 64, horizon: 10, reward_mode: dense}",
    "actor.global_batch_size=4",
    "actor.micro_batch_size=2",
    "actor.update_epoch=2",
    "eval.at_start=false",
    "eval.episodes_per_task=1",
    "runner.progress=false",
    "cluster.component_placement.env=0",
]

REFERENCE_RUN = ["recipe=metaworld_10_ppo_openpi_tiny", *SMALL_RUN, "runner.max_steps=3", "runner.save_interval=1"]
"""Three steps of SMALL_RUN with the tiny pi0 and a checkpoint after each: the unbroken run that tests of
resuming and of faults compare theirs with (the trainer's tests train it once a session)."""


def load_script(path: str | os.PathLike, name: str | None = None) -> types.ModuleType:
    """A file of the repository's scripts/ or benchmarks/ (folders that are no package) imported as a module
    named ``name`` (the file's own by default). It is registered in ``sys.modules`` under that name before it
    runs: a dataclass looks its module up there."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
