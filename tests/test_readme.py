"""Every command the README shows is run here, as a user would type it, at a tiny size (a few steps,
CSV logging, the output in a temporary folder); the make targets too long to run in a test (the
reproductions, the suite itself, SLURM) are dry-run or found where CI runs them. A command added to the
README without a way to run it here fails the first test."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent
# One epoch, which validates where a validation split is held out (its last epoch always does).
TINY = ["trainer.max_epochs=1", "data.batches_per_epoch=2", "logger=csv"]
# Run by CI itself (.ci/run) or too long for a test: checked with make's dry run.
DRY = {"make test", "make reproduce-digits", "make reproduce-mnist5k", "make reproduce-noisy-dml-cpu"}
SLURM = "noisydml -m hydra/launcher=slurm hydra.launcher.partition=gpu noise.rate=0,0.2,0.4"


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    out = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"{command}\n{out.stderr[-3000:]}"
    return out


def test_every_readme_command_is_one_this_module_runs():
    runs = {"make run", SLURM, *DRY}
    pattern = re.compile(r"^(noisydml|noisydml-report) ")
    unknown = [c for c in readme_commands() if c not in runs and not pattern.match(c)]
    assert not unknown, unknown


@pytest.mark.slow
def test_the_readme_commands_run(tmp_path):
    commands = readme_commands()
    runs, sweeps = tmp_path / "runs", tmp_path / "sweeps"
    first_run = None
    for i, command in enumerate(commands):
        words = command.split()
        if command in DRY:
            _run(["make", "--dry-run", "--no-print-directory", *words[1:]], ROOT)
        elif command == SLURM:
            # Run through a real SLURM by `make test-slurm` (CI), the launcher and partition as here.
            assert "hydra/launcher=slurm" in (ROOT / "scripts" / "slurm" / "test_slurm.sh").read_text()
        elif command == "make run":
            recipe = _run(["make", "--dry-run", "--no-print-directory", "run", f"VENV={sys.prefix}"], ROOT)
            line = recipe.stdout.strip().splitlines()[-1].split()
            assert Path(line[0]).name == "noisydml", recipe.stdout
            _run([str(BIN / "noisydml"), *line[1:], *TINY, f"hydra.run.dir={runs / 'make_run'}"], tmp_path)
        elif words[0] == "noisydml-report":
            sweep = next(sweeps.iterdir())
            args = [str(sweep) if "<time>" in w else w for w in words[1:]]
            _run([str(BIN / "noisydml-report"), *args, "--out", str(tmp_path / "reports")], tmp_path)
            assert (tmp_path / "reports" / "my_sweep" / "report.md").is_file()
        elif any(w.startswith("resume=") for w in words):
            assert first_run is not None
            args = [f"resume={first_run}" if w.startswith("resume=") else w for w in words[1:]]
            out = _run([str(BIN / "noisydml"), *args], tmp_path)
            assert "already complete" in out.stdout
        elif words[:2] == ["noisydml", "-m"]:
            _run([str(BIN / "noisydml"), *words[1:], *TINY, f"hydra.sweep.dir={sweeps / str(i)}"], tmp_path)
        else:
            run_dir = runs / str(i)
            # An experiment's job shortened by TINY is another run than the experiment's: labelled so.
            labels = ["name=readme", "report.figure=tests/readme"] if "experiment=" in command else []
            _run([str(BIN / "noisydml"), *words[1:], *TINY, *labels, f"hydra.run.dir={run_dir}"], tmp_path)
            assert json.loads((run_dir / "results.json").read_text())["status"] == "finished"
            first_run = first_run or run_dir
