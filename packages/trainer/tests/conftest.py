"""What the trainer's tests share, because starting it costs more than the test itself.

- ``embedded_ray``: one embedded Ray for the whole session of a test process (starting one takes seconds).
  A test that needs a Ray of its own (a worker set-up hook, a cluster of nodes) shuts it down; the next
  test that asks for ``embedded_ray`` starts it again.
- ``reference_run``: one finished training run of ``vlarl_trainer.testing.REFERENCE_RUN`` that the tests
  of resuming, replaying and faults compare against, instead of each training the same unbroken run again. Copy it
  (``shutil.copytree``) before resuming or damaging it. Its users carry ``xdist_group("ray_reference")``,
  so that under ``make test`` one process trains it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import ray

from vlarl_trainer.config import load_config
from vlarl_trainer.metrics import read_metrics
from vlarl_trainer.rl.cluster import start_ray
from vlarl_trainer.testing import REFERENCE_RUN


@pytest.fixture(scope="session")
def ray_for_the_session():
    """Shuts down whatever Ray the session's tests left running."""
    yield
    ray.shutdown()


@pytest.fixture
def embedded_ray(ray_for_the_session):
    """Ray on this machine with two CPUs, started by the first test that asks and kept for the next."""
    start_ray(None, num_cpus=2)


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory, ray_for_the_session) -> Path:
    """The run directory of ``REFERENCE_RUN`` trained to its end; read it, never change it."""
    from vlarl_envs.testing import require_simulator

    require_simulator("metaworld")
    from vlarl_trainer.rl.runner import Trainer

    start_ray(None, num_cpus=2)
    output = tmp_path_factory.mktemp("reference")
    trainer = Trainer(load_config([*REFERENCE_RUN, f"runner.output_dir={output}", "runner.name=run"]))
    try:
        trainer.run()
    finally:
        trainer.close()
    return trainer.run_dir


@pytest.fixture
def reference_metrics(reference_run) -> dict[int, dict]:
    """Step -> what the reference run logged at that step."""
    return read_metrics(reference_run / "metrics.jsonl")
