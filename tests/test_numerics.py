"""numerics=strict: the CPU libraries pinned before torch loads, VML's approximate functions computed by
numpy, recorded in results.json, refused where torch already computes in another mode; and the same bits
on an Intel and an AMD CPU, emulated by qemu-user."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from noisydml.numerics import STRICT_ENV, apply_numerics, has_avx2, in_force
from noisydml.run.checks.folders import config_differences
from noisydml.utils.errors import BadInput

NOISYDML = str(Path(sys.executable).with_name("noisydml"))
TINY = ["trainer.max_epochs=1", "data.batches_per_epoch=2", "logger=csv"]
QEMU = shutil.which("qemu-x86_64")
# qemu's names of an Intel and an AMD CPU; both have AVX2, as the AVX2 kernels a native run would pick.
EMULATED = {"intel": "Haswell", "amd": "EPYC"}
HAS_AVX2 = has_avx2()
# The emulated job's network: convolutions (oneDNN's kernels) and linear layers (MKL's).
CONVOLUTIONS = ("backbone=lenet",)


def _command(mode: str, run_dir: Path, *overrides: str) -> list[str]:
    return [NOISYDML, f"numerics={mode}", *TINY, *overrides, f"hydra.run.dir={run_dir}"]


def _run(
    tmp_path: Path, mode: str, name: str | None = None, env: dict | None = None, overrides: tuple = ()
) -> dict:
    run_dir = tmp_path / (name or mode)
    out = subprocess.run(
        _command(mode, run_dir, *overrides),
        cwd=tmp_path,
        env={**os.environ, "WANDB_MODE": "disabled", **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return json.loads((run_dir / "results.json").read_text())


@pytest.mark.slow
def test_a_strict_run_computes_with_the_generic_kernels_and_records_them(tmp_path):
    strict, native = _run(tmp_path, "strict"), _run(tmp_path, "native")
    assert strict["numerics"]["mode"] == "strict"
    assert strict["numerics"]["aten_cpu_capability"] == "DEFAULT"
    assert strict["numerics"]["env"]["MKL_CBWR"] == "COMPATIBLE,STRICT"
    assert strict["numerics"]["numpy_dispatched"] == []
    assert strict["numerics"]["cpu"]
    assert native["numerics"]["mode"] == "native"
    assert native["numerics"]["aten_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    # The variables set by hand pin the libraries but not VML's functions: no mode is claimed.
    by_hand = _run(tmp_path, "native", "by_hand", env=STRICT_ENV)
    assert by_hand["numerics"]["mode"] == "custom"
    assert by_hand["numerics"]["env"]["MKL_CBWR"] == "COMPATIBLE,STRICT"


@pytest.mark.slow
@pytest.mark.skipif(not HAS_AVX2, reason="this CPU has no AVX2 and FMA")
def test_an_avx2_run_computes_with_the_avx2_kernels_other_numbers_than_strict(tmp_path):
    avx2, strict = _run(tmp_path, "avx2"), _run(tmp_path, "strict")
    assert avx2["numerics"]["mode"] == "avx2" and avx2["numerics"]["aten_cpu_capability"] == "AVX2"
    assert avx2["numerics"]["env"]["DNNL_MAX_CPU_ISA"] == "AVX2"
    assert avx2["numerics"]["env"]["MKL_CBWR"] == "COMPATIBLE,STRICT"
    assert avx2["numerics"]["numpy_dispatched"] == []
    # Another mode's numbers: a sweep never takes one mode's finished job for the other's.
    assert avx2["metrics"] != strict["metrics"]
    assert config_differences({"numerics": "strict"}, {"numerics": "avx2"}) == ["numerics"]


@pytest.mark.parametrize(("mode", "kernels"), [("strict", "Nehalem"), ("avx2", "Haswell")])
def test_a_pinned_mode_runs_numpys_and_faiss_openblas_at_its_kernels(mode, kernels):
    """numpy's and faiss's OpenBLAS pick kernels by CPU (AVX-512 ones where the CPU has them, which round a
    search's distances and a linear model's solution otherwise than AVX2's): a pinned mode names them, over
    any value the environment brings."""
    if mode == "avx2" and not HAS_AVX2:
        pytest.skip("this CPU has no AVX2 and FMA")
    script = (
        "import json, sys\n"
        "from noisydml.numerics import apply_numerics\n"
        "apply_numerics(sys.argv[1])\n"
        "import faiss, numpy, threadpoolctl\n"
        "print(json.dumps([i['architecture'] for i in threadpoolctl.threadpool_info()"
        " if i['internal_api'] == 'openblas']))\n"
    )
    env = {**os.environ, "OPENBLAS_CORETYPE": "SkylakeX"}
    out = subprocess.run([sys.executable, "-c", script, mode], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == [kernels, kernels]


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    return checkpoint["state_dict"]


@pytest.mark.slow
@pytest.mark.skipif(QEMU is None, reason="qemu-x86_64 is not installed (Debian: apt-get install qemu-user)")
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the host is not an x86-64 CPU")
@pytest.mark.parametrize("mode", ["strict", "avx2"])
def test_a_pinned_run_computes_the_same_bits_on_an_emulated_intel_and_amd_cpu(tmp_path, mode):
    """qemu-user runs the job as another CPU: its vendor, model and instruction set extensions, and
    rsqrtps and rcpps computed exactly where this CPU approximates them. A few steps of Adam through
    sqrt, cdist, the LeNet's convolutions (oneDNN) and linear layers (MKL) and the whole evaluation end in
    the same weights and metrics as here."""
    if mode == "avx2" and not HAS_AVX2:
        pytest.skip("this CPU has no AVX2 and FMA")
    env = {**os.environ, "WANDB_MODE": "disabled"}
    emulated = {
        vendor: subprocess.Popen(
            [QEMU, "-cpu", cpu, sys.executable, *_command(mode, tmp_path / vendor, *CONVOLUTIONS)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for vendor, cpu in EMULATED.items()
    }
    host = _run(tmp_path, mode, "host", overrides=CONVOLUTIONS)
    for vendor, process in emulated.items():
        _, stderr = process.communicate(timeout=1800)
        assert process.returncode == 0, stderr[-3000:]
        run = json.loads((tmp_path / vendor / "results.json").read_text())
        assert run["numerics"]["mode"] == mode
        assert run["metrics"] == host["metrics"], vendor
        here, there = _weights(tmp_path / "host"), _weights(tmp_path / vendor)
        assert all(torch.equal(here[key], there[key]) for key in here), vendor
        assert (tmp_path / vendor / "csv" / "metrics.csv").read_bytes() == (
            tmp_path / "host" / "csv" / "metrics.csv"
        ).read_bytes(), vendor


@pytest.mark.slow
@pytest.mark.skipif(QEMU is None, reason="qemu-x86_64 is not installed (Debian: apt-get install qemu-user)")
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the host is not an x86-64 CPU")
def test_avx2_is_refused_on_a_cpu_without_it_before_anything_runs(tmp_path):
    """An Intel Nehalem (2008, no AVX) emulated: ATen would run its AVX2 kernels anyway, and die of an
    illegal instruction at the first."""
    out = subprocess.run(
        [QEMU, "-cpu", "Nehalem", sys.executable, *_command("avx2", tmp_path / "run")],
        cwd=tmp_path,
        env={**os.environ, "WANDB_MODE": "disabled"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode != 0
    assert "numerics=avx2: this CPU" in out.stderr and "lacks AVX2 or FMA" in out.stderr
    assert "use numerics=strict" in out.stderr and not (tmp_path / "run" / "results.json").exists()


def test_a_mode_torch_no_longer_follows_is_refused_leaving_the_environment_as_it_was(monkeypatch):
    # This process's torch loaded with the kernels of its CPU.
    monkeypatch.delenv("MKL_CBWR", raising=False)
    with pytest.raises(
        BadInput, match=r"numerics=strict: torch was loaded in this process with numerics=native"
    ):
        apply_numerics("native")  # in force: accepted
        apply_numerics("strict")
    assert "MKL_CBWR" not in os.environ


def test_the_retired_portable_mode_is_refused_pointing_to_strict():
    with pytest.raises(BadInput, match=r"numerics=portable is retired: its sqrt .*; use numerics=strict$"):
        apply_numerics("portable")


def test_a_pinning_variable_set_by_hand_claims_no_mode(monkeypatch):
    monkeypatch.setenv("MKL_CBWR", STRICT_ENV["MKL_CBWR"])
    assert in_force() == "custom"
    monkeypatch.delenv("MKL_CBWR")
    assert in_force() == "native"
    # A machine's environment may set OpenBLAS's core type for OpenBLAS's sake: a native run stays native
    # (a local sweep's second job would otherwise be refused as another mode).
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    assert in_force() == "native"


def test_an_unknown_mode_is_refused():
    with pytest.raises(BadInput, match=r"numerics=fast is not an option; use one of: native, strict, avx2"):
        apply_numerics("fast")


def test_a_run_from_before_the_key_computed_natively():
    assert config_differences({"seed": 0}, {"seed": 0, "numerics": "native"}) == []
    assert config_differences({"seed": 0}, {"seed": 0, "numerics": "strict"}) == ["numerics"]


VML_FUNCTIONS = ["sqrt", "log", "log2", "log10", "tan", "atan", "asin", "acos"]


def _in_strict_process(code: str) -> str:
    """Run ``code`` in a fresh process in strict numerics; its stdout."""
    prelude = "from noisydml.numerics import apply_numerics; apply_numerics('strict'); import torch\n"
    out = subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120, check=True
    )
    return out.stdout


def test_strict_sqrt_is_correctly_rounded_in_each_of_its_forms():
    """float32 sqrt equals the float64 one rounded (so correctly rounded: 53 >= 2 * 24 + 2) as a function,
    in place, with out=, and as pow(x, 0.5); pow's other exponents are ATen's own. (Through Adam and cdist,
    which call it from C++: the emulation test above.)"""
    code = """
import json
x = torch.rand(100_000, generator=torch.Generator().manual_seed(0)) * 100
exact = x.double().sqrt().float()
out = torch.empty(0)
torch.sqrt(x, out=out)
print(json.dumps({
    "sqrt": torch.equal(x.sqrt(), exact),
    "sqrt_": torch.equal(x.clone().sqrt_(), exact),
    "out": torch.equal(out, exact),
    "pow": torch.equal(x.pow(0.5), exact) and torch.equal(x.clone().pow_(0.5), exact),
    "pow2": torch.equal(x.pow(2), x * x),
    "integers": torch.equal(torch.tensor([4, 9]).sqrt(), torch.tensor([2.0, 3.0])),
}))
"""
    checks = json.loads(_in_strict_process(code))
    assert checks == dict.fromkeys(checks, True)


def test_strict_computes_vmls_approximate_functions_as_numpy_does():
    code = f"""
import json
import numpy as np
x = torch.linspace(0.01, 0.99, 10_001)
names = {VML_FUNCTIONS!r}
ufuncs = dict(atan=np.arctan, asin=np.arcsin, acos=np.arccos)
same = dict()
for name in names:
    ufunc = ufuncs.get(name, getattr(np, name, None))
    for dtype in (torch.float32, torch.float64):
        y = x.to(dtype)
        same[f"{{name}} {{dtype}}"] = torch.equal(getattr(torch, name)(y), torch.from_numpy(ufunc(y.numpy())))
print(json.dumps(same))
"""
    same = json.loads(_in_strict_process(code))
    assert same == dict.fromkeys(same, True) and len(same) == 2 * len(VML_FUNCTIONS)
    assert np.sqrt(np.float32(2)) == np.float32(np.sqrt(2.0))
