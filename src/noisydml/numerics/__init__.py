"""``numerics=strict``: the CPU's numerical libraries pinned to code paths that neither depend on the
instruction set nor use an approximate instruction, so that a run's numbers do not depend on which x86-64
CPU computed them.

Left to choose (``numerics=native``), each library picks kernels for the CPU it finds: PyTorch's ATen
its AVX2 or AVX-512 kernels, MKL its code branch, oneDNN its ISA, faiss its SIMD build, numpy its loops.
Float sums then round differently on different CPUs and a small training run, being chaotic, ends
elsewhere: the default digits run's test Recall@1 differs in the second decimal between machines. Strict,
the kernels are the generic ones: PyTorch's unvectorised ATen kernels, MKL's conditional numerical
reproducibility in its ``COMPATIBLE`` branch (``STRICT``: independent of the thread count too), oneDNN up
to SSE4.1, faiss's generic kernels, the OpenBLAS of numpy and of faiss at its SSE kernels, numpy's baseline
loops, and one torch thread unless ``cpu_threads`` says otherwise. MKL's vector math computes a few
functions (``sqrt`` among them) with instructions whose bits differ between Intel and AMD even in its
``COMPATIBLE`` branch: those are computed by numpy instead (:mod:`noisydml.numerics.vml`). It costs speed
(scripts/bench/README.md, "Strict numerics").

``numerics=avx2`` pins the same libraries one level up, to their AVX2 and FMA code (ATen's AVX2 kernels,
oneDNN's AVX2 ISA, faiss's AVX2 kernels, OpenBLAS's Haswell kernels; MKL and numpy as in ``strict``): AVX2
and FMA are defined to the last bit, so the numbers are the same on every x86-64 CPU that has them (Intel
since Haswell, AMD since Excavator), and the convolutions, which oneDNN computes, cost less. It is refused
on a CPU without them, where ATen would run its AVX2 kernels anyway (and die of an illegal instruction) and
oneDNN and faiss would fall back to other kernels without a word. Its numbers are not ``strict``'s.

The variables are read when the libraries load, so the mode is set before torch (and numpy) is
imported: the ``noisydml`` command does it before a run starts, and a process whose torch already runs
another mode refuses it. ``numerics=portable``, the first version of the mode, left those functions to
MKL and is refused, pointing here.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from noisydml.utils.errors import BadInput

MODES = ("native", "strict", "avx2")
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
    # numpy and faiss each bring an OpenBLAS that picks its kernels by CPU (numpy's runs AVX-512 kernels on
    # a CPU that has them, AVX2 ones on one that has not, and a faiss search's distances and a linear
    # model's solutions differ in the last bits between them): the SSE kernels, which both libraries have.
    "OPENBLAS_CORETYPE": "Nehalem",
    # Every loop numpy dispatches by CPU, in numpy >= 2.4's names and in older ones' (a name a numpy does
    # not know is ignored, with an ImportWarning): its AVX-512 and AVX2 sorts order ties otherwise, and
    # its AVX-512 float64 log rounds otherwise, than its baseline loops.
    "NPY_DISABLE_CPU_FEATURES": (
        "X86_V3 X86_V4 AVX512_ICL AVX512_SPR AVX F16C FMA3 AVX2 AVX512F AVX512CD AVX512_KNL AVX512_KNM "
        "AVX512_SKX AVX512_CLX AVX512_CNL"
    ),
}

# The AVX2 level: every library that picks kernels by CPU held at AVX2 (with FMA), MKL (whose AVX2 branch
# is not honoured on AMD CPUs) and numpy as in strict. faiss reads this variable's value in upper case only.
AVX2_ENV = {
    **STRICT_ENV,
    "ATEN_CPU_CAPABILITY": "avx2",
    "DNNL_MAX_CPU_ISA": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "FAISS_SIMD_LEVEL": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
}
# Each pinned mode: its variables and the kernels ATen then reports running.
PINNED = {"strict": (STRICT_ENV, "DEFAULT"), "avx2": (AVX2_ENV, "AVX2")}


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
    if mode in PINNED:
        env, capability = PINNED[mode]
        # Asked before anything loads where the C library can say: OpenBLAS runs the kernels
        # OPENBLAS_CORETYPE names as it loads (with numpy, which torch loads), ATen the ones
        # ATEN_CPU_CAPABILITY names at its first operation, and a CPU without them dies of an illegal
        # instruction; oneDNN and faiss fall back without a word.
        avx2 = capability == "AVX2"
        known = _cpuid_avx2_fma() if avx2 else None
        if avx2 and known is False:
            raise BadInput(_NO_AVX2.format(mode=mode, cpu=cpu_model()))
        os.environ.update(env)
        from noisydml.numerics import vml  # loads torch, which reads the variables

        vml.install()
        if avx2 and known is None and not has_avx2():
            raise BadInput(_NO_AVX2.format(mode=mode, cpu=cpu_model()))


_NO_AVX2 = (
    "numerics={mode}: this CPU ({cpu}) lacks AVX2 or FMA, whose kernels the mode runs; use numerics=strict "
    "(any x86-64 CPU, slower, other numbers) or numerics=native"
)


class PinNumerics(Callback):
    """Sets a sweep's numerics as it starts, before its sweeper is built: a sweeper may load numpy (Optuna's
    does), which reads its CPU features once, so a mode set by the first job would come too late for it."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            apply_numerics(config.get("numerics", "native"))
        except BadInput as bad:
            # Hydra turns a callback's exception into a warning and goes on.
            raise SystemExit(str(bad)) from None


def in_force() -> str:
    """The mode this process computes with: a pinned mode (``strict``, ``avx2``) when every pin of it holds
    and ATen runs its kernels, ``native`` when none is set, else ``custom`` (pinning variables set by hand,
    which no mode vouches for)."""
    import torch

    from noisydml.numerics import vml

    if vml.installed() and not numpy_dispatched_loops():
        capability = torch.backends.cpu.get_cpu_capability()
        for mode, (env, kernels) in PINNED.items():
            if kernels == capability and all(os.environ.get(key) == value for key, value in env.items()):
                return mode
    # Both modes pin the same variables (to other values). OPENBLAS_CORETYPE alone claims no mode: a
    # machine's environment may set it for OpenBLAS's own sake, and a native run there is still native.
    if vml.installed() or any(key in os.environ for key in STRICT_ENV if key != "OPENBLAS_CORETYPE"):
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
        "env": {key: os.environ[key] for key in STRICT_ENV if key in os.environ},
    }


def has_avx2() -> bool:
    """Whether the CPU has AVX2 and FMA, as its CPUID says (not ``/proc/cpuinfo``, which an emulator passes
    through from the host): the C library's answer, else torch's."""
    if (known := _cpuid_avx2_fma()) is not None:
        return known
    import torch

    capabilities = getattr(torch.cpu, "get_capabilities", None)
    if capabilities is None:  # an older torch: AVX2 alone (every CPU with AVX2 has FMA)
        return bool(torch.cpu._is_avx2_supported())
    found = capabilities()
    return bool(found.get("avx2") and found.get("fma3"))


class _CpuidLeaf(ctypes.Structure):
    # glibc's struct cpuid_feature (<sys/platform/x86.h>): a leaf's registers as CPUID reports them, and
    # the bits the OS lets a program use.
    _fields_ = (("cpuid", ctypes.c_uint * 4), ("active", ctypes.c_uint * 4))


def _cpuid_avx2_fma() -> bool | None:
    """Whether AVX2 and FMA are usable, from glibc's CPUID (>= 2.33), without loading torch or numpy;
    None where the C library cannot say (another libc, another CPU architecture)."""
    try:
        leaf = ctypes.CDLL(None).__x86_get_cpuid_feature_leaf
    except (AttributeError, OSError):
        return None
    leaf.restype, leaf.argtypes = ctypes.POINTER(_CpuidLeaf), (ctypes.c_uint,)
    # glibc's leaf indices: 0 is CPUID leaf 1 (FMA: ECX bit 12), 1 is leaf 7 (AVX2: EBX bit 5).
    fma, avx2 = leaf(0).contents.active[2] >> 12 & 1, leaf(1).contents.active[1] >> 5 & 1
    return bool(fma and avx2)


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
