"""A CSV logger whose history survives a resume: the resumed run appends to ``metrics.csv``.

Lightning's CSVLogger deletes the metrics file of a run directory it starts in, so a resumed run kept
only the epochs after its checkpoint. Here the rows logged after the checkpoint the run resumes from
(a run killed after its last checkpoint logged a few more steps) are dropped instead, and the rest kept,
so the file holds every step once. Lines end with LF, as every text file of a run does (Python's csv writes
CRLF unless told).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from pytorch_lightning.loggers import CSVLogger
from pytorch_lightning.loggers.csv_logs import ExperimentWriter

from noisydml.utils.atomic import atomic_write
from noisydml.utils.checks import Rule, check_value

# How often the rows are written; Lightning takes the remainder of the step by it.
FLUSH_STEPS = Rule(
    "flush_logs_every_n_steps", int, 1, example="flush_logs_every_n_steps=100 (Lightning's default)"
)


def keep_rows_before(path: Path, step: int) -> list[dict[str, str]]:
    """Rewrite the metrics CSV at ``path`` with only its rows logged before global step ``step`` (all of
    them gone for ``step=0``: a run started over); return them."""
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames or [], [row for row in reader if int(row["step"]) < step]
    _write(path, fields, rows)
    return rows


def _write(path: Path, fields: list[str], rows: list[dict]) -> None:
    # Rewritten whenever a new metric appears (several times a run) and appended to unsynced in between.
    with atomic_write(path, durable=False) as f:
        writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


class _AppendingWriter(ExperimentWriter):
    def _check_log_dir_exists(self) -> None:
        # Lightning deletes the file here; continue it under its own header instead.
        if self._fs.isfile(self.metrics_file_path):
            with open(self.metrics_file_path, newline="") as f:
                self.metrics_keys = next(csv.reader(f), [])

    def save(self) -> None:
        """Append the rows logged since the last save; a new metric rewrites the file (atomically) under
        the wider header."""
        if not self.metrics:
            return
        path = Path(self.metrics_file_path)
        if self._record_new_keys() or not path.is_file():
            old = []
            if path.is_file():
                with path.open(newline="") as f:
                    old = list(csv.DictReader(f))
            _write(path, self.metrics_keys, old + self.metrics)
        else:
            with path.open("a", newline="") as f:
                csv.DictWriter(f, fieldnames=self.metrics_keys, lineterminator="\n").writerows(self.metrics)
        self.metrics = []


class ResumableCSVLogger(CSVLogger):
    """:class:`~pytorch_lightning.loggers.CSVLogger` that appends to an existing ``metrics.csv``."""

    def __init__(
        self,
        save_dir: str | Path,
        name: str | None = "lightning_logs",
        version: int | str | None = None,
        prefix: str = "",
        flush_logs_every_n_steps: int = 100,
    ):
        self.check_arguments(flush_logs_every_n_steps=flush_logs_every_n_steps)
        super().__init__(save_dir, name, version, prefix, flush_logs_every_n_steps)

    @staticmethod
    def check_arguments(flush_logs_every_n_steps: int = 100, **kwargs: Any) -> None:
        """The keys Lightning reads only once the run logs (a step count of 0 divides by zero), checked
        without building the logger (``noisydml.run.checks.library.check_built``)."""
        check_value(FLUSH_STEPS, flush_logs_every_n_steps)

    @property
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _AppendingWriter(log_dir=self.log_dir)
        return self._experiment
