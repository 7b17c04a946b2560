"""The torch evaluation engine (exact kNN and k-means without faiss, the GPU path on machines whose faiss
has no GPU build) against faiss and hand-sized cases, run on the CPU; tests/test_gpu.py runs it on a GPU."""

from __future__ import annotations

import faiss
import numpy as np
import pytest
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from embeddings import random_data, separated_blobs
from noisydml.metrics import evaluate
from noisydml.metrics.clustering import kmeans_assignments
from noisydml.metrics.engine import Engine, faiss_build, resolve_engine
from noisydml.metrics.torch_search import _nearest_by_index


def retrieval(x, labels, backend, **kwargs) -> dict[str, float]:
    ks = (1, 2, 4, 8, 32)
    return evaluate(x, labels, recall_ks=ks, nmi=False, map_full=True, backend=backend, **kwargs)


@pytest.mark.parametrize("mode", ["leave-one-out", "query/gallery"])
def test_torch_search_ranks_as_faiss_does(mode):
    x, labels = random_data(400, classes=15)
    # Norms from 0.01 to 100: plain L2, not an inner product.
    x *= np.geomspace(0.01, 100, len(x), dtype=np.float32)[:, None]
    query_mask = None if mode == "leave-one-out" else np.random.default_rng(1).random(len(x)) < 0.4
    faiss_result = retrieval(x, labels, "faiss", query_mask=query_mask)
    torch_result = retrieval(x, labels, "torch", query_mask=query_mask, chunk_size=37)
    # The same neighbours: identical Recall@K. Average precisions are summed in another order (chunks), and
    # the full ranking's far end (distances near 1e4) holds float32 near-ties that may swap.
    for key in ("map@r", "map"):
        assert torch_result.pop(key) == pytest.approx(faiss_result.pop(key), rel=1e-5)
    assert torch_result == faiss_result


def test_torch_search_keeps_duplicates_and_drops_only_the_query_itself():
    x, labels = random_data(200, classes=10)
    x[1:40:2] = x[0:40:2]
    labels[1:20:2] = labels[0:20:2]
    labels[21:40:2] = labels[20:40:2] + 100
    assert retrieval(x, labels, "torch") == retrieval(x, labels, "faiss")
    # Within the first 40 the copy is the nearest neighbour: a hit exactly when it shares the class.
    one = evaluate(x[:40], labels[:40], recall_ks=(1,), nmi=False, map_at_r=False, backend="torch")
    assert one == {"recall@1": 0.5}
    # Six identical points: every query has five true neighbours at distance 0, none of them itself.
    same = np.zeros((6, 3), dtype=np.float32)
    result = evaluate(same, np.zeros(6, dtype=int), recall_ks=(1, 5), nmi=False, backend="torch")
    assert result == {"recall@1": 1.0, "recall@5": 1.0, "map@r": 1.0}


def test_torch_kmeans_plus_plus_recovers_separated_classes():
    x, labels = separated_blobs()
    for seed in range(5):
        result = evaluate(
            x, labels, recall_ks=(), map_at_r=False, kmeans_init="k-means++", seed=seed, backend="torch"
        )
        assert result == pytest.approx({"nmi": 1.0})


def test_torch_kmeans_refills_empty_clusters():
    # Three points, ten exact copies each. A random init often draws two copies of one point: two equal
    # centroids, one of which gets nothing. Splitting a populated cluster (faiss's rule) must bring the
    # clustering back to the three groups for every seed.
    points = np.repeat(np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]], dtype=np.float32), 10, axis=0)
    labels = np.repeat(np.arange(3), 10)
    for seed in range(20):
        assignments = kmeans_assignments(points, 3, seed=seed, backend="torch")
        assert len(np.unique(assignments)) == 3
        assert len(np.unique(assignments * 3 + labels)) == 3


def test_torch_kmeans_is_seeded_and_close_to_faiss():
    x, labels = random_data(600, dim=16, classes=10)
    centres = np.random.default_rng(5).normal(size=(10, 16)) * 2.5
    x = (x + centres[labels]).astype(np.float32)

    def nmi(backend, seed):
        return evaluate(x, labels, recall_ks=(), map_at_r=False, seed=seed, backend=backend)["nmi"]

    assert nmi("torch", 1) == nmi("torch", 1)
    torch_nmis = [nmi("torch", seed) for seed in range(5)]
    faiss_nmis = [nmi("faiss", seed) for seed in range(5)]
    assert len(set(torch_nmis)) > 1
    # Different random draws, the same algorithm: the two spreads over seeds overlap.
    assert abs(np.mean(torch_nmis) - np.mean(faiss_nmis)) < 0.05


def test_engine_choice():
    assert resolve_engine("torch", use_gpu=False) == Engine("torch", "cpu")
    assert resolve_engine("faiss", use_gpu=False) == Engine("faiss", "cpu")
    with pytest.raises(ValueError, match="backend='tpu' is not one of"):
        resolve_engine("tpu")


@pytest.mark.skipif(resolve_engine().gpu, reason="this machine has a GPU")
def test_without_a_gpu_auto_is_faiss_on_the_cpu_and_insisting_on_one_is_an_error():
    assert resolve_engine() == Engine("faiss", "cpu")
    with pytest.raises(ValueError, match="use_gpu=True but torch sees no GPU"):
        resolve_engine("torch", use_gpu=True)
    with pytest.raises(ValueError, match="use_gpu=True but neither faiss nor torch sees a GPU"):
        resolve_engine("auto", use_gpu=True)
    build = "faiss is the CPU build" if faiss_build() == "cpu" else "faiss sees no GPU"
    with pytest.raises(ValueError, match=f"use_gpu=True but {build}"):
        resolve_engine("faiss", use_gpu=True)


@pytest.mark.parametrize(
    ("faiss_gpus", "torch_gpu", "backend", "use_gpu", "expected"),
    [
        # The documented order of backend=auto: faiss on a GPU, else torch on a GPU, else faiss on the CPU;
        # on torch's current GPU (a DDP rank's, cuda:1 here) where torch sees one.
        (2, True, "auto", None, Engine("faiss", "cuda:1")),
        (1, False, "auto", None, Engine("faiss", "cuda:0")),
        (0, True, "auto", None, Engine("torch", "cuda:1")),
        (0, False, "auto", None, Engine("faiss", "cpu")),
        (2, True, "auto", False, Engine("faiss", "cpu")),
        (2, True, "torch", None, Engine("torch", "cuda:1")),
        (0, True, "faiss", None, Engine("faiss", "cpu")),
        (1, False, "faiss", True, Engine("faiss", "cuda:0")),
        (0, True, "torch", False, Engine("torch", "cpu")),
    ],
)
def test_engine_choice_on_each_kind_of_machine(
    monkeypatch, faiss_gpus, torch_gpu, backend, use_gpu, expected
):
    # What each library reports is replaced, not the choice: the machines this suite runs on have no GPU.
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: faiss_gpus)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: torch_gpu)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert resolve_engine(backend, use_gpu) == expected


def test_ties_straddling_rank_k_go_to_the_lower_index():
    distances = torch.tensor([[1.0, 0.0, 1.0, 1.0, 2.0], [3.0, 3.0, 3.0, 3.0, 3.0]])
    assert _nearest_by_index(distances, 2).tolist() == [[1, 0], [0, 1]]
    assert _nearest_by_index(distances, 3).tolist() == [[1, 0, 2], [0, 1, 2]]
    assert _nearest_by_index(distances, 5).tolist() == [[1, 0, 2, 3, 4], [0, 1, 2, 3, 4]]


def test_the_metrics_config_chooses_the_engine(compose_config):
    x, labels = random_data(300, classes=10)
    reference = random_data(200, classes=10, seed=1)
    scored = {}
    for backend in ("faiss", "torch"):
        cfg = compose_config(f"metrics.backend={backend}", "metrics.knn_accuracy_k=3")
        scored[backend] = instantiate(cfg.metrics)(x, labels, reference=reference)
    # Different k-means draws; the same neighbours.
    del scored["faiss"]["nmi"], scored["torch"]["nmi"]
    assert scored["torch"] == pytest.approx(scored["faiss"], rel=1e-9)
    with pytest.raises(InstantiationException, match=r"metrics.backend=tpu, metrics.use_gpu=None: backend="):
        instantiate(compose_config("metrics.backend=tpu").metrics)
