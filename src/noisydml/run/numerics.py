"""``numerics=portable``: the CPU's numerical libraries pinned to code paths that do not depend on the
instruction set, so that a run's numbers do not depend on which x86-64 CPU computed them.

Left to choose (``numerics=native``), each library picks kernels for the CPU it finds: PyTorch's ATen
its AVX2 or AVX-512 kernels, MKL its code branch, oneDNN its ISA, faiss its SIMD build. Float sums then
round differently on different CPUs and a small training run, being chaotic, ends elsewhere: the default
digits run's test Recall@1 differs in the second decimal between machines. Pinned, the kernels are the
generic ones: PyTorch's unvectorised ATen kernels, MKL's conditional numerical reproducibility in its
``COMPATIBLE`` branch (``STRICT``: independent of the thread count too), oneDNN up to SSE4.1, faiss's
generic kernels, and one torch thread unless ``cpu_threads`` says otherwise. It costs speed
(scripts/bench/README.md, "Portable numerics").

The variables are read when the libraries load, so the mode is set before torch is imported: the
``noisydml`` command does it before a run starts, and a process whose torch already runs another
mode refuses it.
"""

from __future__ import annotations

import os
import sys

from noisydml.utils.errors import BadInput

MODES = ("native", "portable")
PORTABLE_ENV = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE,STRICT",
    "DNNL_MAX_CPU_ISA": "SSE41",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "FAISS_OPT_LEVEL": "generic",
    # faiss 1.15 builds one library and picks its SIMD kernels at run time from this variable (its loader's
    # FAISS_OPT_LEVEL chooses among separately built libraries, of which the wheel ships one): unset, it
    # runs AVX-512 where the CPU has it, and full-ranking distances differ in the last bit from AVX2's.
    "FAISS_SIMD_LEVEL": "NONE",
}


def apply_numerics(mode: str) -> None:
    """Set the environment of ``mode`` for the libraries this process has not loaded yet; refuse a mode
    that torch, already loaded, no longer follows."""
    if mode not in MODES:
        raise BadInput(f"numerics={mode} is not an option; use one of: {', '.join(MODES)}")
    if "torch" in sys.modules and in_force() != mode:
        raise BadInput(
            f"numerics={mode}: torch was loaded in this process with numerics={in_force()}, and its kernels "
            "are chosen as it loads; run each numerics mode in its own process (not in one local sweep)"
        )
    if mode == "portable":
        os.environ.update(PORTABLE_ENV)


def in_force() -> str:
    """The mode this process's torch computes with (``portable`` when its ATen kernels are the generic
    ones and MKL's branch is pinned)."""
    import torch

    generic = torch.backends.cpu.get_cpu_capability() == "DEFAULT"
    return "portable" if generic and os.environ.get("MKL_CBWR") == PORTABLE_ENV["MKL_CBWR"] else "native"


def numerics_record() -> dict:
    """What results.json keeps of the numerics a run computed with: the mode, the CPU, the kernels ATen
    ran and every pinning variable set."""
    import torch

    return {
        "mode": in_force(),
        "cpu": cpu_model(),
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "env": {key: os.environ[key] for key in (*PORTABLE_ENV, "OPENBLAS_CORETYPE") if key in os.environ},
    }


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (``/proc/cpuinfo``), else the platform's word."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()
