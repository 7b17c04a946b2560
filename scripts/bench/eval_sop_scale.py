"""Time and memory of ``noisydml.metrics.evaluate`` at Stanford Online Products test scale.

Random L2-normalised embeddings stand in for a model's: 60,502 items of 11,316 classes (SOP's test split,
~5.3 images a class, at least 2). Prints the wall time of the kNN search (Recall@1/10/100/1000) and of
k-means + NMI, and the process's peak resident memory, which includes what importing numpy, torch and
faiss cost (printed first, as the baseline).

    python scripts/bench/eval_sop_scale.py              # full size; several minutes on a 2-core CPU
    python scripts/bench/eval_sop_scale.py --n 5000 --classes 900 --check
"""

from __future__ import annotations

import argparse
import resource
import time

import faiss
import numpy as np

from noisydml.metrics import evaluate

RECALL_KS = (1, 10, 100, 1000)


def peak_rss_mib() -> float:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sop_like(n: int, classes: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random unit vectors; every class gets 2 items (SOP's minimum), the rest go to random
    classes, which spreads sizes around SOP's mean of ~5.3."""
    if n < 2 * classes:
        raise ValueError(f"--n={n} is too small for --classes={classes}: each class needs 2 items")
    rng = np.random.default_rng(seed)
    labels = np.concatenate([np.repeat(np.arange(classes), 2), rng.integers(0, classes, n - 2 * classes)])
    rng.shuffle(labels)
    embeddings = rng.standard_normal((n, dim), dtype=np.float32)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    return embeddings, labels


def brute_force_recall(embeddings: np.ndarray, labels: np.ndarray, ks: tuple[int, ...]) -> dict[str, float]:
    """Recall@K from the full float64 distance matrix, the query excluded by index."""
    x = embeddings.astype(np.float64)
    squared = (x**2).sum(axis=1)
    distances = squared[:, None] + squared[None, :] - 2 * x @ x.T
    np.fill_diagonal(distances, np.inf)
    matches = labels[np.argsort(distances, axis=1, kind="stable")] == labels[:, None]
    return {f"recall@{k}": float(matches[:, :k].any(axis=1).mean()) for k in ks}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=60_502, help="number of embeddings (SOP test: 60,502)")
    parser.add_argument("--classes", type=int, default=11_316, help="number of classes (SOP test: 11,316)")
    parser.add_argument("--dim", type=int, default=512, help="embedding dimension")
    parser.add_argument("--niter", type=int, default=20, help="k-means iterations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--check", action="store_true", help="also check Recall@K against brute force on 2,000 items"
    )
    args = parser.parse_args()

    print(f"faiss {faiss.__version__}, {faiss.get_num_gpus()} GPU(s), {faiss.omp_get_max_threads()} threads")
    print(f"peak RSS after imports: {peak_rss_mib():.0f} MiB")
    embeddings, labels = sop_like(args.n, args.classes, args.dim, args.seed)
    baseline = peak_rss_mib()
    sizes = np.bincount(labels)
    print(
        f"{args.n} x {args.dim} embeddings ({embeddings.nbytes / 2**20:.0f} MiB), {args.classes} classes "
        f"of {sizes.min()}-{sizes.max()} items (mean {sizes.mean():.2f})"
    )
    print(f"peak RSS before evaluation (baseline): {baseline:.0f} MiB")

    timings: dict[str, float] = {}
    started = time.perf_counter()
    results = evaluate(
        embeddings,
        labels,
        recall_ks=RECALL_KS,
        nmi=True,
        map_at_r=False,
        seed=args.seed,
        kmeans_niter=args.niter,
        timings=timings,
    )
    total = time.perf_counter() - started
    peak = peak_rss_mib()

    print(", ".join(f"{key} {value:.4f}" for key, value in results.items()))
    print(f"kNN search (k = {max(RECALL_KS) + 1}): {timings['search']:.1f} s")
    print(f"k-means ({args.classes} centroids, {args.niter} iterations) + NMI: {timings['nmi']:.1f} s")
    print(f"evaluate total: {total:.1f} s")
    print(f"peak RSS: {peak:.0f} MiB, of which evaluation added {peak - baseline:.0f} MiB over the baseline")

    if args.check:
        sample = np.random.default_rng(args.seed + 1).choice(args.n, size=min(2_000, args.n), replace=False)
        ks = tuple(k for k in RECALL_KS if k < len(sample))
        ours = evaluate(embeddings[sample], labels[sample], recall_ks=ks, nmi=False, map_at_r=False)
        expected = brute_force_recall(embeddings[sample], labels[sample], ks)
        verdict = "equal" if ours == expected else "DIFFERENT"
        print(f"check on {len(sample)} items: evaluate {ours} vs brute force {expected}: {verdict}")
        if ours != expected:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
