"""What a run is scored with: ``conf/metrics/<name>.yaml`` builds an :class:`Evaluator`.

Arrays in, metrics out. The training module only embeds (the test split, and the training split as
reference when a metric asks for it) and hands the arrays over; which metrics, and their options, are
this object's.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import get_args

import numpy as np

from noisydml.metrics.classification import check_same_classes, knn_accuracy, ncm_accuracy
from noisydml.metrics.clustering import DEFAULT_NITER, KMeansInit, NMIAverage
from noisydml.metrics.engine import Backend, engine_record, install_conflict, resolve_engine
from noisydml.metrics.evaluation import evaluate
from noisydml.utils.checks import Rule, check_value
from noisydml.utils.errors import BadInput

# The metrics that classify the scored split against the training embeddings (needs_reference).
CLASSIFICATIONS = ("ncm_accuracy", "knn_accuracy_k")
RECALL_KS = Rule("metrics.recall_ks", int, 1, each=True, example="metrics.recall_ks=[1,2,4,8]")
# The options of the classification and clustering metrics, in the order the constructor checks them.
RULES = (
    Rule("metrics.knn_accuracy_k", int, 1, optional=True, example="metrics.knn_accuracy_k=5"),
    Rule("metrics.nmi_seeds", int, 1, example="metrics.nmi_seeds=5"),
    Rule("metrics.nmi_plus_factor", int, 1, optional=True, example="metrics.nmi_plus_factor=2"),
    Rule("metrics.nmi_average", str, options=get_args(NMIAverage)),
    Rule("metrics.kmeans_niter", int, 1, example="metrics.kmeans_niter=20"),
    Rule("metrics.kmeans_restarts", int, 1, example="metrics.kmeans_restarts=5"),
    Rule("metrics.kmeans_init", str, options=get_args(KMeansInit)),
    RECALL_KS,
)


class Evaluator:
    """Recall@K, NMI, NMI+, MAP@R and full-ranking mAP of test embeddings (see :func:`evaluate`), and the
    papers' classification of test items against the training embeddings: Yu et al.'s nearest class
    mean (``ncm_accuracy``) and BDML's k-NN vote (``knn_accuracy_k``).

    ``needs_reference`` says whether the caller must pass the training embeddings (the samples trained
    on, with the test transform, and their observed labels).

    ``backend`` and ``use_gpu`` choose the engine of the kNN searches and k-means
    (:mod:`noisydml.metrics.engine`); a choice this machine cannot run is refused here, before training.
    """

    def __init__(
        self,
        recall_ks: Sequence[int] = (1, 2, 4, 8),
        nmi: bool = True,
        nmi_plus_factor: int | None = None,
        nmi_average: NMIAverage = "arithmetic",
        nmi_seeds: int = 1,
        kmeans_init: KMeansInit = "random",
        kmeans_niter: int = DEFAULT_NITER,
        kmeans_restarts: int = 1,
        map_at_r: bool = True,
        map_full: bool = False,
        ncm_accuracy: bool = False,
        knn_accuracy_k: int | None = None,
        backend: Backend = "auto",
        use_gpu: bool | None = None,
    ):
        values = (knn_accuracy_k, nmi_seeds, nmi_plus_factor, nmi_average, kmeans_niter, kmeans_restarts)
        for rule, value in zip(RULES, (*values, kmeans_init, recall_ks), strict=True):
            check_value(rule, value)
        try:
            resolve_engine(backend, use_gpu)
        except ValueError as error:
            raise ValueError(f"metrics.backend={backend}, metrics.use_gpu={use_gpu}: {error}") from None
        if (conflict := install_conflict()) is not None:
            warnings.warn(conflict, stacklevel=2)
        self.engine = dict(backend=backend, use_gpu=use_gpu)
        self.options = dict(
            recall_ks=tuple(recall_ks),
            nmi=nmi,
            nmi_plus_factor=nmi_plus_factor,
            nmi_average=nmi_average,
            nmi_seeds=nmi_seeds,
            kmeans_init=kmeans_init,
            kmeans_niter=kmeans_niter,
            kmeans_restarts=kmeans_restarts,
            map_at_r=map_at_r,
            map_full=map_full,
            **self.engine,
        )
        self.ncm_accuracy = ncm_accuracy
        self.knn_accuracy_k = knn_accuracy_k

    def names(self) -> list[str]:
        """The names of the metrics a call returns (``recall@1``, ``nmi``, ...)."""
        o = self.options
        names = [f"recall@{k}" for k in o["recall_ks"]]
        names += ["map@r"] * o["map_at_r"] + ["map"] * o["map_full"]
        for key, on in (("nmi", o["nmi"]), ("nmi+", o["nmi_plus_factor"] is not None)):
            names += [key, f"{key}_std"][: on * (1 + (o["nmi_seeds"] > 1))]
        names += ["ncm_accuracy"] * bool(self.ncm_accuracy)
        names += [f"knn_accuracy@{self.knn_accuracy_k}"] * bool(self.knn_accuracy_k)
        return names

    def check_sizes(self, train: int, candidates: dict[str, int]) -> None:
        """Recall@K needs K candidates for each query of each split scored (``candidates``: split -> how
        many a query has), and the k-NN vote's k at most the ``train`` training samples it votes with."""
        ks = self.options["recall_ks"]
        for split, count in candidates.items():
            if ks and max(ks) > count:
                raise BadInput(
                    f"metrics.recall_ks=[{','.join(map(str, ks))}]: Recall@{max(ks)} needs more than the "
                    f"{count} neighbours each {split} query has; use K up to {count}, e.g. "
                    "metrics.recall_ks=[1,2,4,8]"
                )
        if (k := self.knn_accuracy_k) and k > train:
            raise BadInput(
                f"metrics.knn_accuracy_k={k}: the k-NN vote classifies a test item by its k nearest of the "
                f"{train} training samples; use k up to {train}, e.g. metrics.knn_accuracy_k=5"
            )

    def check_classes(self, train_labels: np.ndarray, scored: dict[str, np.ndarray]) -> None:
        """The classifications (``ncm_accuracy``, ``knn_accuracy_k``) need each scored split's classes
        (``scored``: split -> its labels) among the ``train_labels`` they classify into."""
        for metric in (name for name in CLASSIFICATIONS if getattr(self, name)):
            for split, labels in scored.items():
                check_same_classes(labels, train_labels, f"metrics.{metric}", split)

    def engine_record(self) -> dict:
        """The engine the metrics are computed with on this machine, as ``results.json`` records it
        (:func:`noisydml.metrics.engine.engine_record`)."""
        return engine_record(**self.engine)

    @property
    def needs_reference(self) -> bool:
        return any(getattr(self, name) for name in CLASSIFICATIONS)

    def __call__(
        self,
        embeddings: np.ndarray,
        labels: np.ndarray,
        *,
        query_mask: np.ndarray | None = None,
        seed: int = 0,
        reference: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> dict[str, float]:
        """The metrics of ``embeddings`` (N x dim) with their ``labels``, unprefixed (``"recall@1"``).

        ``query_mask`` splits queries from gallery (In-Shop), ``seed`` drives k-means, ``reference`` is
        ``(training embeddings, their labels)``, required when :attr:`needs_reference`.
        """
        metrics = evaluate(embeddings, labels, query_mask=query_mask, seed=seed, **self.options)
        if not self.needs_reference:
            return metrics
        if reference is None:
            raise ValueError(
                "metrics.ncm_accuracy and metrics.knn_accuracy_k classify against the training embeddings: "
                "pass reference=(embeddings, labels)"
            )
        reference_embeddings, reference_labels = reference
        if self.ncm_accuracy:
            metrics["ncm_accuracy"] = ncm_accuracy(embeddings, labels, reference_embeddings, reference_labels)
        if self.knn_accuracy_k:
            metrics[f"knn_accuracy@{self.knn_accuracy_k}"] = knn_accuracy(
                embeddings,
                labels,
                reference_embeddings,
                reference_labels,
                k=self.knn_accuracy_k,
                **self.engine,
            )
        return metrics
