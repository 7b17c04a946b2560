#!/usr/bin/env bash
# `make test-slurm`: a real SLURM cluster runs a sweep through `hydra/launcher=slurm` and survives a crash.
#
# Brings up the single-node cluster of scripts/slurm/cluster.sh (installing Debian's packages when
# missing) and submits one three-job sweep on digits in which every job signals itself after its first
# optimizer step (noisydml.testing.faults.KillAt). Checks that
#   - the jobs sent SIGURG and SIGWINCH, which a process ignores unless it asks for them, finish:
#     COMPLETED in accounting, results.json with status finished and test metrics;
#   - the job sent SIGKILL dies hard: FAILED in accounting, its results.json still saying `running` with
#     the command that continues it (written when the run started), and the sweep fails
#     (UncompletedJobError) instead of hanging.
# Stops the daemons it started, pass or fail. Needs root. Exits non-zero, saying why, on any failure,
# including a cluster that cannot come up.
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=${VENV:-.venv}
# Generous: the sweep takes under a minute on an idle 2-core machine; a hang is what this is for.
SWEEP_TIMEOUT_S=${SWEEP_TIMEOUT_S:-600}
export LC_NUMERIC=C # for EPOCHREALTIME's decimal point
started=$EPOCHREALTIME
elapsed() { awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $1 }"; }

sweep=
fail() {
    echo "test-slurm: FAILED: $*" >&2
    [[ -z $sweep ]] || echo "test-slurm: kept for a look: $sweep/ and $sweep.log" >&2
    exit 1
}
cleanup() {
    local status=$?
    scripts/slurm/cluster.sh down
    [[ -z $sweep ]] || ((status != 0)) || rm -rf "$sweep" "$sweep.log"
}
trap cleanup EXIT

scripts/slurm/cluster.sh up || fail "no SLURM cluster to test on (the reason is above)"
eval "$(scripts/slurm/cluster.sh env)"
sweep=$(mktemp -d /tmp/noisydml-slurm-sweep.XXXXXX)

# The signal is the sweep's one varying value, so each job gets its own run directory whatever names
# them. The crash comes last: the launcher collects results in order and has the others by then.
# One CPU, 2 GB and no GPU per job fit the node.
sweep_started=$EPOCHREALTIME
set +e
timeout "$SWEEP_TIMEOUT_S" "$VENV/bin/noisydml" --multirun \
    hydra/launcher=slurm hydra.sweep.dir="$sweep" \
    hydra.launcher.cpus_per_task=1 hydra.launcher.mem_gb=2 \
    hydra.launcher.timeout_min=10 \
    name=slurm_ci trainer.accelerator=cpu trainer.max_epochs=1 data.batches_per_epoch=3 \
    logger=csv trainer.enable_progress_bar=false \
    +callbacks.fault._target_=noisydml.testing.faults.KillAt +callbacks.fault.step=1 \
    "+callbacks.fault.signal=SIGURG,SIGWINCH,SIGKILL" \
    2>&1 | tee "$sweep.log"
status=${PIPESTATUS[0]}
set -e
sweep_s=$(elapsed "$sweep_started")

((status != 124)) || fail "the sweep hung: no answer within ${SWEEP_TIMEOUT_S}s (SWEEP_TIMEOUT_S)"
((status != 0)) || fail "the sweep succeeded although one of its jobs was killed"
grep -q "has not produced any output (state: FAILED)" "$sweep.log" ||
    fail "the sweep failed (exit $status), but not by reporting the killed job FAILED: see $sweep.log"

# Each run directory's .hydra/ tells the signal its job sent itself and the job's SLURM id.
"$VENV/bin/python" - "$sweep" <<'EOF' || fail "the jobs did not end as they should"
import json
import subprocess
import sys
from pathlib import Path

from omegaconf import OmegaConf

expected = {"SIGURG": "COMPLETED", "SIGWINCH": "COMPLETED", "SIGKILL": "FAILED"}
runs = {}
for hydra_dir in Path(sys.argv[1]).glob("*/.hydra"):
    signal = OmegaConf.load(hydra_dir / "config.yaml").callbacks.fault.signal
    runs[signal] = hydra_dir.parent, str(OmegaConf.load(hydra_dir / "hydra.yaml").hydra.job.id)
if sorted(runs) != sorted(expected):
    sys.exit(f"test-slurm: expected one run directory per signal {sorted(expected)}, found {sorted(runs)}")

ok = True
for signal, state in expected.items():
    run_dir, job_id = runs[signal]
    sacct = ["sacct", "-n", "-X", "-P", "-o", "State", "-j", job_id]
    got = subprocess.run(sacct, capture_output=True, text=True, check=True).stdout.strip() or "unknown"
    results = run_dir / "results.json"
    if state == "COMPLETED":
        done = json.loads(results.read_text()) if results.is_file() else {}
        recall = done.get("metrics", {}).get("test/recall@1", -1.0)
        good = done.get("status") == "finished" and 0 <= recall <= 1
        what = f"results.json complete, test/recall@1={recall:.3f}" if good else f"no complete {results}"
    else:
        # Killed outright: the record written at the start says so, with the command that continues it.
        left = json.loads(results.read_text()) if results.is_file() else {}
        good = left.get("status") == "running" and "resume=" in left.get("resume", "")
        what = "results.json running, with its resume command" if good else f"{results}: {left.get('status')}"
    good = good and got == state
    ok = ok and good
    verdict = "" if good else f"  <-- expected {state}"
    print(f"test-slurm: job {job_id:<5} {signal:<8} at step 1: {got:<9} {what}{verdict}")
sys.exit(0 if ok else 1)
EOF

echo "test-slurm: passed in $(elapsed "$started")s (sweep ${sweep_s}s, failed on the killed job as it should)"
