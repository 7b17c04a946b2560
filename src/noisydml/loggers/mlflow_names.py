"""MLflow's metric names, and a Lightning MLflow logger that keeps ours readable.

MLflow refuses ``@`` in a metric name, and Lightning's MLFlowLogger drops what MLflow refuses, so
``test/recall@1`` became ``test/recall1``: here it is ``test/recall_at_1``, the same in a live run's store
and in the one ``noisydml-dashboard`` builds.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytorch_lightning.loggers import MLFlowLogger


def mlflow_key(name: str) -> str:
    """``name`` as MLflow takes it: ``test/recall@1`` -> ``test/recall_at_1``."""
    return name.replace("@", "_at_")


class ReadableMLFlowLogger(MLFlowLogger):
    """:class:`~pytorch_lightning.loggers.MLFlowLogger` that writes ``@`` in metric names as ``_at_``."""

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        super().log_metrics({mlflow_key(key): value for key, value in metrics.items()}, step)
