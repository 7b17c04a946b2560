"""numerics=portable: the CPU libraries pinned before torch loads, recorded in results.json, and refused
where torch already computes in the other mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from noisydml.run.numerics import apply_numerics
from noisydml.run.results import config_differences
from noisydml.utils.errors import BadInput

NOISYDML = str(Path(sys.executable).with_name("noisydml"))
TINY = ["trainer.max_epochs=1", "data.batches_per_epoch=2", "logger=csv"]


def _run(tmp_path: Path, mode: str) -> dict:
    run_dir = tmp_path / mode
    out = subprocess.run(
        [NOISYDML, f"numerics={mode}", *TINY, f"hydra.run.dir={run_dir}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return json.loads((run_dir / "results.json").read_text())


@pytest.mark.slow
def test_a_portable_run_computes_with_the_generic_kernels_and_records_them(tmp_path):
    portable, native = _run(tmp_path, "portable"), _run(tmp_path, "native")
    assert portable["numerics"]["mode"] == "portable"
    assert portable["numerics"]["aten_cpu_capability"] == "DEFAULT"
    assert portable["numerics"]["env"]["MKL_CBWR"] == "COMPATIBLE,STRICT"
    assert portable["numerics"]["cpu"]
    assert native["numerics"]["mode"] == "native"
    assert native["numerics"]["aten_cpu_capability"] == torch.backends.cpu.get_cpu_capability()


def test_a_mode_torch_no_longer_follows_is_refused_leaving_the_environment_as_it_was(monkeypatch):
    # This process's torch loaded with the kernels of its CPU.
    monkeypatch.delenv("MKL_CBWR", raising=False)
    with pytest.raises(
        BadInput, match=r"numerics=portable: torch was loaded in this process with numerics=native"
    ):
        apply_numerics("native")  # in force: accepted
        apply_numerics("portable")
    assert "MKL_CBWR" not in os.environ


def test_an_unknown_mode_is_refused():
    with pytest.raises(BadInput, match=r"numerics=fast is not an option; use one of: native, portable"):
        apply_numerics("fast")


def test_a_run_from_before_the_key_computed_natively():
    assert config_differences({"seed": 0}, {"seed": 0, "numerics": "native"}) == []
    assert config_differences({"seed": 0}, {"seed": 0, "numerics": "portable"}) == ["numerics"]
