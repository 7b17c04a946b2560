"""Runs into an MLflow tracking store, from their own files: ``results.json`` (choices, final metrics, status)
and ``csv/metrics.csv`` (the per-epoch history), which every run writes whatever its loggers, so runs that
never logged to MLflow, old ones included, are shown alike.

Each directory given becomes an MLflow experiment (a sweep is one), each run below it a row: its flat choice
keys (:mod:`noisydml.loggers.run_fields`) and its overrides as params, its test and selected validation
metrics as metrics, its per-epoch validation scores as curves against the epoch (counted from 1, as the epoch
lines are), its start and end as ``results.json`` recorded them. A run is named by the overrides that differ
between the folder's runs (``noise.rate=0.4 miner=fixed_semihard``, not the ones every run shares). The runs
table opens on a saved view (MLflow's shared view state, an experiment tag): a column per param that
varies, and the optimized metric on the test split and on the selected epoch, best first.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from noisydml.loggers.mlflow_names import mlflow_key
from noisydml.loggers.run_fields import UNNAMED_PREFIXES, choice_keys, run_name, summary_fields
from noisydml.utils.method_names import method_label
from noisydml.utils.metric_names import SELECTED, selected, with_selected_names
from noisydml.utils.run_directory import (
    DEBUG,
    EVALUATED,
    FINISHED,
    INTERRUPTED,
    LEGACY_FINISHED,
    RUNNING,
    STOPPED,
    UNSELECTED,
    RunDir,
)

RESULTS = "results.json"
HISTORY = Path("csv") / "metrics.csv"
# MLflow takes at most this many metrics in one log_batch call.
BATCH = 1000
# Scored once, on the selected (test/) or last (test_last/) checkpoint, or the selected epoch's validation
# scores: results.json holds them, and a history row of them is the same values again.
FINAL_PREFIXES = ("test/", "test_last/", SELECTED)
# MLflow's experiment tag of a saved view, and the URL parameter that opens the runs table on it.
VIEW_TAG, VIEW_PARAMETER = "mlflow.sharedViewState.", "viewStateShareKey"
# Overrides already params under a choice key's name.
ALIASES = {"noise.rate": "noise_rate"}
DEFAULT_METRIC = "val/recall@1"
RUN_NAME = "attributes.`Run Name`"


@dataclass(frozen=True)
class Imported:
    experiment_id: str
    name: str
    run_ids: tuple[str, ...]
    view: str

    def paths(self) -> dict[str, str]:
        """The UI's pages of this experiment: the runs table on its saved view (the varied params and the
        optimized metric; sort, filter, pick more columns with Columns), and every run side by side with all
        its choices and metrics, its plot on the optimized metric."""
        runs = quote(json.dumps(list(self.run_ids), separators=(",", ":")))
        experiments = quote(json.dumps([self.experiment_id]))
        return {
            "runs": f"/#/experiments/{self.experiment_id}/runs?{VIEW_PARAMETER}={self.view}",
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
            runs.append(_read(run_dir))
    if not runs:
        raise FileNotFoundError(
            f"{folder}: no run directory there (none holds a readable {RESULTS}); give a run or sweep folder "
            "a noisydml command printed, e.g. outputs/sweeps/default/<time>"
        )
    name = f"{folder.parent.name}/{folder.name}"
    # The kind that opens on the runs table (MLflow 3 opens others on its GenAI traces overview).
    tags = {"noisydml.folder": str(folder), "mlflow.experimentKind": "custom_model_development"}
    experiment_id = client.create_experiment(name, tags=tags)
    shared = _shared_overrides([run.overrides for run in runs])
    metric, mode = _optimized_metric(runs)
    run_ids = tuple(import_run(client, experiment_id, run, shared, metric) for run in runs)
    view, state = _view(_varied_params(runs), metric, mode)
    client.set_experiment_tag(experiment_id, VIEW_TAG + view, state)
    return Imported(experiment_id, name, run_ids, view)


@dataclass(frozen=True)
class _Run:
    """A run directory's files as the store reads them."""

    path: Path
    results: dict
    overrides: list[str] | None

    @property
    def params(self) -> dict[str, str]:
        """Its flat choice keys, then each override's key not among them, as MLflow params (strings)."""
        config, choices = self.results.get("config") or {}, self.results.get("choices") or {}
        params = {key: str(value) for key, value in choice_keys(config, choices).items() if value is not None}
        for override in self.overrides or []:
            key, equals, value = override.lstrip("+~").partition("=")
            key = ALIASES.get(key, key)
            if equals and key not in params and not key.startswith(UNNAMED_PREFIXES):
                params[key] = value
        return params


def _read(run_dir: Path) -> _Run:
    return _Run(run_dir, json.loads((run_dir / RESULTS).read_text()), _overrides(run_dir))


def import_run(
    client: MlflowClient, experiment_id: str, run: _Run, shared: frozenset[str], metric: str
) -> str:
    """One run directory as an MLflow run, named by its overrides but the ``shared`` ones, the test split's
    ``metric`` logged first (MLflow's compare page plots the first metric); returns its id."""
    results, run_dir = run.results, run.path
    config, choices = results.get("config") or {}, results.get("choices") or {}
    default_name = str(config.get("name") or run_dir.name)
    started, ended = _times(run_dir, results)
    own = None if run.overrides is None else [o for o in run.overrides if o not in shared]
    created = client.create_run(
        experiment_id,
        start_time=started,
        run_name=run_dir.name if own is None else run_name(own, default_name),
        tags={
            "status": results.get("status", "unknown"),
            "run_dir": str(run_dir),
            "method": method_label(config, choices),
        },
    )
    run_id = created.info.run_id
    params = [Param(key, value) for key, value in run.params.items()]
    params.append(Param("name", default_name))
    history = [Metric(mlflow_key(key), value, started, step) for key, value, step in _history(run_dir)]
    last_step = max((m.step for m in history), default=0)
    final = with_selected_names(results.get("metrics") or {})
    final = {key: float(value) for key, value in final.items() if _is_number(value)}
    first = _test_name(metric)
    metrics = [
        Metric(mlflow_key(key), value, ended, last_step) for key, value in final.items() if key == first
    ]
    metrics += [Metric(mlflow_key(k), v, ended, last_step) for k, v in final.items() if k != first]
    summary = summary_fields(
        results.get("status", "unknown"),
        results.get("selection"),
        results.get("noise"),
        results.get("wall_time_s"),
    )
    metrics += [Metric(key, float(value), ended, 0) for key, value in summary.items() if _is_number(value)]
    metrics += history
    client.log_batch(run_id, params=params)
    # The first in a call of its own: MLflow lists a run's metrics in the order they were first stored.
    for start, end in [(0, 1), *((i, i + BATCH) for i in range(1, len(metrics), BATCH))]:
        if metrics[start:end]:
            client.log_batch(run_id, metrics=metrics[start:end])
    client.log_batch(run_id, tags=[RunTag("mlflow.note.content", _note(run_dir, results))])
    client.set_terminated(run_id, _mlflow_status(results.get("status")), end_time=ended)
    return run_id


def _times(run_dir: Path, results: dict) -> tuple[int, int]:
    """The run's start and end in milliseconds, as ``results.json`` recorded them; for a record written
    before it did, the end is the file's last change and the start ``wall_time_s`` before it."""
    ended = _milliseconds(results.get("ended_at"))
    if ended is None:
        ended = int((run_dir / RESULTS).stat().st_mtime * 1000)
    started = _milliseconds(results.get("started_at"))
    if started is None:
        wall = results.get("wall_time_s")
        started = ended - int(1000 * wall) if _is_number(wall) else ended
    return started, ended


def _milliseconds(stamp: object) -> int | None:
    try:
        return int(datetime.fromisoformat(str(stamp)).timestamp() * 1000) if stamp else None
    except ValueError:
        return None


def _shared_overrides(overrides: list[list[str] | None]) -> frozenset[str]:
    """The overrides every run of a folder of several has: they say nothing about which run is which."""
    known = [set(o) for o in overrides if o is not None]
    if len(overrides) < 2 or len(known) < len(overrides):
        return frozenset()
    return frozenset(set.intersection(*known))


def _varied_params(runs: list[_Run]) -> list[str]:
    """The params whose value differs between the runs, in the order first met; the method and the noise
    rate when none does (a single run)."""
    values: dict[str, set[str | None]] = {}
    for run in runs:
        params = run.params
        for key in [*values, *(key for key in params if key not in values)]:
            values.setdefault(key, set()).add(params.get(key))
    varied = [key for key, seen in values.items() if len(seen) > 1]
    return varied or ["method", "noise_rate"]


def _optimized_metric(runs: list[_Run]) -> tuple[str, str]:
    """The metric the runs selected their epoch on (``optimized_metric``) and whether higher (``max``) or
    lower is better, the first run's that names one."""
    for run in runs:
        metric = (run.results.get("config") or {}).get("optimized_metric")
        if metric:
            return str(metric), str((run.results.get("selection") or {}).get("mode") or "max")
    return DEFAULT_METRIC, "max"


def _test_name(metric: str) -> str:
    """The test split's score of the selection metric: ``val/recall@1`` -> ``test/recall@1``."""
    return "test/" + metric.split("/", 1)[-1]


def _view(varied: list[str], metric: str, mode: str) -> tuple[str, str]:
    """A saved view of the runs table: a column per varied param, then the optimized metric on the test
    split and on the selected epoch, sorted best first (``mode``: max or min); its key and its value,
    MLflow's view state."""
    test, chosen = (f"metrics.`{mlflow_key(name)}`" for name in (_test_name(metric), selected(metric)))
    params = [f"params.`{key}`" for key in varied]
    state = {
        "selectedColumns": [*params, test, chosen],
        # The ids of MLflow's columns; the answer first, where a narrow window still shows it.
        "columnOrder": [RUN_NAME, "duration", test, chosen, *params],
        "columnWidths": {RUN_NAME: 280, test: 150, chosen: 190, **dict.fromkeys(params, 150)},
        "orderByKey": test,
        "orderByAsc": mode == "min",
        "runsHiddenMode": "SHOW_ALL",
    }
    value = json.dumps(state, separators=(",", ":"))
    return hashlib.sha256(value.encode()).hexdigest()[:16], value


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
    """The MLflow status of a run whose ``results.json`` records ``status``: RUNNING only for a run recorded
    running, KILLED for one interrupted, FAILED for one that failed or diverged, FINISHED for every other
    that ran to its end (a debug, evaluated, stopped or unselected run too: its ``status`` tag and note say
    it is no result). A status this version does not know is FAILED, its tag saying which."""
    if status in (FINISHED, LEGACY_FINISHED, DEBUG, UNSELECTED, STOPPED, EVALUATED):
        return "FINISHED"
    return {RUNNING: "RUNNING", INTERRUPTED: "KILLED"}.get(status or "", "FAILED")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
