"""Which library runs the nearest-neighbour search and k-means, and on which device.

Two engines compute the same exact float32 arithmetic (squared L2 as ``|x|^2 + |y|^2 - 2<x, y>``):

- ``faiss``: ``IndexFlatL2`` and ``faiss.Kmeans``, on the CPU, or on a GPU (``GpuIndexFlatL2``) where the
  installed faiss is the GPU build (``pip install "noisydml[gpu]"``: the ``faiss-gpu`` wheel) and sees one
  (``faiss.get_num_gpus() > 0``).
- ``torch``: chunked matrix products and ``torch.topk`` for the search, Lloyd iterations for k-means
  (``noisydml.metrics.torch_search``), on whatever device torch has. It needs no faiss GPU build: torch
  already runs on the GPU that trains.

``backend="auto"`` (the default) chooses, in this order:

1. faiss on a GPU, where faiss sees one;
2. else torch on a GPU, where torch sees one;
3. else faiss on the CPU.

On a GPU, either library runs on torch's current device (under DDP, each rank's own; GPU 0 where only
faiss sees GPUs). ``use_gpu=None`` means "a GPU when there is one"; ``True`` insists (an error where
neither library sees one), ``False`` forbids: faiss on the CPU. ``backend="faiss"`` or ``"torch"`` takes
that library, on a GPU where it sees one.

On a CPU the faiss GPU build runs faiss's CPU code: with the same faiss version, its distances equal
``faiss-cpu``'s to the bit at ``FAISS_SIMD_LEVEL=NONE`` (generic code) or ``AVX2``. Its AVX-512 kernels,
which faiss chooses by itself on a CPU that has AVX-512, round differently in the last bit (1,805 of 15,000
distances on scikit-learn's digits): items at nearly equal distances may swap, so a metric can move in its
last digits (the full-ranking mAP there, by 1e-8; Recall@K, MAP@R and NMI were unchanged). A run records
its engine, the faiss build and its SIMD level in ``results.json`` (``metrics_engine``:
:func:`engine_record`).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import Literal

import faiss
import torch

Backend = Literal["auto", "faiss", "torch"]
BACKENDS = ("auto", "faiss", "torch")


@dataclass(frozen=True)
class Engine:
    """A resolved choice: ``library`` is ``"faiss"`` or ``"torch"``; ``device`` is torch's name for where
    it runs (``"cpu"`` or ``"cuda:N"``)."""

    library: str
    device: str

    @property
    def gpu(self) -> bool:
        return self.device != "cpu"


def _cuda_device() -> str:
    # The current device: under DDP each rank has set its own.
    return f"cuda:{torch.cuda.current_device()}"


def faiss_build() -> str:
    """``"gpu"`` where the module ``faiss`` is the GPU build (it has the GPU index), else ``"cpu"``.

    ``faiss-cpu`` and ``faiss-gpu`` both install the module ``faiss`` and the last installed wins, so the
    package names pip lists do not say which build is imported."""
    return "gpu" if hasattr(faiss, "StandardGpuResources") else "cpu"


def resolve_engine(backend: Backend = "auto", use_gpu: bool | None = None) -> Engine:
    """The engine that ``backend`` and ``use_gpu`` ask for on this machine, or a ValueError saying why
    none fits."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not one of {list(BACKENDS)}")
    faiss_gpu = faiss.get_num_gpus() > 0
    torch_gpu = torch.cuda.is_available()
    if use_gpu is not None and not use_gpu:
        return Engine("torch" if backend == "torch" else "faiss", "cpu")
    if backend != "torch" and faiss_gpu:
        return Engine("faiss", _cuda_device() if torch_gpu else "cuda:0")
    if backend != "faiss" and torch_gpu:
        return Engine("torch", _cuda_device())
    if use_gpu:
        raise ValueError(f"use_gpu=True but {_no_gpu(backend, torch_gpu)}")
    return Engine("torch" if backend == "torch" else "faiss", "cpu")


def _no_gpu(backend: str, torch_gpu: bool) -> str:
    """Why a GPU that was insisted on is not there, and the fix."""
    fix = "set use_gpu to null (None from Python: a GPU when there is one) or to false"
    if backend == "torch":
        return f"torch sees no GPU; {fix}"
    if backend == "auto":
        return f"neither faiss nor torch sees a GPU; {fix}"
    if faiss_build() == "cpu":
        reason = 'faiss is the CPU build (pip install "noisydml[gpu]" installs the GPU build)'
    else:
        reason = "faiss sees no GPU"
    return f"{reason}; {fix}" + (", or backend to torch" if torch_gpu else "")


def engine_record(backend: Backend = "auto", use_gpu: bool | None = None) -> dict:
    """What ``results.json`` says of the engine a run's metrics came from: the options, the choice they
    resolved to on this machine, and the faiss that was imported (its build and the GPUs it sees)."""
    engine = resolve_engine(backend, use_gpu)
    return {
        "backend": backend,
        "use_gpu": use_gpu,
        "library": engine.library,
        "device": engine.device,
        "faiss_build": faiss_build(),
        "faiss_gpus": faiss.get_num_gpus(),
        "faiss_simd_level": faiss_simd_level(),
    }


def faiss_simd_level() -> str | None:
    """The CPU kernels faiss computes distances with (``AVX2``, ``AVX512``, ..., ``NONE``: generic code), as
    the CPU allows or ``FAISS_SIMD_LEVEL`` sets; None for a faiss that chooses no level at run time."""
    config = getattr(faiss, "SIMDConfig", None)
    return config.get_level_name() if config is not None else None


def install_conflict() -> str | None:
    """A one-line warning where the ``faiss-gpu`` package is installed but the imported faiss is the CPU
    build (``faiss-cpu`` was installed after it and its files won), with the fix; else None."""
    try:
        gpu_version = importlib.metadata.version("faiss-gpu")
    except importlib.metadata.PackageNotFoundError:
        return None
    if faiss_build() == "gpu":
        return None
    return (
        f"faiss-gpu {gpu_version} is installed but the module faiss is faiss-cpu's build (both install it; "
        "the last installed wins), so faiss searches on the CPU only; restore the GPU build with: pip "
        f'install --force-reinstall --no-deps "faiss-gpu=={gpu_version}"'
    )
