"""Runs into an MLflow tracking store, from their own files: ``results.json`` (choices, final metrics, status)
and ``csv/metrics.csv`` (the per-epoch history), which every run writes whatever its loggers, so runs that
never logged to MLflow, old ones included, are shown alike.

Each directory given becomes an MLflow experiment (a sweep is one), each run below it a row: its flat choice
keys (:mod:`noisydml.loggers.run_fields`) as params, its test and validation metrics as metrics, its
per-epoch validation scores as curves against the epoch (counted from 1, as the epoch lines are).
"""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from noisydml.loggers.mlflow_names import mlflow_key
from noisydml.loggers.run_fields import choice_keys, method_label, run_name, summary_fields
from noisydml.utils.run_directory import RunDir

RESULTS = "results.json"
HISTORY = Path("csv") / "metrics.csv"
# MLflow takes at most this many metrics in one log_batch call.
BATCH = 1000
# Scored once, on the selected (test/) or last (test_last/) checkpoint: results.json holds them, and a
# history row of them is the same values again.
FINAL_PREFIXES = ("test/", "test_last/")


@dataclass(frozen=True)
class Imported:
    experiment_id: str
    name: str
    run_ids: tuple[str, ...]

    def paths(self) -> dict[str, str]:
        """The UI's pages of this experiment: the runs table (sort, filter, pick columns with Columns), and
        every run side by side with all its choices and metrics (MLflow 3 opens the table with the param and
        metric columns hidden until chosen)."""
        runs = quote(json.dumps(list(self.run_ids), separators=(",", ":")))
        experiments = quote(json.dumps([self.experiment_id]))
        return {
            "runs": f"/#/experiments/{self.experiment_id}/runs",
            "compare": f"/#/compare-runs?runs={runs}&experiments={experiments}",
        }


def find_runs(folder: Path) -> Iterator[Path]:
    """The run directories at or below ``folder`` (each holds a ``results.json``), in name order."""
    if (folder / RESULTS).is_file():
        yield folder
        return
    for results in sorted(folder.rglob(RESULTS)):
        yield results.parent


def import_folder(client: MlflowClient, folder: Path) -> Imported:
    """One MLflow experiment named for ``folder``, one run per run directory below it."""
    folder = folder.resolve()
    runs = []
    for run_dir in find_runs(folder):
        if (damage := RunDir(run_dir).damage()) is not None:
            # One damaged record (a copy cut short) leaves the others to show.
            print(f"skipped {run_dir}: its {RESULTS} {damage}", file=sys.stderr)
        else:
            runs.append(run_dir)
    if not runs:
        raise FileNotFoundError(
            f"{folder}: no run directory there (none holds a readable {RESULTS}); give a run or sweep folder "
            "a noisydml command printed, e.g. outputs/sweeps/default/<time>"
        )
    name = f"{folder.parent.name}/{folder.name}"
    # The kind that opens on the runs table (MLflow 3 opens others on its GenAI traces overview).
    tags = {"noisydml.folder": str(folder), "mlflow.experimentKind": "custom_model_development"}
    experiment_id = client.create_experiment(name, tags=tags)
    run_ids = tuple(import_run(client, experiment_id, run_dir) for run_dir in runs)
    return Imported(experiment_id, name, run_ids)


def import_run(client: MlflowClient, experiment_id: str, run_dir: Path) -> str:
    """One run directory as an MLflow run; returns its id."""
    results = json.loads((run_dir / RESULTS).read_text())
    config, choices = results.get("config") or {}, results.get("choices") or {}
    overrides = _overrides(run_dir)
    default_name = str(config.get("name") or run_dir.name)
    started = int((run_dir / RESULTS).stat().st_mtime * 1000)
    run = client.create_run(
        experiment_id,
        start_time=started,
        run_name=run_name(overrides, default_name) if overrides is not None else run_dir.name,
        tags={
            "status": results.get("status", "unknown"),
            "run_dir": str(run_dir),
            "method": method_label(config, choices),
        },
    )
    run_id = run.info.run_id
    params = [
        Param(key, str(value)) for key, value in choice_keys(config, choices).items() if value is not None
    ]
    params.append(Param("name", default_name))
    metrics = [Metric(mlflow_key(key), value, started, step) for key, value, step in _history(run_dir)]
    last_step = max((m.step for m in metrics), default=0)
    final = {key: value for key, value in (results.get("metrics") or {}).items() if _is_number(value)}
    for key, value in final.items():
        # The validation scores of the selected epoch, beside the per-epoch curve of the same metric.
        name = f"selected_{key}" if key.startswith("val/") else key
        metrics.append(Metric(mlflow_key(name), float(value), started, last_step))
    summary = summary_fields(
        results.get("status", "unknown"),
        results.get("selection"),
        results.get("noise"),
        results.get("wall_time_s"),
    )
    metrics += [Metric(key, float(value), started, 0) for key, value in summary.items() if _is_number(value)]
    client.log_batch(run_id, params=params)
    for start in range(0, len(metrics), BATCH):
        client.log_batch(run_id, metrics=metrics[start : start + BATCH])
    client.log_batch(run_id, tags=[RunTag("mlflow.note.content", _note(run_dir, results))])
    ended = int(time.time() * 1000)
    client.set_terminated(run_id, _mlflow_status(results.get("status")), end_time=ended)
    return run_id


def _history(run_dir: Path) -> Iterator[tuple[str, float, int]]:
    """(metric, value, epoch counted from 1) for each value of the run's CSV history but the final test."""
    path = run_dir / HISTORY
    if not path.is_file():
        return
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if not row.get("epoch"):
                continue
            epoch = int(float(row["epoch"])) + 1
            for key, value in row.items():
                if key in ("epoch", "step") or value in ("", None) or key.startswith(FINAL_PREFIXES):
                    continue
                yield key, float(value), epoch


def _overrides(run_dir: Path) -> list[str] | None:
    path = run_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return None
    import yaml

    return [str(o) for o in yaml.safe_load(path.read_text()) or []]


def _note(run_dir: Path, results: dict) -> str:
    lines = [f"Run directory: `{run_dir}`", f"Status: {results.get('status', 'unknown')}"]
    if results.get("error"):
        lines.append(f"Error: {results['error']}")
    return "\n\n".join(lines)


def _mlflow_status(status: str | None) -> str:
    return {"finished": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}.get(status or "", "RUNNING")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
