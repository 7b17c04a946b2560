"""The sweep of issue 27, run for real from this checkout: two miners at two noise rates, two short epochs
on digits, one seed (``small_sweep`` in conftest.py runs it once for the tests that read it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
SWEEP = [
    "-m",
    "trainer.max_epochs=2",
    "data.batches_per_epoch=3",
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "cpu_threads=1",
    "noise.rate=0,0.4",
    "miner=random_semihard,fixed_semihard",
]


def checkout_env() -> dict[str, str]:
    """The environment of a subprocess that runs this checkout's code, not whichever noisydml the
    interpreter has installed."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}


def run_sweep(folder: Path) -> Path:
    """``noisydml`` with ``SWEEP`` into the sweep folder ``folder``."""
    command = [sys.executable, "-c", "from noisydml.run.cli import main; main()", *SWEEP]
    command.append(f"hydra.sweep.dir={folder}")
    done = subprocess.run(command, env=checkout_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


# A comparison of methods as a reproduction runs it (conf/experiment/noisy_dml/), shortened to one epoch of
# three batches, one noise rate and three seeds, and so labelled as its own (name=, report.figure=).
BOARD = [
    "-m",
    "experiment=noisy_dml/digits_symmetric",
    "noise.rate=0.5",
    "seed=0,1,2",
    "trainer.max_epochs=1",
    "data.batches_per_epoch=3",
    "trainer.enable_progress_bar=false",
]
BOARD_METHODS = "le2019/triplet_random_semihard,le2019/triplet_fixed_semihard,reference/knn_filter"


def run_board(folder: Path, methods: str, name: str = "board", figure: str = "noisy_dml/board") -> Path:
    """``BOARD`` for ``methods`` into the sweep folder ``folder``, labelled ``name`` and ``figure``."""
    command = [sys.executable, "-c", "from noisydml.run.cli import main; main()", *BOARD]
    command += [f"method={methods}", f"name={name}", f"report.figure={figure}", f"hydra.sweep.dir={folder}"]
    done = subprocess.run(command, env=checkout_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder
