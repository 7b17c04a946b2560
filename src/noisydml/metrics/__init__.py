"""Test-time metrics: Recall@K, NMI, NMI+, MAP@R and full-ranking mAP from one entry point,
:func:`~noisydml.metrics.evaluation.evaluate`; :class:`~noisydml.metrics.evaluator.Evaluator` is its
configured form (``conf/metrics/``) that the training module calls."""

from noisydml.metrics.evaluation import evaluate

__all__ = ["evaluate"]
