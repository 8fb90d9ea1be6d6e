"""vlarl_trainer: SFT-then-RL of VLA policies on Ray workers placed by config."""

import os as _os
from importlib.metadata import version as _installed_version

# Under `uv run`, Ray starts its workers through a uv hook in a fresh environment that lacks
# this workspace's packages; they must run in this interpreter. Ray reads this on import.
_os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

__version__ = _installed_version("vlarl-trainer")
