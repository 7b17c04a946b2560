"""``numerics=strict``: the CPU's numerical libraries pinned to code paths that neither depend on the
instruction set nor use an approximate instruction, so that a run's numbers do not depend on which x86-64
CPU computed them.

Left to choose (``numerics=native``), each library picks kernels for the CPU it finds: PyTorch's ATen
its AVX2 or AVX-512 kernels, MKL its code branch, oneDNN its ISA, faiss its SIMD build, numpy its loops.
Float sums then round differently on different CPUs and a small training run, being chaotic, ends
elsewhere: the default digits run's test Recall@1 differs in the second decimal between machines. Strict,
the kernels are the generic ones: PyTorch's unvectorised ATen kernels, MKL's conditional numerical
reproducibility in its ``COMPATIBLE`` branch (``STRICT``: independent of the thread count too), oneDNN up
to SSE4.1, faiss's generic kernels, numpy's baseline loops, and one torch thread unless ``cpu_threads``
says otherwise. MKL's vector math computes a few functions (``sqrt`` among them) with instructions whose
bits differ between Intel and AMD even in its ``COMPATIBLE`` branch: those are computed by numpy instead
(:mod:`noisydml.numerics.vml`). It costs speed (scripts/bench/README.md, "Strict numerics").

The variables are read when the libraries load, so the mode is set before torch (and numpy) is
imported: the ``noisydml`` command does it before a run starts, and a process whose torch already runs
another mode refuses it. ``numerics=portable``, the first version of the mode, left those functions to
MKL and is refused, pointing here.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from noisydml.utils.errors import BadInput

MODES = ("native", "strict")
RETIRED = {
    "portable": (
        "numerics=portable is retired: its sqrt (and with it Adam's steps and cdist) ran on MKL kernels "
        "whose bits differ between Intel and AMD CPUs; use numerics=strict"
    )
}
STRICT_ENV = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE,STRICT",
    "DNNL_MAX_CPU_ISA": "SSE41",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "FAISS_OPT_LEVEL": "generic",
    # faiss 1.15 builds one library and picks its SIMD kernels at run time from this variable (its loader's
    # FAISS_OPT_LEVEL chooses among separately built libraries, of which the wheel ships one): unset, it
    # runs AVX-512 where the CPU has it, and full-ranking distances differ in the last bit from AVX2's.
    "FAISS_SIMD_LEVEL": "NONE",
    # Every loop numpy dispatches by CPU, in numpy >= 2.4's names and in older ones' (a name a numpy does
    # not know is ignored, with an ImportWarning): its AVX-512 and AVX2 sorts order ties otherwise, and
    # its AVX-512 float64 log rounds otherwise, than its baseline loops.
    "NPY_DISABLE_CPU_FEATURES": (
        "X86_V3 X86_V4 AVX512_ICL AVX512_SPR AVX F16C FMA3 AVX2 AVX512F AVX512CD AVX512_KNL AVX512_KNM "
        "AVX512_SKX AVX512_CLX AVX512_CNL"
    ),
}


def apply_numerics(mode: str) -> None:
    """Set the environment of ``mode`` for the libraries this process has not loaded yet; refuse a mode
    that torch, already loaded, no longer follows."""
    if mode in RETIRED:
        raise BadInput(RETIRED[mode])
    if mode not in MODES:
        raise BadInput(f"numerics={mode} is not an option; use one of: {', '.join(MODES)}")
    if "torch" in sys.modules and in_force() != mode:
        raise BadInput(
            f"numerics={mode}: torch was loaded in this process with numerics={in_force()}, and its kernels "
            "are chosen as it loads; run each numerics mode in its own process (not in one local sweep)"
        )
    if mode == "strict":
        os.environ.update(STRICT_ENV)
        from noisydml.numerics import vml

        vml.install()


class PinNumerics(Callback):
    """Sets a sweep's numerics as it starts, before its sweeper is built: a sweeper may load numpy (Optuna's
    does), which reads its CPU features once, so a mode set by the first job would come too late for it."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        apply_numerics(config.get("numerics", "native"))


def in_force() -> str:
    """The mode this process computes with: ``strict`` when every pin of the mode holds, ``native`` when
    none is set, else ``custom`` (pinning variables set by hand, which no mode vouches for)."""
    import torch

    from noisydml.numerics import vml

    strict = (
        vml.installed()
        and torch.backends.cpu.get_cpu_capability() == "DEFAULT"
        and all(os.environ.get(key) == value for key, value in STRICT_ENV.items())
        and not numpy_dispatched_loops()
    )
    if strict:
        return "strict"
    if vml.installed() or any(key in os.environ for key in STRICT_ENV):
        return "custom"
    return "native"


def numpy_dispatched_loops() -> list[str]:
    """The CPU features whose loops this process's numpy runs beyond its baseline."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy < 2
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    return [feature for feature in __cpu_dispatch__ if __cpu_features__.get(feature)]


def numerics_record() -> dict:
    """What results.json keeps of the numerics a run computed with: the mode, the CPU, the kernels ATen
    ran, the CPU features of numpy's loops and every pinning variable set."""
    import torch

    return {
        "mode": in_force(),
        "cpu": cpu_model(),
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "numpy_dispatched": numpy_dispatched_loops(),
        "env": {key: os.environ[key] for key in (*STRICT_ENV, "OPENBLAS_CORETYPE") if key in os.environ},
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
