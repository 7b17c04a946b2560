#!/usr/bin/env bash
# docs/board.md at full size, as a new user runs it: the wheel built from this checkout in a fresh virtual
# environment (torch and torchvision hard-linked from TORCH_FROM, default .venv, as check_wheel.sh does;
# the other dependencies from the index), the page's loss and method configs written into a folder outside
# the clone, step 4's setting and step 5's whole digits comparison at the board's 24 seeds, and the report
# against the committed board, each step timed. Then the check that the board stands in for re-running the
# field: three committed methods (tests/sweeps.py's BOARD_METHODS) re-run on this machine at the same
# settings and seeds, their runs found equal to the committed rows (labels, epochs, every metric), and the
# report against the board with those three methods' rows replaced by the re-run's, whose verdicts must be
# the first report's, file for file.
#
#     scripts/bench/board_trial.sh [WORK]     # about 20 minutes on 2 cores; WORK kept (default: a new one)
#
# What it measured goes to WORK/board_trial.md: committed as scripts/bench/board_trial.md, the table
# docs/board.md shows (scripts/docs/hooks.py).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
source_venv="$(cd "${TORCH_FROM:-$root/.venv}" && pwd)"
board="${BOARD:-noisy_dml_cpu}"
methods="le2019/triplet_random_semihard,le2019/triplet_fixed_semihard,reference/knn_filter"
times="$work/times.md"
echo "| step | jobs | wall time |" > "$times"
echo "| --- | --- | --- |" >> "$times"
timed() {  # timed "what" JOBS command...: the command's wall time as a row of times.md
    local what="$1" jobs="$2" start end
    shift 2
    start=$(date +%s)
    "$@"
    end=$(date +%s)
    printf '| %s | %s | %d min %02d s |\n' "$what" "$jobs" $(((end - start) / 60)) $(((end - start) % 60)) \
        | tee -a "$times"
}

echo "board-trial: the wheel, in $work"
mkdir -p "$work/source"
git -C "$root" ls-files -z --cached --others --exclude-standard \
    | tar -C "$root" --null --files-from=- --ignore-failed-read -cf - | tar -xf - -C "$work/source"
"$source_venv/bin/python" -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" "$work/source"
wheel=("$work"/dist/noisydml-*.whl)
# Beside the source venv, on its file system, so that torch is hard-linked (seed_torch.py).
venv="$(mktemp -d "${source_venv%/}.board-trial.XXXXXX")"
trap 'rm -rf "$venv"' EXIT
"$("$source_venv/bin/python" -c 'import sys; print(sys._base_executable)')" -m venv "$venv"
"$source_venv/bin/python" "$root/scripts/package/seed_torch.py" \
    "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" > /dev/null
timed "\`pip install\` of the wheel into an environment that holds torch (its other dependencies from PyPI)" - \
    "$venv/bin/python" -m pip install --quiet "${wheel[0]}"

me="$work/me"
mkdir -p "$me"
cd "$me"
"$venv/bin/python" "$root/scripts/docs/page_files.py" "$root/docs/board.md" . > /dev/null
export PYTHONPATH="$me"
mine=(method=mylab/soft_triplet "hydra.searchpath=[file://$me/myconf]" name=mylab report.figure=mylab/digits
    trainer.enable_progress_bar=false)
run() { "$venv/bin/noisydml" -m "$@" > "$work/$(basename "${*: -1}").log" 2>&1; }

timed "one setting (step 4's sweep)" 24 \
    run experiment=noisy_dml/digits_symmetric noise.rate=0.5 "${mine[@]}" \
    hydra.sweep.dir="$work/sweeps/step4"
step5() {
    for noise in symmetric small_cluster; do
        run experiment=noisy_dml/digits_$noise "${mine[@]}" hydra.sweep.dir="$work/sweeps/mylab_$noise"
    done
}
timed "the whole digits comparison (step 5's sweeps)" 96 step5
mylab=("$work/sweeps/mylab_symmetric" "$work/sweeps/mylab_small_cluster")
timed "\`noisydml-report --against $board\` over the whole comparison" - \
    "$venv/bin/noisydml-report" "${mylab[@]}" --against "$board" --name mylab --out "$work/reports" \
    > "$work/against.log"

echo "board-trial: $methods re-run at the board's settings and seeds"
rerun() {
    for noise in symmetric small_cluster; do
        run experiment=noisy_dml/digits_$noise method=$methods trainer.enable_progress_bar=false \
            hydra.sweep.dir="$work/sweeps/rerun_$noise"
    done
}
timed "three committed methods re-run" 288 rerun

"$venv/bin/python" - "$work" "$board" <<'PY'
import filecmp
import sys
from pathlib import Path

import noisydml
from noisydml.report.board import read_runs, rows_from_folders, write_runs
from noisydml.report.cli import main

work, board = Path(sys.argv[1]), sys.argv[2]
committed = read_runs(noisydml.RESULTS_DIR / board)
rerun = rows_from_folders([work / "sweeps/rerun_symmetric", work / "sweeps/rerun_small_cluster"])
key = lambda row: (row["experiment"], row["method"], row["noise"], row["noise_rate"], row["seed"])
# What ran must be what the board ran; where, when and by which build it ran may differ.
free = {"commit", "versions", "wall_s", "cpu", "overrides", "config"}
by_key = {key(row): row for row in committed}
differ = {}
for row in rerun:
    twin = by_key[key(row)]
    for name in sorted(set(row) | set(twin)):
        if name not in free and row.get(name, "") != twin.get(name, ""):
            differ.setdefault(name, []).append(key(row))
found = [f"{len(rerun)} runs of the three re-run against their committed rows: "
         + ("identical in every field but the build's and the machine's" if not differ else f"DIFFER {differ}")]
print("board-trial:", found[0])
again = {key(row): row for row in rerun}
replaced = [again.get(key(row), row) for row in committed]
(work / "board_rerun").mkdir(exist_ok=True)
write_runs(replaced, work / "board_rerun")
assert main([str(work / "sweeps/mylab_symmetric"), str(work / "sweeps/mylab_small_cluster"), "--against",
             str(work / "board_rerun"), "--name", "mylab_rerun", "--out", str(work / "reports")]) == 0
first, second = work / "reports/mylab", work / "reports/mylab_rerun"
same = [name for name in ("board.csv", "comparisons.csv", "ranks.csv")
        if filecmp.cmp(first / name, second / name, shallow=False)]
found.append("the report against the board with their rows replaced by the re-run's: "
             + ", ".join(f"`{name}`" for name in same) + (" the same, byte for byte" if len(same) == 3 else
             " the same; the others DIFFER"))
print("board-trial:", found[1])
(work / "found.md").write_text("".join(f"- {line}\n" for line in found))
sys.exit(0 if not differ and len(same) == 3 else 1)
PY
{
    echo "Measured by \`scripts/bench/board_trial.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores"
    echo "($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), one job at a time, from a wheel"
    echo "of $(git -C "$root" rev-parse --short HEAD) in a fresh environment, against the committed board \`$board\`."
    echo
    cat "$times"
    echo
    cat "$work/found.md"
} > "$work/board_trial.md"
cat "$work/board_trial.md"
