"""A W&B logger whose run continues across interruptions: one run, every step once.

Lightning's WandbLogger leaves W&B's step (``_step``) to W&B, which counts from 0 in each process, so the
part of a run after a resume restarts at step 0 and, once synced, W&B drops it as older than what the run
already holds. Here W&B's step is the trainer's global step: a resumed run (``resume: allow`` with the
id of the run it continues) goes on from its checkpoint's step, and the offline folders of one run
(``wandb sync`` uploads them in order) are one history. Steps a killed run logged after its last
checkpoint are not logged again: a resumed run reads which steps its earlier folders hold and logs only the
others, so every step is in one folder once. A kill also cuts the steps W&B still held in memory: a resumed
run logs those of its history before the checkpoint from the CSV (:meth:`ResumableWandbLogger.log_rows`).
Offline, where no server can say so, the continued run is marked resumed (W&B's ``resumed``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import wandb
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from lightning_fabric.utilities.rank_zero import rank_zero_only
from pytorch_lightning.loggers import WandbLogger
from pytorch_lightning.loggers.logger import rank_zero_experiment

from noisydml.loggers.run_fields import job_name, wandb_group
from noisydml.loggers.wandb_records import history_steps
from noisydml.utils.checks import BadValue
from noisydml.utils.run_directory import RunDir

# Scored once per validation: charted against the epoch, not the step (W&B: define_metric).
EPOCH_METRICS = ("val/*", "test_epoch/*", "train_epoch/*")


# The logger's keys W&B's own settings check only when the run starts: (key, its settings field, the fix).
CHECKED_SETTINGS = (
    ("id", "run_id", "give an id of letters, digits, '-' and '_', e.g. id=run_1, or id=null for a new run"),
    ("project", "project", "give a name without those characters, e.g. project=noisydml"),
)


def check_settings(given: Mapping[str, object]) -> None:
    """The logger's keys of :data:`CHECKED_SETTINGS` as W&B's own settings take them."""
    for key, field, fix in CHECKED_SETTINGS:
        if (value := given.get(key)) is None:
            continue
        try:
            wandb.Settings(**{field: str(value)})
        except wandb.errors.UsageError as error:
            raise BadValue(key, f"={value} is refused by W&B ({error}); {fix}") from None


class ResumableWandbLogger(WandbLogger):
    """:class:`~pytorch_lightning.loggers.WandbLogger` that logs at W&B step = the trainer's global step."""

    _last_step = 0

    def __init__(
        self,
        *,
        group: str,
        name: str | None = None,
        tags: list[str] | None = None,
        extra_tags: list[str] | None = None,
        **kwargs,
    ) -> None:
        # A sweep's jobs share <group>/<sweep folder>: two sweeps of one name= (the folder's time differs)
        # never share a group. A job's name is its own overrides, which W&B would otherwise make up.
        # extra_tags: the run's own (the config's `tags`), after the choices the config tags every run with.
        tags = [*(tags or []), *(str(tag) for tag in extra_tags or [])]
        self.check_arguments(**kwargs)
        # The steps the run's earlier folders already hold (a resumed run is given the id it continues).
        self._held = held_steps(kwargs.get("save_dir"), kwargs.get("id"))
        if kwargs.get("id") and os.environ.get("WANDB_MODE") == "offline" and "settings" not in kwargs:
            # Online, W&B's server says a run with a known id is resumed; offline, no one would.
            kwargs["settings"] = wandb.Settings(resumed=True)
        super().__init__(group=sweep_group(group), name=name or job_name(group), tags=tags, **kwargs)
        self._last_step = max(self._held, default=0)

    @staticmethod
    def check_arguments(**kwargs: Any) -> None:
        """The keys W&B checks only as its run starts (:func:`check_settings`), and a resume with no run to
        continue; without building the logger (``noisydml.run.checks.library.check_built``)."""
        check_settings(kwargs)
        if kwargs.get("resume") == "must" and not kwargs.get("id"):
            raise BadValue(
                "resume",
                "=must continues the W&B run that id names, but id=null; give the run's id=..., or "
                "resume=allow (a resumed noisydml run gives its own id)",
            )

    @property
    @rank_zero_experiment
    def experiment(self):
        new = self._experiment is None
        run = super().experiment
        if new and hasattr(run, "define_metric"):
            run.define_metric("epoch")
            for pattern in EPOCH_METRICS:
                run.define_metric(pattern, step_metric="epoch")
        return run

    @rank_zero_only
    def log_summary(self, fields: Mapping[str, object]) -> None:
        """Fields of the run as a whole (which epoch was tested, the realised noise rate, the status, the
        wall time) in W&B's summary, beside the metrics' last values."""
        self.experiment.summary.update(dict(fields))

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        if step is None:
            return super().log_metrics(metrics, step)
        if step in self._held:
            return
        # W&B drops values logged at a step before its latest; never ask it to go back.
        self._last_step = max(self._last_step, step)
        self.experiment.log({**metrics, "trainer/global_step": step}, step=self._last_step)

    def log_rows(self, rows: list[dict[str, str]]) -> None:
        """Log rows of ``csv/metrics.csv`` (a ``step`` column and a column per metric, empty where a row
        has none of it), each at its step."""
        for row in rows:
            values = {key: float(value) for key, value in row.items() if key != "step" and value != ""}
            self.log_metrics(values, int(row["step"]))


def sweep_group(group: str) -> str:
    """``group`` for a single run; ``<group>/<sweep folder's name>`` for a job of a sweep."""
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return group
    hydra = HydraConfig.get()
    return wandb_group(group, True, hydra.runtime.output_dir, hydra.sweep.subdir)


def held_steps(save_dir: str | None, run_id: str | None) -> set[int]:
    """The W&B steps that the folders of run ``run_id`` under ``save_dir`` already hold: a resumed run
    logs each of the others once, and none of these again."""
    if not save_dir or not run_id:
        return set()
    steps: set[int] = set()
    for path in sorted(RunDir(Path(save_dir)).wandb_dir.glob(f"*run-*-{run_id}/run-{run_id}.wandb")):
        steps |= history_steps(path)
    return steps
