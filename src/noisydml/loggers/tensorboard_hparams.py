"""A TensorBoard logger whose HParams table holds each run's choices and its selected metrics.

TensorBoard's HParams view lists the runs that wrote an hparams summary: the hyperparameters and the names
of the metrics to show, whose values it reads from the run's scalars. Lightning writes one only beside
metrics, and a run's metrics exist only once it is tested, so the summary is written then
(:meth:`HParamsTensorBoardLogger.log_summary`), with the flat choice keys
(:func:`noisydml.loggers.run_fields.choice_keys`) as the hyperparameters, not the ~130 keys of the config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightning_fabric.utilities.rank_zero import rank_zero_only
from pytorch_lightning.loggers import TensorBoardLogger

# Scored once, after training: the HParams table's metric columns.
FINAL_PREFIXES = ("test/", "test_last/", "selected_val/")


class HParamsTensorBoardLogger(TensorBoardLogger):
    """:class:`~pytorch_lightning.loggers.TensorBoardLogger` that fills TensorBoard's HParams table."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._choices: dict[str, Any] = {}
        self._final: dict[str, float] = {}
        self._step = 0

    @rank_zero_only
    def log_hyperparams(self, params: Mapping[str, Any], metrics: Mapping | None = None, step=None) -> None:
        # The flat keys are the choices; nested ones (the whole config under cfg) go to hparams.yaml only.
        self._choices.update(
            {
                key: value
                for key, value in params.items()
                if not isinstance(value, Mapping) and value is not None
            }
        )
        super().log_hyperparams(params, metrics, step)

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        self._final.update({key: value for key, value in metrics.items() if key.startswith(FINAL_PREFIXES)})
        self._step = max(self._step, step or 0)
        super().log_metrics(metrics, step)

    @rank_zero_only
    def log_summary(self, fields: Mapping[str, object]) -> None:
        """The HParams row of the run: its choices, its test and selected validation metrics and the
        numeric fields of how it went (``selected_epoch``, ``wall_time_s``...)."""
        numbers = {
            key: float(value)
            for key, value in fields.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        }
        metrics = {**self._final, **numbers}
        if metrics:
            super().log_hyperparams(self._choices, metrics, self._step)
            self.save()
