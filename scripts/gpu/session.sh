#!/usr/bin/env bash
# One session's work on a lent GPU machine (issue 17), in stages that each fit one 10-minute call:
#
#   bash scripts/gpu/session.sh install tests throughput   # the gpu tests, then the speed options
#   bash scripts/gpu/session.sh install evaluation         # evaluation at SOP scale, every engine
#   bash scripts/gpu/session.sh install yardstick          # noisydml against the plain loop
#   bash scripts/gpu/session.sh install loading compile    # the same for workers, the cache and compile
#   bash scripts/gpu/session.sh install overhead           # where the runner makes the GPU wait
#
# `install` puts the wheels of scripts/gpu/wheels.txt (carried in .whl/, made by `make gpu-wheels`) and the
# project into the machine's own Python with --no-index --no-deps, and fails if that changed its torch; the
# stages import nothing else beside the machine's own packages. Each
# stage writes STAGE.log under OUT (the device tool's $OUT; default outputs/gpu) and runs under its own time
# limit (STAGE_LIMIT seconds, default 540), so a slow stage still returns what it printed; the stages of one
# call share that call's 10 minutes. SMOKE=1 runs every bench at its CPU size (--quick), to try this script
# on a machine without a GPU: `SMOKE=1 PYTHON=.venv/bin/python bash scripts/gpu/session.sh yardstick`.
#
# The yardstick's grid is the issue's factors varied one at a time around ResNet50 at 224, batch 120,
# 8 workers, JPEGs decoded every step (plain_loop.py's full product of them is 144 settings: hours).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
PYTHON=${PYTHON:-python3}
OUT=${OUT:-outputs/gpu}
SMOKE=${SMOKE:-}
STAGE_LIMIT=${STAGE_LIMIT:-540}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

install() {
    local before after
    before=$("$PYTHON" -c 'import torch; print(torch.__version__)')
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl || return 1
    "$PYTHON" -m pip install -q --no-index --no-deps --no-build-isolation -e . || return 1
    after=$("$PYTHON" -c 'import torch; print(torch.__version__)')
    if [[ "$before" != "$after" ]]; then
        echo "install changed torch: $before -> $after" >&2
        return 1
    fi
    "$PYTHON" - <<'EOF'
import faiss, hydra, pytorch_lightning, pytorch_metric_learning, torch, torchvision
import noisydml
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), torchvision {torchvision.__version__}, "
      f"Lightning {pytorch_lightning.__version__}, PML {pytorch_metric_learning.__version__}, "
      f"faiss {faiss.__version__} ({faiss.get_num_gpus()} GPUs), hydra {hydra.__version__}")
for i in range(torch.cuda.device_count()):
    print(f"GPU {i}: {torch.cuda.get_device_name(i)}")
print(f"noisydml from {noisydml.__file__}")
EOF
}

# The test files that hold gpu tests, alone: pytest imports every file it collects, and the others may import
# what only `make test-gpu-stack` installs (scripts/gpu/stack_wheels.txt).
tests() {
    local files
    mapfile -t files < <(grep -l 'pytest\.mark\.gpu' tests/test_*.py)
    "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider -rA "${files[@]}"
}

throughput() {
    "$PYTHON" scripts/bench/throughput.py ${SMOKE:+--quick}
}

evaluation() {
    "$PYTHON" scripts/bench/eval.py --repeats 2 --sklearn-n 0 --no-pml ${SMOKE:+--quick --repeats 1}
}

plain_loop() {
    "$PYTHON" scripts/bench/plain_loop.py --data /tmp/noisydml-cub --rounds 2 "$@" \
        ${SMOKE:+--quick --batch 12 --rounds 1 --images 600 --workers 2}
}

# fp32 against bf16, with and without channels_last; then the three batch sizes at bf16 + channels_last.
yardstick() {
    plain_loop --batch 120 --precision 32-true bf16-mixed --channels-last both --workers 8 &&
        plain_loop --batch 60 256 --precision bf16-mixed --channels-last on --workers 8
}

# Is loading the bottleneck at bf16 speed: 4 and 16 workers, JPEGs decoded or the decoded-image cache.
loading() {
    plain_loop --batch 120 --precision bf16-mixed --channels-last on --workers 4 16 --cache-decoded both
}

compile() {
    plain_loop --batch 120 --precision bf16-mixed --channels-last on --compile on --workers 8
}

# Every call of a training step that makes the host wait for the GPU, noisydml's beside the plain loop's
# (fp32 and bf16, a progress bar as on a terminal); the runner's own milliseconds per step where the step
# is tiny (the digits); the progress bar's cost at ResNet50 speed.
overhead() {
    "$PYTHON" scripts/bench/syncs.py trainer.enable_progress_bar=true &&
        "$PYTHON" scripts/bench/syncs.py trainer.enable_progress_bar=true trainer.precision=bf16-mixed &&
        "$PYTHON" scripts/bench/plain_loop.py --digits --progress-bar both --steps 300 --rounds 3 \
            ${SMOKE:+--steps 30 --rounds 1} &&
        plain_loop --batch 120 --precision bf16-mixed --channels-last on --workers 8 --progress-bar both
}

status=0
for stage in "$@"; do
    if [[ "$(type -t "$stage")" != function ]]; then
        echo "unknown stage '$stage' (install, tests, throughput, evaluation, yardstick, loading," \
            "compile, overhead)" >&2
        exit 2
    fi
    echo "== $stage ($(date -u +%H:%M:%S))"
    start=$SECONDS
    if [[ "$stage" == install ]]; then
        install 2>&1 | tee "$OUT/install.log"
        rc=${PIPESTATUS[0]}
    else
        # shellcheck disable=SC2163  # exports the function the stage names
        export -f "$stage" plain_loop
        export PYTHON SMOKE
        timeout --kill-after=10 "$STAGE_LIMIT" bash -c "$stage" 2>&1 | tee "$OUT/$stage.log"
        rc=${PIPESTATUS[0]}
    fi
    echo "== $stage: exit $rc after $((SECONDS - start)) s"
    if [[ "$stage" == install && $rc -ne 0 ]]; then
        exit "$rc"
    fi
    ((rc == 0)) || status=$rc
done
exit "$status"
