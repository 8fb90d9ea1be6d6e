#!/usr/bin/env bash
# A prepared GPU check: five timed steps on one GPU machine that reaches no package registry, each writing a
# line of figures to OUT/figures.tsv as it ends (its output goes to OUT/check.log).
#
#   scripts/gpu_check.sh OUT          # on the GPU machine, with .gpu_bundle/ beside the tree (scripts/gpu_bundle.py)
#   scripts/gpu_check.sh OUT --cpu    # the dry run: the same steps at tiny size in this checkout's .venv, on the CPU
#   GPU_CHECK_STEPS="actor_update trainer_step" scripts/gpu_check.sh OUT   # some steps only (a second try)
#
# Steps: the gpu-marked tests; act / evaluate of the published pi0 and OpenVLA-OFT (ms, GiB); one FSDP2
# actor update of the published pi0 over two micro-batches, without and with gradient checkpointing, beside
# the dry run's estimate; two trainer steps of the tiny MetaWorld recipe with env, rollout and actor sharing
# the GPU; ManiSkill's GPU simulation where mani_skill is installed (its wheels and SAPIEN's are 150 MB, more
# than travels with the tree). Each step has its own timeout, cut to what is left of GPU_CHECK_BUDGET (290 s by
# default), so the whole check ends within 5 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
USAGE="usage: scripts/gpu_check.sh OUT [--cpu]   (OUT: a new folder, relative to the checkout or absolute)"
OUT=${1:?$USAGE}
MODE=${2:-gpu}
declare -A LIMITS=([gpu_tests]=45 [policy_speed]=60 [actor_update]=70 [trainer_step]=70 [maniskill_gpu_sim]=40)
declare -A FILTERS=([gpu_tests]=pytest_summary [policy_speed]=table_rows [actor_update]=table_rows
                    [trainer_step]=last_line [maniskill_gpu_sim]=last_line)
STEPS=${GPU_CHECK_STEPS:-gpu_tests policy_speed actor_update trainer_step maniskill_gpu_sim}
BUDGET=${GPU_CHECK_BUDGET:-290}
[[ $MODE == gpu || $MODE == --cpu ]] || { echo "$USAGE; got '$MODE' after OUT"; exit 2; }
for name in $STEPS; do
    [[ -v LIMITS[$name] ]] || { echo "GPU_CHECK_STEPS: unknown step '$name'; expected some of: ${!LIMITS[*]}"; exit 2; }
done
[[ -e $OUT/figures.tsv ]] && { echo "$OUT already holds a check's figures; name a new folder"; exit 2; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
FIGURES=$OUT/figures.tsv
LOG=$OUT/check.log
SCRATCH=$(mktemp -d /tmp/vlarl-gpu-check.XXXXXX)
export PYTHONUNBUFFERED=1 MUJOCO_GL=egl PYOPENGL_PLATFORM=egl RAY_ENABLE_UV_RUN_RUNTIME_ENV=0
printf 'step\tstatus\tseconds\tfigures\n' > "$FIGURES"
: > "$LOG"

if [[ $MODE == --cpu ]]; then
    export PYTHON=$PWD/.venv/bin/python
    export PRESET=tiny DEVICE=cpu DTYPE=float32 UPDATE_RECIPE=metaworld_10_ppo_openpi_tiny IMAGE_SIZE=64
    export RAY_OVERRIDE_RESOURCES='{"GPU": 1}'
    # The dry run holds no GPU lease, and a busy 2-core machine is slow: four times the time.
    for name in "${!LIMITS[@]}"; do LIMITS[$name]=$((4 * LIMITS[$name])); done
    BUDGET=${GPU_CHECK_BUDGET:-$((4 * 290))}
else
    export PYTHON=python3
    export PRESET=base DEVICE=cuda DTYPE=bfloat16 UPDATE_RECIPE=libero_10_ppo_openpi IMAGE_SIZE=224
fi
export MODE SCRATCH

# record NAME STATUS SECONDS FIGURES: one line of figures.tsv, written as the step ends.
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$FIGURES"; echo "== $1: $2 in $3 s: $4" | tee -a "$LOG"; }

# step NAME TIMEOUT FIGURES_FILTER: runs the shell function NAME in a bash of its own under TIMEOUT seconds, or
# under what is left of the check's BUDGET; FIGURES_FILTER (a function) reads its output and prints its figures.
step() {
    local name=$1 limit=$2 filter=$3 output=$SCRATCH/$1.out status start=$SECONDS left=$((BUDGET - SECONDS))
    if ((left < 5)); then
        record "$name" "not run" 0 "the check's $BUDGET s were spent"
        return
    fi
    ((limit > left)) && limit=$left
    echo "== $name" >> "$LOG"
    timeout --kill-after=10 "$limit" bash -c "$name" > "$output" 2>&1
    case $? in
        0) status=ok ;;
        124 | 137) status="timeout after $limit s" ;;
        *) status=failed ;;
    esac
    cat "$output" >> "$LOG"
    record "$name" "$status" "$((SECONDS - start))" "$($filter < "$output" | tr '\n' ' ' | sed 's/ *$//')"
}

table_rows() { grep '^| ' | grep -v -e '---' -e '^| policy |' | sed 's/  */ /g'; }
pytest_summary() { grep -E '(passed|failed|skipped|error).* in [0-9.]+s' | tail -1 | tr -d '=' | sed 's/^ *//'; }
last_line() { tail -1; }

install_bundle() {
    # The bundle's packages into a folder on PYTHONPATH (exported for the steps), EGL's loaders where the
    # image has none, then vlarl's four packages built from this tree (hatchling comes with the bundle).
    local site=$SCRATCH/site driver=/usr/local/nvidia/share
    export PYTHONPATH=$site
    [[ -f .gpu_bundle/MANIFEST.txt ]] || { echo "no .gpu_bundle/ here: run scripts/gpu_bundle.py first"; return 1; }
    mkdir -p "$site" && timeout 30 tar -xJf .gpu_bundle/site.tar.xz -C "$site" --strip-components=1 || return 1
    if ! ldconfig -p | grep -q 'libEGL.so.1'; then
        for deb in .gpu_bundle/debs/*.deb; do dpkg -x "$deb" /; done
        ldconfig
    fi
    # Where a container mounts the NVIDIA driver's EGL and Vulkan files outside the loaders' search paths.
    if [[ -f $driver/glvnd/egl_vendor.d/10_nvidia.json ]]; then
        export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-$driver/glvnd/egl_vendor.d/10_nvidia.json}
    fi
    if [[ -f $driver/vulkan/icd.d/nvidia_icd.json ]]; then
        export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$driver/vulkan/icd.d/nvidia_icd.json}
    fi
    timeout 30 "$PYTHON" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \
        --target "$site" packages/algos packages/envs packages/policies packages/trainer || return 1
    timeout 20 "$PYTHON" -c "import ray, hydra, gymnasium, metaworld, vlarl_trainer, torch; \
print(f'torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}; ray {ray.__version__}')"
}

setup_gpu_machine() {
    # install_bundle in this shell (its exports reach the steps), recorded as the check's first line.
    local start=$SECONDS status
    install_bundle > "$SCRATCH/setup.out" 2>&1
    status=$?
    cat "$SCRATCH/setup.out" >> "$LOG"
    record setup "$([[ $status == 0 ]] && echo ok || echo failed)" "$((SECONDS - start))" \
        "$(tail -1 "$SCRATCH/setup.out")"
}

gpu_tests() {
    "$PYTHON" -m pytest -m gpu -p no:cacheprovider -q --timeout 40 \
        packages/policies/tests/test_gpu.py packages/trainer/tests/test_memory_on_gpu.py \
        packages/trainer/tests/test_rollout_worker.py packages/envs/tests/test_splats.py \
        packages/envs/tests/test_maniskill_vector.py packages/envs/tests/test_maniskill_episode_envs.py
}

policy_speed() {
    "$PYTHON" benchmarks/policy_speed.py --preset "$PRESET" --device "$DEVICE" --dtype "$DTYPE" --batch 4 \
        --policies pi0 openvla_oft --warmup 1 --repeats 3
}

actor_update() {
    "$PYTHON" benchmarks/actor_update.py --recipe "$UPDATE_RECIPE" --micro-batch 4 --accumulation 2 \
        --image-size "$IMAGE_SIZE" --variants "actor.gradient_checkpointing=false actor.offload=false" \
        "actor.gradient_checkpointing=true actor.offload=false"
}

trainer_step() {
    # Two steps of the tiny recipe, whose default placement puts env, rollout and actor on device 0; the
    # figures are the second step's seconds and phases and the most GPU memory nvidia-smi saw.
    local run=$SCRATCH/run sampler=
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 > "$SCRATCH/gpu_memory.csv" &
        sampler=$!
    fi
    "$PYTHON" -m vlarl_trainer recipe=metaworld_10_ppo_openpi_tiny env.id=vlarl/MetaWorld-reach-v3 env.num_envs=2 \
        env.max_steps=10 rollout.rollout_epoch=1 rollout.pipeline_stage_num=1 \
        'env.kwargs={obs_mode: rgb, image_size: 64, horizon: 10, reward_mode: dense}' actor.global_batch_size=4 \
        actor.micro_batch_size=2 actor.update_epoch=2 eval.at_start=false eval.episodes_per_task=1 \
        runner.progress=false runner.max_steps=2 runner.output_dir="$run" runner.name=step
    local status=$?
    [[ -n $sampler ]] && kill "$sampler"
    "$PYTHON" - "$run/step" "$SCRATCH/gpu_memory.csv" <<'EOF'
import json, pathlib, sys
run, memory = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
last = [s for s in steps if "time/step" in s][-1]
phases = ", ".join(f"{k.split('/')[1]} {last[k]:.2f}" for k in sorted(last) if k.startswith("time/") and k != "time/step")
peak = max((int(v) for v in memory.read_text().split()), default=None) if memory.exists() else None
print(f"step {last.get('step')}: {last['time/step']:.2f} s ({phases}); "
      + (f"GPU memory at most {peak} MiB (nvidia-smi)" if peak is not None else "no GPU"))
EOF
    return $status
}

maniskill_gpu_sim() {
    # 64 sub-scenes of PickCube in one simulator on the GPU, 50 steps timed (the dry run: one env on the CPU
    # backend, 3 steps).
    "$PYTHON" - "$MODE" <<'EOF'
import importlib.util, sys, time
if importlib.util.find_spec("mani_skill") is None:
    print("skipped: mani_skill is not installed (its wheel and SAPIEN's come to 150 MB, more than travels)")
    sys.exit(0)
import numpy as np
from vlarl_envs.maniskill.episode_envs import ManiSkillEpisodeEnvs
gpu = sys.argv[1] != "--cpu"
envs, steps = (64, 50) if gpu else (1, 3)
vec = ManiSkillEpisodeEnvs("PickCube", "vlarl/ManiSkill-PickCube-v1", envs, obs_mode="rgb", image_size=128,
                                horizon=60, sim_backend="gpu" if gpu else "cpu")
vec.reset([{"episode_id": index} for index in range(envs)])
actions = np.zeros((envs, 7), np.float32)
start = time.perf_counter()
for _ in range(steps):
    vec.step(actions)
seconds = time.perf_counter() - start
print(f"{envs} envs on {'physx_cuda' if gpu else 'physx_cpu'}, 128 px rgb: {steps * envs / seconds:.0f} env steps/s")
EOF
}

export -f "${!LIMITS[@]}"
if [[ $MODE != --cpu ]]; then
    setup_gpu_machine
    nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
fi
for name in $STEPS; do
    step "$name" "${LIMITS[$name]}" "${FILTERS[$name]}"
done
rm -rf "$SCRATCH"
cat "$FIGURES"
