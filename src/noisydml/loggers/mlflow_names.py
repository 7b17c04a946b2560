"""MLflow's metric names, and a Lightning MLflow logger that keeps ours readable and names its runs.

MLflow refuses ``@`` in a metric name, and Lightning's MLFlowLogger drops what MLflow refuses, so
``test/recall@1`` became ``test/recall1``: here it is ``test/recall_at_1``, the same in a live run's store
and in the one ``noisydml-dashboard`` builds. A run is named by its job's overrides
(``miner=fixed_semihard noise.rate=0.4``), as its W&B run and its run in ``noisydml-dashboard`` are.
"""

from __future__ import annotations

import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from pytorch_lightning.loggers import MLFlowLogger

from noisydml.loggers.run_fields import job_name
from noisydml.utils.checks import BadValue

# Seconds a tracking server is given to answer one request before anything logs to it: MLflow's client
# retries a server that does not answer with backoff (MLFLOW_HTTP_REQUEST_MAX_RETRIES), for minutes.
PROBE_TIMEOUT_S = 5.0
TRACKING_VARIABLE = "MLFLOW_TRACKING_URI"


def mlflow_key(name: str) -> str:
    """``name`` as MLflow takes it: ``test/recall@1`` -> ``test/recall_at_1``."""
    return name.replace("@", "_at_")


def check_store(tracking_uri: str | None) -> None:
    """A store this MLflow writes to: MLflow 3 refuses its file store (a folder, ``file:``, or none given:
    ``./mlruns``) unless ``MLFLOW_ALLOW_FILE_STORE`` says otherwise."""
    import mlflow
    from mlflow import environment_variables
    from mlflow.utils.uri import get_uri_scheme

    allowed = getattr(environment_variables, "MLFLOW_ALLOW_FILE_STORE", None)
    if allowed is None or allowed.get() or get_uri_scheme(tracking_uri or "") not in ("", "file"):
        return
    raise BadValue(
        "tracking_uri",
        f"={tracking_uri or 'null (./mlruns)'} is a file store, which MLflow {mlflow.__version__} refuses "
        "(it keeps only database stores up to date); use one, e.g. "
        "tracking_uri=sqlite:///outputs/mlflow.db, or set the environment variable "
        "MLFLOW_ALLOW_FILE_STORE to true to keep the file store",
    )


def check_server(tracking_uri: str | None) -> None:
    """An HTTP(S) tracking server answers one request within :data:`PROBE_TIMEOUT_S`; any answer counts (an
    error status, a certificate only MLflow's own settings verify), no connection is refused, naming
    ``MLFLOW_TRACKING_URI`` where the address is its value. Other stores (a database, a folder) are local."""
    if not tracking_uri or urlparse(tracking_uri).scheme not in ("http", "https"):
        return
    try:
        with urllib.request.urlopen(f"{tracking_uri.rstrip('/')}/health", timeout=PROBE_TIMEOUT_S):
            return
    except urllib.error.HTTPError:
        return
    except OSError as error:
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        if isinstance(reason, ssl.SSLError):
            return
        why = getattr(reason, "strerror", None) or str(reason)
    if os.environ.get(TRACKING_VARIABLE) == tracking_uri:
        where = f" (the environment variable {TRACKING_VARIABLE})"
        fix = (
            f"start the server there, set {TRACKING_VARIABLE} to one that answers, or unset it to log "
            "to the local store sqlite:///outputs/mlflow.db"
        )
    else:
        where, fix = (
            "",
            "start the server there, or give one that answers, e.g. tracking_uri=sqlite:///outputs/mlflow.db",
        )
    raise BadValue(
        "tracking_uri",
        f"={tracking_uri}{where} does not answer ({why}), and MLflow would retry it for minutes while the "
        f"run waits; {fix}",
    )


def check_experiment_name(name: object) -> None:
    """An experiment name MLflow takes, refused before the store is built (a file written)."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils.validation import _validate_experiment_name

    try:
        _validate_experiment_name(name)
    except MlflowException as error:
        shown = "''" if name == "" else name
        raise BadValue(
            "experiment_name",
            f"={shown} is refused by MLflow ({error.message}); give a name, e.g. experiment_name=noisydml",
        ) from None


class ReadableMLFlowLogger(MLFlowLogger):
    """:class:`~pytorch_lightning.loggers.MLFlowLogger` that writes ``@`` in metric names as ``_at_`` and
    names a run (``run_name`` null) by its job's overrides, or ``experiment_name`` for a run of the
    defaults."""

    def __init__(
        self, experiment_name: str = "lightning_logs", run_name: str | None = None, **kwargs
    ) -> None:
        # Before MLflow builds the store, which it refuses in the constructor.
        self.check_arguments(experiment_name, **kwargs)
        super().__init__(
            experiment_name=experiment_name, run_name=run_name or job_name(experiment_name), **kwargs
        )

    @staticmethod
    def check_arguments(experiment_name: str = "lightning_logs", **kwargs: Any) -> None:
        """The store and the experiment's name as MLflow takes them, and a tracking server that answers,
        checked without building the logger (which builds the store:
        ``noisydml.run.checks.library.check_built``)."""
        tracking_uri = kwargs.get("tracking_uri", os.environ.get(TRACKING_VARIABLE))
        check_store(tracking_uri)
        check_experiment_name(experiment_name)
        check_server(tracking_uri)

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        super().log_metrics({mlflow_key(key): value for key, value in metrics.items()}, step)
