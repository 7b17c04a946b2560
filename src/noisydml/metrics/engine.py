"""Which library runs the nearest-neighbour search and k-means, and on which device.

Two engines compute the same exact float32 arithmetic (squared L2 as ``|x|^2 + |y|^2 - 2<x, y>``):

- ``faiss``: ``IndexFlatL2`` and ``faiss.Kmeans``, on the CPU, or on a GPU where the installed faiss
  was built with GPU support and sees one.
- ``torch``: chunked matrix products and ``torch.topk`` for the search, Lloyd iterations for k-means
  (``noisydml.metrics.torch_search``), on whatever device torch has. It needs no faiss GPU build,
  which must match the machine's CUDA (the ``faiss-gpu`` wheel is 135 MB and built for one CUDA);
  torch already runs on the GPU that trains.

``backend="auto"`` (the default) takes faiss on the CPU, and on a GPU faiss where it sees one, else
torch. ``use_gpu=None`` means "a GPU when there is one"; ``True`` insists, ``False`` forbids.
"""

from __future__ import annotations

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


def resolve_engine(backend: Backend = "auto", use_gpu: bool | None = None) -> Engine:
    """The engine that ``backend`` and ``use_gpu`` ask for on this machine, or a ValueError saying why
    none fits."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not one of {list(BACKENDS)}")
    torch_gpu = torch.cuda.is_available()
    faiss_gpu = faiss.get_num_gpus() > 0
    if use_gpu and not (faiss_gpu if backend == "faiss" else torch_gpu):
        seen_by = "faiss" if backend == "faiss" else "torch"
        raise ValueError(
            f"use_gpu=True but {seen_by} sees no GPU; pass use_gpu=None (a GPU when there is one) or "
            "use_gpu=False" + (", or backend='torch'" if backend == "faiss" and torch_gpu else "")
        )
    on_gpu = torch_gpu if use_gpu is None else bool(use_gpu)
    if backend == "faiss" or (backend == "auto" and not on_gpu):
        return Engine("faiss", "cuda:0" if on_gpu and faiss_gpu else "cpu")
    if backend == "auto" and faiss_gpu:
        return Engine("faiss", "cuda:0")
    return Engine("torch", _cuda_device() if on_gpu else "cpu")
