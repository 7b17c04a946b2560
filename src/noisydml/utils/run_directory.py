"""A run's directory: every artefact a run leaves, by name, and the record of how the run ended.

This module is the one place that names the files of a run; the trainer, the report and the resume
logic ask it for paths instead of spelling them. ``results.json`` is written last and atomically; its
``status`` says how the run ended:

- ``running``: written as the run starts, with ``resume``, the command that continues it: a run killed
  outright (SIGKILL, an out-of-memory kill, a node failure) still says what it was and how to go on;
- ``finished``: the test metrics are in it (runs before this field was renamed say ``complete``);
- ``failed``: ``error`` holds the message and ``traceback`` the file with the full traceback;
- ``interrupted``: stopped by a signal (preemption, ``scancel``, a time limit) with its checkpoint
  written; ``resume`` is the command that continues it;
- ``debug``, ``unselected``, ``stopped``, ``evaluated`` and ``diverged``: ran to its end but is not a
  result (a debug mode; a selection metric never produced; a clock ended it early; given weights scored;
  its weights blew up), ``reason`` says why; the metrics are kept, the report leaves the run out.

``started_at`` and ``ended_at`` (UTC, ISO 8601) are when this attempt at the run started and when it
stopped, however it stopped; a resumed run's are its last attempt's, as ``wall_time_s`` is.

Each record also holds the config group choices (``choices``: dataset, backbone, loss, miner, noise,
method) and the report labels (``report``), so a reader needs neither Hydra's files nor class names.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from noisydml.utils.atomic import atomic_write, write_json

RUNNING, FINISHED, FAILED, INTERRUPTED = "running", "finished", "failed", "interrupted"
# Ran to its end, but not a result (noisydml.run.selection): a debug mode, nothing selected, cut
# short by trainer.max_time, weights scored without training (noisydml-eval).
DEBUG, UNSELECTED, STOPPED, EVALUATED, DIVERGED = "debug", "unselected", "stopped", "evaluated", "diverged"
# The status of a finished run written before the statuses above existed.
LEGACY_FINISHED = "complete"
CHECKPOINTS, LAST, PREVIOUS, BEST = "checkpoints", "last.ckpt", "previous.ckpt", "best.ckpt"


def now() -> str:
    """The time as ``results.json`` records it: UTC, ISO 8601, to the millisecond."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class RunDir:
    """The files of the run in ``path``."""

    path: Path

    def resume_command(self, *more: str) -> str:
        """The command that continues this run, as a shell takes it (a folder name with spaces)."""
        return " ".join(["noisydml", shlex.quote(f"resume={self.path.resolve()}"), *more])

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    # Written by Hydra before the run starts.
    @property
    def hydra_dir(self) -> Path:
        return self.path / ".hydra"

    @property
    def config(self) -> Path:
        return self.hydra_dir / "config.yaml"

    @property
    def overrides(self) -> Path:
        return self.hydra_dir / "overrides.yaml"

    @property
    def hydra_config(self) -> Path:
        return self.hydra_dir / "hydra.yaml"

    # Written during and after training.
    @property
    def results(self) -> Path:
        return self.path / "results.json"

    @property
    def traceback(self) -> Path:
        return self.path / "error.log"

    @property
    def labels(self) -> Path:
        """``index,true,observed`` of every training sample the run trained on."""
        return self.path / "labels.csv"

    @property
    def unlabeled(self) -> Path:
        """The training samples whose labels were hidden (``data.unlabeled_fraction``), as ``labels``."""
        return self.path / "unlabeled.csv"

    @property
    def validation(self) -> Path:
        """The training samples held out for validation (``data.val_fraction``), as ``labels``."""
        return self.path / "validation.csv"

    @property
    def filtered(self) -> Path:
        """The training samples ``data.filter`` dropped before training, as ``labels``."""
        return self.path / "filtered.csv"

    @property
    def embeddings(self) -> Path:
        """The test embeddings (``callbacks=save_embeddings``), for the report's figures."""
        return self.path / "embeddings.npz"

    @property
    def csv_dir(self) -> Path:
        return self.path / "csv"

    @property
    def metrics_csv(self) -> Path:
        return self.csv_dir / "metrics.csv"

    @property
    def sample_weights(self) -> Path:
        """BSPML's final weight of each training sample."""
        return self.path / "sample_weights.csv"

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS

    @property
    def last_checkpoint(self) -> Path:
        return self.checkpoints / LAST

    @property
    def best_checkpoint(self) -> Path:
        """The weights selected on the validation split, which the test split is scored with."""
        return self.checkpoints / BEST

    @property
    def previous_checkpoint(self) -> Path:
        """The checkpoint ``last.ckpt`` replaced: what a run falls back to when the last one is corrupt."""
        return self.checkpoints / PREVIOUS

    @property
    def lock(self) -> Path:
        """Held by the process running in the folder (:mod:`noisydml.utils.run_lock`); gone after it."""
        return self.path / ".lock"

    @property
    def wandb_dir(self) -> Path:
        return self.path / "wandb"

    def drop_products(self) -> None:
        """Remove what an earlier run in this folder computed (its checkpoints, labels, embeddings, sample
        weights, traceback): a run started over here must not be read with another run's files beside its
        own, e.g. a ``filtered.csv`` of a filter it does not run."""
        files = (self.labels, self.unlabeled, self.validation, self.filtered, self.embeddings)
        files += (self.sample_weights, self.traceback)
        for product in (*files, self.last_checkpoint, self.best_checkpoint, self.previous_checkpoint):
            product.unlink(missing_ok=True)

    def own_names(self) -> set[str]:
        """The names a run writes straight into its folder (its files, and the folders of the others), with
        Hydra's log of the job (``train.log``): a folder holding none of them is no run's."""
        paths = (getattr(self, name) for name, value in vars(RunDir).items() if isinstance(value, property))
        return {"train.log"} | {path.relative_to(self.path).parts[0] for path in paths}

    def has_checkpoint(self) -> bool:
        """A checkpoint a run started here would continue from (``resume=auto``)."""
        return self.last_checkpoint.is_file() or self.previous_checkpoint.is_file()

    def wandb_id(self) -> str | None:
        """The id of the W&B run this directory already holds (``wandb/latest-run`` points at
        ``<mode>-run-<time>-<id>``), so a resumed run continues it; None before the first start."""
        latest = self.wandb_dir / "latest-run"
        if not latest.is_symlink() and not latest.is_dir():
            return None
        return latest.resolve().name.rsplit("-", 1)[-1]

    def read_results(self) -> dict | None:
        """``results.json``, or None when there is none or it is not a run's record (:meth:`damage`)."""
        try:
            results = json.loads(self.results.read_text())
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        return results if isinstance(results, dict) else None

    def damage(self) -> str | None:
        """Why ``results.json`` is not a run's record (cut short by a copy or a full disk, not JSON, not a
        mapping with a status), as a phrase after its path; None when it is one, or when there is none."""
        try:
            text = self.results.read_text()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as error:
            return f"cannot be read ({getattr(error, 'strerror', None) or error})"
        try:
            results = json.loads(text)
        except json.JSONDecodeError as error:
            return f"is cut short or not JSON ({error.msg} at line {error.lineno}, column {error.colno})"
        if not isinstance(results, dict) or "status" not in results:
            shown = text.strip()[:40] or "nothing"
            return f"holds {shown}, not a run's record (a mapping with a status)"
        return None

    def finished_results(self) -> dict | None:
        """``results.json`` of a finished run, else None; a run recorded finished without test metrics is
        no result (a run that is skipped as done must have something to show)."""
        results = self.read_results()
        if results is None or results.get("status") not in (FINISHED, LEGACY_FINISHED):
            return None
        metrics = results.get("metrics")
        return results if isinstance(metrics, dict) and metrics else None

    def write_results(self, status: str, **fields: Any) -> Path:
        """Write ``results.json`` atomically with ``status`` and ``fields``; a run that stopped (any status
        but running) gets ``ended_at``, now, unless ``fields`` give it."""
        if status != RUNNING:
            fields.setdefault("ended_at", now())
        write_json(self.results, {"status": status, **fields})
        return self.results

    def write_traceback(self, text: str) -> Path:
        with atomic_write(self.traceback) as f:
            f.write(text)
        return self.traceback


def is_run(path: Path) -> bool:
    """``path`` holds a run: its record (``results.json``) or Hydra's (``.hydra/overrides.yaml``)."""
    run = RunDir(path)
    return run.results.is_file() or run.overrides.is_file()


def checkpoint_run(checkpoint: Path) -> Path | None:
    """The run folder that wrote ``checkpoint`` (``<run>/checkpoints/<name>.ckpt``, beside the run's
    overrides); None for a checkpoint in no run folder, whose training config is unknown."""
    checkpoint = Path(checkpoint)
    run = checkpoint.parent.parent
    return run if checkpoint.parent.name == CHECKPOINTS and RunDir(run).overrides.is_file() else None


def run_holding(path: Path) -> Path | None:
    """The run folder ``path`` is, or lies in; None outside every run."""
    path = Path(path).expanduser().resolve()
    return next((folder for folder in (path, *path.parents) if is_run(folder)), None)
