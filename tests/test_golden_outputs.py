"""A change meant to leave results alone leaves them alone: every method of the noisy_dml comparison at one
seed, the default run and a MNIST-5k job, run through ``noisydml`` in sweeps as the reproductions run them,
compute exactly what tests/golden/outputs.json holds (results.json's metrics and selected epoch, and the
bytes of labels.csv and csv/metrics.csv). scripts/golden_outputs.py wrote it; a change that is meant to
change results rewrites it in the same commit and says why.

The jobs run in pinned numerics (their experiments' files, ``avx2``, and ``numerics=strict`` for the default
run), which make the numbers the same on any x86-64 CPU (with AVX2, for ``avx2``) with the same torch
(tests/test_numerics.py shows it for an emulated Intel and AMD CPU); another torch (the GPU machines'
stack) computes other roundings, so there the comparison is skipped, saying so."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("golden_outputs", ROOT / "scripts" / "golden_outputs.py")
golden_outputs = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(golden_outputs)
EXPECTED = json.loads(golden_outputs.GOLDEN.read_text())


@pytest.mark.slow
@pytest.mark.skipif(
    torch.__version__ != EXPECTED["torch"],
    reason=f"tests/golden/outputs.json is torch {EXPECTED['torch']}'s; this is {torch.__version__}",
)
def test_every_kept_job_computes_what_it_computed(tmp_path: Path) -> None:
    noisydml = str(Path(sys.executable).with_name("noisydml"))
    got = golden_outputs.run_all(tmp_path, noisydml)
    assert golden_outputs.differences(EXPECTED, got) == []


def test_a_changed_value_is_reported() -> None:
    """The comparison can fail: a metric changed in the last digit, a missing job and an extra one."""
    got = json.loads(json.dumps(EXPECTED))
    case = "noisy_dml_digits"
    jobs = got["cases"][case]
    key = next(iter(jobs))
    metric = next(iter(jobs[key]["metrics"]))
    jobs[key]["metrics"][metric] += 1e-12
    missing = list(jobs)[-1]
    del jobs[missing]
    jobs["extra|noise.rate=0|seed=9"] = {}
    assert golden_outputs.differences(EXPECTED, got) == [
        f"{case} {key}: metrics differs",
        f"{case} {missing}: missing",
        f"{case} extra|noise.rate=0|seed=9: not expected",
    ]
