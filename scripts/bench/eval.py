"""Evaluation at Stanford Online Products scale: ``evaluate`` against raw faiss, PML and scikit-learn.

Synthetic L2-normalised 512-d embeddings stand in for a model's: 60,502 items of 11,316 classes (SOP's
test split: every class at least 2 items, ~5.3 on average), each its class centre plus noise, so that
Recall@1 is about 0.45 as for a trained model. Each contender computes Recall@1/10/100/1000 (one kNN
search, k = 1001 with the query itself) and NMI (k-means into as many clusters as classes, at most 20
Lloyd iterations, random init, seed 0; the table says how many ran before the clustering converged):

- raw faiss, the floor: ``faiss.knn`` of all queries at once by inner product (the ranking of L2 on unit
  vectors, without the norms), the query dropped by index, and ``faiss.Kmeans`` with the settings
  ``evaluate`` uses; the least any faiss-based evaluation can do.
- ours: ``noisydml.metrics.evaluate`` (chunked exact L2 search, right for unnormalised embeddings too,
  never an N x N matrix), with each of its engines (``noisydml.metrics.engine``): faiss on the CPU, the
  torch engine (chunked fp32 matrix products + ``topk``, Lloyd k-means in torch) on the CPU, and on a
  machine with a GPU the torch engine there (with its peak GPU memory) and faiss's GPU index where the
  installed faiss sees the GPU.
- PML: ``AccuracyCalculator(include=("precision_at_1", "NMI"), k=1000)``; it runs faiss too (``FaissKNN``:
  an ``IndexFlatL2``; ``FaissKMeans``: ``faiss.Kmeans`` with niter 20, given seed 0 here so that its NMI
  can be compared). k=1000 gives it the search depth the Recall@1000 of the others needs.
- scikit-learn: ``NearestNeighbors(algorithm="brute")`` + ``KMeans(init="random", n_init=1, max_iter=20)``.
  Its time is capped by running it on a subsample of whole classes (``--sklearn-n`` items, 15,000: a few
  minutes on 2 busy cores, where the full size would take tens) beside raw faiss on the same subsample;
  the ratio is measured there, and its full-size time is extrapolated as (N / n)^2, since both brute kNN
  and k-means with k proportional to N cost O(N^2 d) per iteration.

The recall of ``evaluate`` is also checked against the brute-force definition (float64 distance matrix)
on a 2,000-item sample. Peak memory is the resident memory each contender added at its peak (Linux's
VmHWM, reset before each).

    python scripts/bench/eval.py            # full size: tens of minutes on a busy 2-core CPU
    python scripts/bench/eval.py --quick    # 1/10 of SOP: 6,050 items, 1,131 classes
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable
from typing import Any

import faiss
import numpy as np
import torch
from measure import PeakMemory, format_seconds, machine, print_table
from sklearn.cluster import KMeans
from sklearn.metrics import normalized_mutual_info_score
from sklearn.neighbors import NearestNeighbors

from noisydml.metrics import evaluate
from noisydml.metrics.recall import drop_self, recall_hits

RECALL_KS = (1, 10, 100, 1000)
SOP_TEST = (60_502, 11_316)
SEED = 0
# Norm of the noise around each class centre (a unit vector) in sop_like.
NOISE = 2.5


def sop_like(n: int, classes: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit vectors, each its class centre plus noise of 2.5 times its norm, so that classes overlap
    as a trained model's do (Recall@1 about 0.45 at SOP's size). Every class gets 2 items (SOP's minimum),
    the rest go to random classes, which spreads sizes around SOP's mean of ~5.3."""
    if n < 2 * classes:
        raise ValueError(f"--n={n} is too small for --classes={classes}: each class needs 2 items")
    rng = np.random.default_rng(seed)
    labels = np.concatenate([np.repeat(np.arange(classes), 2), rng.integers(0, classes, n - 2 * classes)])
    rng.shuffle(labels)
    centres = rng.standard_normal((classes, dim), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    embeddings = centres[labels] + NOISE * rng.standard_normal((n, dim), dtype=np.float32) / np.sqrt(dim)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    return embeddings.astype(np.float32), labels


def class_sample(labels: np.ndarray, size: int, seed: int) -> np.ndarray:
    """Indices of whole classes drawn at random until at least ``size`` items, so every item sampled keeps
    its neighbours of the same class (a plain item sample would leave most SOP classes with one item)."""
    rng = np.random.default_rng(seed)
    order = np.argsort(labels, kind="stable")
    starts = np.searchsorted(labels[order], np.arange(labels.max() + 1))
    counts = np.bincount(labels)
    chosen = rng.permutation(len(counts))
    enough = np.searchsorted(np.cumsum(counts[chosen]), size) + 1
    return np.sort(np.concatenate([order[starts[c] : starts[c] + counts[c]] for c in chosen[:enough]]))


def brute_force_recall(embeddings: np.ndarray, labels: np.ndarray, ks: tuple[int, ...]) -> dict[str, float]:
    """Recall@K from the full float64 distance matrix, the query excluded by index: the definition."""
    x = embeddings.astype(np.float64)
    squared = (x**2).sum(axis=1)
    distances = squared[:, None] + squared[None, :] - 2 * x @ x.T
    np.fill_diagonal(distances, np.inf)
    matches = labels[np.argsort(distances, axis=1, kind="stable")] == labels[:, None]
    return {f"recall@{k}": float(matches[:, :k].any(axis=1).mean()) for k in ks}


class Run:
    """One contender's result: the metrics and the wall seconds of its kNN and k-means parts."""

    def __init__(self) -> None:
        self.metrics: dict[str, float] = {}
        self.knn = float("nan")
        self.kmeans = float("nan")
        self.total = float("nan")
        self.cpu = float("nan")
        self.memory_mib = float("nan")
        # Peak GPU memory allocated by torch during the run (the torch engine on a GPU).
        self.gpu_mib = float("nan")
        # Lloyd iterations k-means ran: faiss stops once the objective stops changing, sklearn once the
        # assignments do, both before --niter when the clustering has converged.
        self.kmeans_iterations: int | None = None


def measured(function: Callable[[Run], None]) -> Run:
    run = Run()
    gpu = torch.cuda.is_available()
    if gpu:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        baseline = torch.cuda.memory_allocated()
    with PeakMemory() as memory:
        started, cpu = time.perf_counter(), time.process_time()
        function(run)
        run.total, run.cpu = time.perf_counter() - started, time.process_time() - cpu
    run.memory_mib = memory.added_mib
    if gpu:
        run.gpu_mib = (torch.cuda.max_memory_allocated() - baseline) / 2**20
    return run


def recall_from_neighbours(
    neighbours: np.ndarray, labels: np.ndarray, ks: tuple[int, ...]
) -> dict[str, float]:
    matches = labels[neighbours] == labels[:, None]
    hits = recall_hits(matches, ks)
    return {f"recall@{k}": float(h) / len(labels) for k, h in zip(ks, hits, strict=True)}


def raw_faiss(x: np.ndarray, labels: np.ndarray, ks: tuple[int, ...], niter: int) -> Callable[[Run], None]:
    def run(result: Run) -> None:
        started = time.perf_counter()
        _, neighbours = faiss.knn(x, x, max(ks) + 1, metric=faiss.METRIC_INNER_PRODUCT)
        neighbours = drop_self(neighbours, np.arange(len(x)))
        result.metrics.update(recall_from_neighbours(neighbours, labels, ks))
        result.knn = time.perf_counter() - started
        started = time.perf_counter()
        n_clusters = len(np.unique(labels))
        kmeans = faiss.Kmeans(
            x.shape[1],
            n_clusters,
            niter=niter,
            seed=SEED,
            max_points_per_centroid=len(x),
            min_points_per_centroid=1,
        )
        kmeans.train(x)
        result.kmeans_iterations = len(kmeans.obj)
        _, assignments = kmeans.index.search(x, 1)
        result.metrics["nmi"] = float(normalized_mutual_info_score(labels, assignments[:, 0]))
        result.kmeans = time.perf_counter() - started

    return run


def ours(
    x: np.ndarray,
    labels: np.ndarray,
    ks: tuple[int, ...],
    niter: int,
    backend: str = "faiss",
    use_gpu: bool = False,
) -> Callable[[Run], None]:
    def run(result: Run) -> None:
        timings: dict[str, float] = {}
        result.metrics.update(
            evaluate(
                x,
                labels,
                recall_ks=ks,
                nmi=True,
                map_at_r=False,
                seed=SEED,
                kmeans_niter=niter,
                use_gpu=use_gpu,
                backend=backend,
                timings=timings,
            )
        )
        result.knn, result.kmeans = timings["search"], timings["nmi"]

    return run


class _Timed:
    """Wraps PML's knn or k-means function to time it inside ``get_accuracy``."""

    def __init__(self, function: Callable[..., Any]):
        self.function = function
        self.seconds = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.function(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started


def pml(x: np.ndarray, labels: np.ndarray, ks: tuple[int, ...], niter: int) -> Callable[[Run], None]:
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    from pytorch_metric_learning.utils.inference import FaissKMeans, FaissKNN

    def run(result: Run) -> None:
        knn, kmeans = _Timed(FaissKNN()), _Timed(FaissKMeans(niter=niter, seed=SEED, gpu=False))
        calculator = AccuracyCalculator(
            include=("precision_at_1", "NMI"),
            k=max(ks),
            device=torch.device("cpu"),
            knn_func=knn,
            kmeans_func=kmeans,
        )
        with warnings.catch_warnings():
            # faiss's "please provide at least 39 * k points" is the protocol, not a problem.
            warnings.simplefilter("ignore")
            accuracy = calculator.get_accuracy(torch.from_numpy(x), torch.from_numpy(labels))
        result.metrics.update({"recall@1": float(accuracy["precision_at_1"]), "nmi": float(accuracy["NMI"])})
        result.knn, result.kmeans = knn.seconds, kmeans.seconds

    return run


def sklearn(x: np.ndarray, labels: np.ndarray, ks: tuple[int, ...], niter: int) -> Callable[[Run], None]:
    def run(result: Run) -> None:
        started = time.perf_counter()
        # n_neighbors=k+1 with the query itself among them, as faiss; sklearn's kneighbors(X=None) would
        # drop it, but by distance-0 rank rather than by index.
        search = NearestNeighbors(n_neighbors=max(ks) + 1, algorithm="brute", n_jobs=-1).fit(x)
        neighbours = search.kneighbors(x, return_distance=False)
        neighbours = drop_self(neighbours, np.arange(len(x)))
        result.metrics.update(recall_from_neighbours(neighbours, labels, ks))
        result.knn = time.perf_counter() - started
        started = time.perf_counter()
        kmeans = KMeans(
            n_clusters=len(np.unique(labels)),
            init="random",
            n_init=1,
            max_iter=niter,
            tol=0.0,
            algorithm="lloyd",
            random_state=SEED,
        )
        assignments = kmeans.fit_predict(x)
        result.kmeans_iterations = int(kmeans.n_iter_)
        result.metrics["nmi"] = float(normalized_mutual_info_score(labels, assignments))
        result.kmeans = time.perf_counter() - started

    return run


def run_all(contenders: dict[str, Callable[[Run], None]], repeats: int) -> dict[str, Run]:
    """Each contender ``repeats`` times, interleaved; per contender the run with the best wall total, with
    the best CPU time and the largest peak memory of its repeats (on a shared machine the least loaded
    repeat for wall time need not be the one with the least CPU time)."""
    best: dict[str, Run] = {}
    memory: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for repeat in range(repeats):
        for name, contender in contenders.items():
            run = measured(contender)
            print(
                f"  [{repeat + 1}/{repeats}] {name}: kNN {format_seconds(run.knn)}, "
                f"k-means+NMI {format_seconds(run.kmeans)}, total {format_seconds(run.total)} "
                f"(CPU {format_seconds(run.cpu)}), +{run.memory_mib:.0f} MiB",
                flush=True,
            )
            memory[name] = max(memory.get(name, 0.0), run.memory_mib)
            cpu[name] = min(cpu.get(name, float("inf")), run.cpu)
            if name not in best or run.total < best[name].total:
                best[name] = run
    for name, run in best.items():
        run.memory_mib, run.cpu = memory[name], cpu[name]
    return best


def recalls(metrics: dict[str, float]) -> dict[str, float]:
    return {key: value for key, value in metrics.items() if key.startswith("recall@")}


def ratio(value: float, anchor: float) -> str:
    return f"{value / anchor:.3f}x" if anchor == anchor and anchor > 0 and value == value else "-"


def iterations(run: Run, anchor: Run) -> str:
    """The k-means iterations of ``run``: ours and PML run faiss's k-means with raw faiss's settings and seed,
    so an equal NMI means the same clustering, reached in the same iterations."""
    if run.kmeans_iterations is not None:
        return str(run.kmeans_iterations)
    if anchor.kmeans_iterations is not None and run.metrics.get("nmi") == anchor.metrics.get("nmi"):
        return f"{anchor.kmeans_iterations} (same clustering)"
    return "-"


def metrics_text(metrics: dict[str, float]) -> str:
    return ", ".join(f"{key.replace('recall', 'R')} {value:.4f}" for key, value in metrics.items())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1/10 of SOP's test split, 3 repeats")
    parser.add_argument("--n", type=int, default=None, help="items (default: SOP test, 60,502)")
    parser.add_argument("--classes", type=int, default=None, help="classes (default: SOP test, 11,316)")
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--niter", type=int, default=20, help="k-means iterations")
    parser.add_argument("--repeats", type=int, default=None, help="default: 2 (full), 3 (--quick)")
    parser.add_argument(
        "--sklearn-n", type=int, default=15_000, help="sklearn's subsample size (capped at --n); 0 skips it"
    )
    parser.add_argument("--no-pml", action="store_true", help="skip pytorch-metric-learning")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    n = args.n or SOP_TEST[0] // scale
    classes = args.classes or SOP_TEST[1] // scale
    repeats = args.repeats or (3 if args.quick else 2)
    ks = tuple(k for k in RECALL_KS if k < n)

    print(f"# eval.py{' --quick' if args.quick else ''}")
    print(machine())
    print(
        f"faiss {faiss.__version__} ({faiss.omp_get_max_threads()} OpenMP threads, "
        f"{faiss.get_num_gpus()} GPUs)"
    )
    x, labels = sop_like(n, classes, args.dim, SEED)
    sizes = np.bincount(labels)
    print(
        f"{n} x {args.dim} unit embeddings ({x.nbytes / 2**20:.0f} MiB), {classes} classes of "
        f"{sizes.min()}-{sizes.max()} items (mean {sizes.mean():.2f}); Recall@{ks}, NMI ({args.niter} "
        f"iterations); best of {repeats}"
    )

    sample = class_sample(labels, min(2_000, n), SEED + 1)
    check_ks = tuple(k for k in ks if k < len(sample))
    got = evaluate(x[sample], labels[sample], recall_ks=check_ks, nmi=False, map_at_r=False, use_gpu=False)
    expected = brute_force_recall(x[sample], labels[sample], check_ks)
    verdict = "identical" if got == expected else "DIFFERENT"
    print(f"Recall@K of evaluate vs the brute-force definition on {len(sample)} items: {verdict}")
    print(f"  evaluate {metrics_text(got)}\n  brute    {metrics_text(expected)}", flush=True)

    contenders = {
        "raw faiss": raw_faiss(x, labels, ks, args.niter),
        "ours (evaluate)": ours(x, labels, ks, args.niter),
        "ours, torch engine, CPU": ours(x, labels, ks, args.niter, backend="torch"),
    }
    if torch.cuda.is_available():
        contenders["ours, torch engine, GPU"] = ours(x, labels, ks, args.niter, backend="torch", use_gpu=True)
    if faiss.get_num_gpus() > 0:
        contenders["ours, faiss GPU"] = ours(x, labels, ks, args.niter, backend="faiss", use_gpu=True)
    if not args.no_pml:
        contenders["PML AccuracyCalculator"] = pml(x, labels, ks, args.niter)
    print(f"\nfull size, N = {n}:", flush=True)
    runs = run_all(contenders, repeats)

    sklearn_runs: dict[str, Run] = {}
    m = min(args.sklearn_n, n)
    if m > 0:
        sub = class_sample(labels, m, SEED + 2) if m < n else np.arange(n)
        m = len(sub)
        # Relabel so the subsample's classes are 0..C-1; k-means gets as many clusters.
        _, sub_labels = np.unique(labels[sub], return_inverse=True)
        sub_x, sub_ks = np.ascontiguousarray(x[sub]), tuple(k for k in ks if k < m)
        print(f"\nscikit-learn subsample, n = {m} ({sub_labels.max() + 1} classes):", flush=True)
        sklearn_runs = run_all(
            {
                "raw faiss": raw_faiss(sub_x, sub_labels, sub_ks, args.niter),
                "scikit-learn": sklearn(sub_x, sub_labels, sub_ks, args.niter),
            },
            repeats,
        )

    anchor = runs["raw faiss"]
    rows = []
    for name, run in runs.items():
        rows.append(
            [
                name,
                format_seconds(run.knn),
                ratio(run.knn, anchor.knn),
                format_seconds(run.kmeans),
                ratio(run.kmeans, anchor.kmeans),
                format_seconds(run.total),
                ratio(run.total, anchor.total),
                format_seconds(run.cpu),
                ratio(run.cpu, anchor.cpu),
                iterations(run, anchor),
                f"{run.memory_mib:.0f}" + (f" (GPU {run.gpu_mib:.0f})" if run.gpu_mib > 0 else ""),
                metrics_text(run.metrics),
            ]
        )
    if sklearn_runs:
        faiss_sub, sk_sub = sklearn_runs["raw faiss"], sklearn_runs["scikit-learn"]
        extrapolate = (n / m) ** 2
        label = "scikit-learn" if m == n else f"scikit-learn (n={m}, time x (N/n)^2 = x{extrapolate:.1f})"
        rows.append(
            [
                label,
                format_seconds(sk_sub.knn * extrapolate),
                ratio(sk_sub.knn, faiss_sub.knn),
                format_seconds(sk_sub.kmeans * extrapolate),
                ratio(sk_sub.kmeans, faiss_sub.kmeans),
                format_seconds(sk_sub.total * extrapolate),
                ratio(sk_sub.total, faiss_sub.total),
                format_seconds(sk_sub.cpu * extrapolate),
                ratio(sk_sub.cpu, faiss_sub.cpu),
                iterations(sk_sub, faiss_sub),
                f"{sk_sub.memory_mib:.0f} (at n)",
                metrics_text(sk_sub.metrics) + " (subsample)",
            ]
        )
    print_table(
        [
            "contender",
            "kNN",
            "/faiss",
            "k-means+NMI",
            "/faiss",
            "total",
            "/faiss",
            "CPU time",
            "/faiss",
            "k-means iter.",
            "peak +MiB",
            "metrics",
        ],
        rows,
        title=(
            f"N = {n}, {classes} classes, dim {args.dim}, {os.cpu_count()} CPU cores. Ratios are to raw "
            "faiss (sklearn's: to raw faiss on the same subsample, measured side by side). kNN, k-means and "
            "total: wall times of the repeat with the best total; CPU time: the best repeat's, all threads "
            "counted. Other jobs on a shared machine move wall times; CPU time of one thread "
            "(OMP_NUM_THREADS=1) hardly moves: it is the figure to compare there."
        ),
    )
    if sklearn_runs:
        faiss_sub, sk_sub = sklearn_runs["raw faiss"], sklearn_runs["scikit-learn"]
        agree = "equals" if recalls(sk_sub.metrics) == recalls(faiss_sub.metrics) else "DIFFERS from"
        print(
            f"on the subsample: raw faiss kNN {format_seconds(faiss_sub.knn)}, k-means+NMI "
            f"{format_seconds(faiss_sub.kmeans)}; scikit-learn kNN {format_seconds(sk_sub.knn)}, k-means+NMI "
            f"{format_seconds(sk_sub.kmeans)}; scikit-learn's Recall@K {agree} faiss's"
        )

    ours_run = runs["ours (evaluate)"]
    for name, run in runs.items():
        if name.startswith("ours"):
            same_recall = recalls(run.metrics) == recalls(anchor.metrics)
            print(
                f"{name} vs raw faiss: Recall@K {'identical' if same_recall else 'DIFFERENT'}, NMI "
                f"{run.metrics['nmi']:.6f} vs {anchor.metrics['nmi']:.6f}"
            )
    pml_run = runs.get("PML AccuracyCalculator")
    targets = [
        (
            f"ours within 1.05x of raw faiss: wall {ours_run.total / anchor.total:.3f}x, "
            f"CPU {ours_run.cpu / anchor.cpu:.3f}x",
            min(ours_run.total / anchor.total, ours_run.cpu / anchor.cpu) <= 1.05,
        ),
        (f"ours peak memory under 2 GiB: +{ours_run.memory_mib:.0f} MiB", ours_run.memory_mib < 2048),
        ("Recall@K identical to brute force", got == expected),
    ]
    if pml_run is not None:
        targets.append(
            (
                f"ours ahead of PML: wall {ours_run.total / pml_run.total:.3f}x, "
                f"CPU {ours_run.cpu / pml_run.cpu:.3f}x of PML's",
                min(ours_run.total / pml_run.total, ours_run.cpu / pml_run.cpu) < 1,
            )
        )
    for text, ok in targets:
        print(f"target: {text}: {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
