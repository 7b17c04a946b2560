"""faiss's GPU build (``pip install "noisydml[gpu]"``) on a machine without a GPU: the metrics faiss-cpu
gives, and the engine the docs name (noisydml.metrics.engine). It needs an interpreter that imports
faiss-gpu beside this one's faiss-cpu: ``make faiss-gpu-venv`` makes .venv-faiss-gpu (or name one in
NOISYDML_FAISS_GPU_PYTHON); without it the test is skipped."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import faiss_builds

ROOT = Path(__file__).parents[1]
FAISS_GPU_PYTHON = Path(
    os.environ.get("NOISYDML_FAISS_GPU_PYTHON", ROOT / ".venv-faiss-gpu" / "bin" / "python")
)


def scored_with_both_builds() -> tuple[dict, dict]:
    """tests/faiss_builds.py's metrics and engine record with this process's faiss-cpu and, at the same time,
    from the interpreter that imports faiss-gpu."""
    script = Path(__file__).with_name("faiss_builds.py")
    command = [str(FAISS_GPU_PYTHON), str(script)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as gpu_build:
        cpu_build = faiss_builds.score_each_level()
        out, _ = gpu_build.communicate(timeout=300)
    assert gpu_build.returncode == 0
    return cpu_build, json.loads(out.splitlines()[-1])


@pytest.mark.skipif(
    not FAISS_GPU_PYTHON.exists(), reason=f"no faiss GPU build at {FAISS_GPU_PYTHON}: make faiss-gpu-venv"
)
@pytest.mark.slow
def test_the_gpu_build_scores_as_faiss_cpu_on_the_cpu():
    cpu_build, gpu_build = scored_with_both_builds()
    assert (cpu_build["engine"]["faiss_build"], gpu_build["engine"]["faiss_build"]) == ("cpu", "gpu")
    # faiss's generic CPU kernels: every metric to the bit.
    assert gpu_build["generic"] == cpu_build["generic"]
    # The kernels faiss picks for this CPU: the builds' AVX-512 distances differ in the last bit, which can
    # swap items at nearly equal distances.
    assert gpu_build["native"] == pytest.approx(cpu_build["native"], abs=1e-6)
    # The docs' order: faiss on a GPU where faiss sees one, else torch on a GPU where torch sees one, else
    # faiss on the CPU.
    chosen = {
        build: (run["engine"]["library"], run["engine"]["device"])
        for build, run in (("gpu", gpu_build), ("cpu", cpu_build))
    }
    if gpu_build["engine"]["faiss_gpus"] > 0:
        assert chosen["gpu"] == ("faiss", "cuda:0")
    else:
        assert chosen["gpu"] == chosen["cpu"]
        assert chosen["cpu"][0] == "torch" or chosen["cpu"] == ("faiss", "cpu")
