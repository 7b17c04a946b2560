#!/usr/bin/env bash
# The package as a lab adopts it: the wheel built from this checkout goes into a fresh virtual environment
# that already holds a torch of its own, keeps that torch, and runs a short job from a folder outside the
# clone, with the configs the wheel carries. TORCH / TORCHVISION name the preinstalled pair (default: the
# GPU machines', the lower end the suite runs on), installed from the index; PYTHON the interpreter.
# TORCH_FROM=<venv> instead gives the fresh venv that venv's torch, torchvision and all they require,
# hard-linked (scripts/package/seed_torch.py: no download, no disk), with that venv's Python: CI seeds it
# from the GPU machines' stack, which `make test-gpu-stack` has installed.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
site_packages() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
torch_in() { "$1" -c 'import torch; print(torch.__version__.split("+")[0])'; }
work="$(mktemp -d)"
venv="$work/venv"
if [[ -n "${TORCH_FROM:-}" ]]; then
    [[ -x "$TORCH_FROM/bin/python" ]] || { echo "TORCH_FROM=$TORCH_FROM has no bin/python; name a venv"; exit 2; }
    TORCH_FROM="$(cd "$TORCH_FROM" && pwd)"
    source_python="$TORCH_FROM/bin/python"
    python="$("$source_python" -c 'import sys; print(sys._base_executable)')"
    # Beside the source venv, on its file system: a hard link cannot cross to another one (a tmpfs /tmp).
    venv="$(mktemp -d "${TORCH_FROM%/}.check-wheel.XXXXXX")"
else
    python="${PYTHON:-python3}"
fi
trap 'rm -rf "$work" "$venv"' EXIT
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip)
"${pip[@]}" install --quiet --upgrade pip
if [[ -n "${TORCH_FROM:-}" ]]; then
    "$source_python" "$root/scripts/package/seed_torch.py" "$(site_packages "$venv/bin/python")"
    torch_version="$(torch_in "$venv/bin/python")"
    echo "check-wheel: a venv with $TORCH_FROM's torch $torch_version"
else
    torch_version="${TORCH:-2.11.0}"
    torchvision_version="${TORCHVISION:-0.26.0}"
    echo "check-wheel: a venv with torch $torch_version, torchvision $torchvision_version"
    "${pip[@]}" install --quiet "torch==$torch_version" "torchvision==$torchvision_version"
fi

echo "check-wheel: building the wheel"
# From a copy of the files git tracks or would track: setuptools builds in the source folder, and a stale
# build/ there would put modules deleted since into the wheel.
mkdir "$work/source"
git -C "$root" ls-files -z --cached --others --exclude-standard \
    | tar -C "$root" --null --files-from=- --ignore-failed-read -cf - | tar -xf - -C "$work/source"
"${pip[@]}" wheel --quiet --no-deps --wheel-dir "$work/dist" "$work/source"
wheel=("$work"/dist/noisydml-*.whl)
unzip -l "${wheel[0]}" > "$work/contents"
grep -q "noisydml/conf/config.yaml" "$work/contents" || { echo "the wheel lacks conf/"; exit 1; }
# The default sweeper (conf/hydra/default.yaml) is a Hydra plugin, found in the hydra_plugins namespace.
grep -q "hydra_plugins/noisydml_sweeper/noisydml_sweeper.py" "$work/contents" \
    || { echo "the wheel lacks hydra_plugins/noisydml_sweeper"; exit 1; }

echo "check-wheel: installing ${wheel[0]##*/}"
"${pip[@]}" install --quiet "${wheel[0]}"
kept="$(torch_in "$venv/bin/python")"
if [[ "$kept" != "$torch_version" ]]; then
    echo "installing the wheel replaced torch $torch_version with $kept"
    exit 1
fi
"${pip[@]}" check
# What the ranges resolved to today: the upper ends the package is tested at, beside the torch it kept.
"${pip[@]}" list --format=freeze 2>/dev/null \
    | grep -iE '^(torch|torchvision|pytorch-lightning|hydra-core|pytorch-metric-learning|faiss-cpu|numpy|scikit-learn|scipy|wandb)=='

echo "check-wheel: noisydml trainer.max_epochs=1, from $work/elsewhere"
mkdir "$work/elsewhere"
cd "$work/elsewhere"
"$venv/bin/noisydml" trainer.max_epochs=1 hydra.run.dir=run
"$venv/bin/python" - <<'PY'
import json
from pathlib import Path

import noisydml

results = json.loads(Path("run/results.json").read_text())
assert results["status"] == "finished", results["status"]
assert results["versions"]["noisydml"] == noisydml.__version__, results["versions"]
assert "site-packages" in str(noisydml.CONFIG_DIR), noisydml.CONFIG_DIR
# The boards --against names come from the wheel too (its results/, with or without boards yet).
assert (noisydml.RESULTS_DIR / "README.md").is_file() and "site-packages" in str(noisydml.RESULTS_DIR)
print(f"check-wheel: finished, test/recall@1 {results['metrics']['test/recall@1']:.4f}, configs from "
      f"{noisydml.CONFIG_DIR}")
PY

echo "check-wheel: a method from outside the package (docs/board.md's loss and configs), from the wheel"
"$venv/bin/python" "$root/scripts/docs/page_files.py" "$root/docs/board.md" .
PYTHONPATH="$PWD" "$venv/bin/noisydml" method=mylab/soft_triplet "hydra.searchpath=[file://$PWD/myconf]" \
    trainer.max_epochs=1 hydra.run.dir=mine
"$venv/bin/python" - <<'PY'
import json
from pathlib import Path

results = json.loads(Path("mine/results.json").read_text())
assert results["status"] == "finished", results["status"]
assert results["config"]["loss"]["_target_"] == "mylab_losses.SoftTriplet", results["config"]["loss"]
print(f"check-wheel: Soft triplet finished, test/recall@1 {results['metrics']['test/recall@1']:.4f}")
PY
