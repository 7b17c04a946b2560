"""A W&B logger whose run continues across interruptions: one run, every step once.

Lightning's WandbLogger leaves W&B's step (``_step``) to W&B, which counts from 0 in each process, so the
part of a run after a resume restarts at step 0 and, once synced, W&B drops it as older than what the run
already holds. Here W&B's step is the trainer's global step: a resumed run (``resume: allow`` with the
id of the run it continues) goes on from its checkpoint's step, and the offline folders of one run
(``wandb sync`` uploads them in order) are one history. Steps a killed run logged after its last
checkpoint are logged again, with the same values, on resume, and W&B keeps them once. A kill also cuts
the steps W&B still held in memory: a resumed run logs its history before the checkpoint again, from the
CSV (:meth:`ResumableWandbLogger.log_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping

from lightning_fabric.utilities.rank_zero import rank_zero_only
from pytorch_lightning.loggers import WandbLogger


class ResumableWandbLogger(WandbLogger):
    """:class:`~pytorch_lightning.loggers.WandbLogger` that logs at W&B step = the trainer's global step."""

    _last_step = 0

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        if step is None:
            return super().log_metrics(metrics, step)
        # W&B drops values logged at a step before its latest; never ask it to go back.
        self._last_step = max(self._last_step, step)
        self.experiment.log({**metrics, "trainer/global_step": step}, step=self._last_step)

    def log_rows(self, rows: list[dict[str, str]]) -> None:
        """Log rows of ``csv/metrics.csv`` (a ``step`` column and a column per metric, empty where a row
        has none of it), each at its step."""
        for row in rows:
            values = {key: float(value) for key, value in row.items() if key != "step" and value != ""}
            self.log_metrics(values, int(row["step"]))
