"""MLflow's metric names, and a Lightning MLflow logger that keeps ours readable and names its runs.

MLflow refuses ``@`` in a metric name, and Lightning's MLFlowLogger drops what MLflow refuses, so
``test/recall@1`` became ``test/recall1``: here it is ``test/recall_at_1``, the same in a live run's store
and in the one ``noisydml-dashboard`` builds. A run is named by its job's overrides
(``miner=fixed_semihard noise.rate=0.4``), as its W&B run and its run in ``noisydml-dashboard`` are.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytorch_lightning.loggers import MLFlowLogger

from noisydml.loggers.run_fields import job_name


def mlflow_key(name: str) -> str:
    """``name`` as MLflow takes it: ``test/recall@1`` -> ``test/recall_at_1``."""
    return name.replace("@", "_at_")


class ReadableMLFlowLogger(MLFlowLogger):
    """:class:`~pytorch_lightning.loggers.MLFlowLogger` that writes ``@`` in metric names as ``_at_`` and
    names a run (``run_name`` null) by its job's overrides, or ``experiment_name`` for a run of the
    defaults."""

    def __init__(
        self, experiment_name: str = "lightning_logs", run_name: str | None = None, **kwargs
    ) -> None:
        super().__init__(
            experiment_name=experiment_name, run_name=run_name or job_name(experiment_name), **kwargs
        )

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        super().log_metrics({mlflow_key(key): value for key, value in metrics.items()}, step)
