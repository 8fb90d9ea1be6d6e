# The commands a user types. `make setup` once, then `make demo`, `make test`, `make bench`.
SHELL := /bin/bash
export PATH := $(HOME)/.local/bin:$(PATH)
# MuJoCo renders off-screen through EGL (Mesa's llvmpipe on a machine without a GPU).
export MUJOCO_GL ?= egl
export PYOPENGL_PLATFORM ?= egl
# Ray must start its workers in this environment, not through its `uv run` hook.
export RAY_ENABLE_UV_RUN_RUNTIME_ENV ?= 0
UV ?= uv
PYTEST_ARGS ?=

.PHONY: setup uv system-deps sync calvin lint test test-fast test-learning demo demo-experts bench lock

setup: uv system-deps sync calvin

uv:
	@command -v $(UV) >/dev/null || python3 -m pip install --quiet --user uv || python3 -m pip install --quiet uv

system-deps:
	bash scripts/install_system_deps.sh

# --inexact: calvin_env is installed outside the lock (`make calvin`) and a plain sync would remove it.
# --compile-bytecode: every process (each Ray worker, each test subprocess) then reads torch's and
# transformers' bytecode instead of compiling their sources, which it does on every import where
# PYTHONDONTWRITEBYTECODE is set.
sync:
	$(UV) sync --locked --inexact --all-packages --all-extras --compile-bytecode

# CALVIN's simulator and annotations, which no registry serves, from their repositories at pinned commits;
# CALVIN_ENV_SRC and CALVIN_ANNOTATIONS_SRC point elsewhere (folders, as .ci/run does): see the script.
calvin:
	UV=$(UV) bash scripts/install_calvin.sh

lock:
	$(UV) lock

# Ruff over the whole checkout with the locked version and the rules in pyproject.toml ([tool.ruff]).
lint:
	$(UV) run --locked ruff check .

# Every test but the GPU and learning ones, simulator tests included, in TEST_WORKERS processes (pytest-xdist;
# the tests that start Ray run in two groups, each one after another in one process with its Ray:
# xdist_group("ray_reference"), the trainer runs that compare with the session's reference run, and
# xdist_group("ray"), the others); the 25 slowest and the time by test module are listed at the end.
# TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 2
test:
	$(UV) run --locked pytest -m "not gpu and not learning" -n $(TEST_WORKERS) --dist loadgroup --durations=25 $(PYTEST_ARGS)

# The quick loop while developing: no slow and no simulator tests.
test-fast:
	$(UV) run --locked pytest -m "not gpu and not slow and not sim and not learning" $(PYTEST_ARGS)

# The tests that measure learning over minutes (SFT to held-out success), each printing its figures.
test-learning:
	$(UV) run --locked pytest -m learning -rP $(PYTEST_ARGS)

# The main job at demo size on four MetaWorld tasks: demonstrations, SFT, then RL, with held-out success
# before and after, a learning curve, TensorBoard logs and videos under demo_output/ (about 12 min on
# 2 idle cores). `make demo DEMO_ARGS="runner.seed=1"` passes config overrides.
DEMO_ARGS ?=
demo:
	$(UV) run --locked vlarl-main-job recipe=metaworld_10_ppo_openpi_tiny job=demo runner.output_dir=demo_output $(DEMO_ARGS)

# The scripted experts on four tasks, one captioned mp4 per episode.
demo-experts:
	$(UV) run --locked python -m vlarl_envs.demo --out demo_output

# Every benchmark in turn (about 40 minutes on 2 cores); run them on an otherwise idle machine.
bench:
	$(UV) run --locked python benchmarks/env_overhead.py
	$(UV) run --locked python benchmarks/ppo_vs_sb3.py
	$(UV) run --locked python benchmarks/policy_speed.py --threads 1
	$(UV) run --locked python benchmarks/pipeline.py
	$(UV) run --locked python benchmarks/gs_render.py
	$(UV) run --locked python packages/envs/scripts/maniskill_expert_success.py --episodes 50
