"""``runs.csv``: a reproduction's finished runs as rows, from which its committed verdicts are drawn.

One row per finished run (:data:`FIELDS`): what it ran (experiment, method and its label, data set, noise
model and rate, seed), on which data (``split_hash``, ``label_hash``), how (numerics mode, CPU capability,
commit, library versions), what it selected (``selected_epoch``, ``last_epoch``, ``test_best_epoch``), its
wall time, then every metric the report reads (``test/``, ``test_last/``, ``test_best_epoch/``, the
detection scores logged at the last epoch: a column each, blank where the run logged none), and last the
record the report's rules read (the run's overrides, group choices, resolved config and noise summary, as
JSON), so that :func:`runs_of` gives back the same :class:`Run` records the run folders give.

:func:`rows_from_folders` is the one reader of run folders; everything published (claims.csv,
comparisons.csv, detection.csv, :func:`draw_verdicts`) and the comparison of a new method with the board
(:mod:`noisydml.report.against`) read rows. Only finished runs are rows: a failed or missing job is in the
report's ``jobs.csv``.

The hashes (sha256, the first 16 hex digits) are over little-endian int64 arrays in the order of the
sample index: ``label_hash`` over the index and the observed (noisy) label of every training sample drawn
(``labels.csv``, ``validation.csv``, ``unlabeled.csv`` and ``filtered.csv`` together, so that every method
of a setting and seed shares it, a filter's dropped samples and hidden labels included), ``split_hash``
over the index, the true label and whether it was held out for validation: the data set's training split
as this run split it. Blank where the run left no ``labels.csv``.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from noisydml.report import claims as claims_module
from noisydml.report import comparisons, selection_bias
from noisydml.report.collect import COMPLETE, collect, parse_overrides
from noisydml.report.detection import detection_rows, write_detection_csv
from noisydml.report.records import Run, lookup
from noisydml.report.statistics import T, interval_kind
from noisydml.report.tables import dataset_of, figure_of, group_runs
from noisydml.utils.run_directory import RunDir

RUNS, RUNS_GZ = "runs.csv", "runs.csv.gz"
# Past this size a reproduction commits runs.csv.gz: the JSON records repeat from row to row.
COMPRESS_ABOVE = 1 << 20
IDENTITY = (
    "experiment",
    "figure",
    "dataset",
    "method",
    "method_label",
    "noise",
    "noise_rate",
    "seed",
    "split_hash",
    "label_hash",
    "numerics",
    "cpu_capability",
    "cpu",
    "commit",
    "versions",
    "selected_epoch",
    "last_epoch",
    "test_best_epoch",
    "wall_s",
)
# The record the report's rules read, last: they are long.
RECORD = ("overrides", "choices", "config", "noise_summary")
HASH_DIGITS = 16


def rows_from_folders(paths: list[Path]) -> list[dict[str, str]]:
    """A row per finished run under ``paths`` (sweep or run folders), in the order the report reads them."""
    return rows_of(collect([Path(p) for p in paths]))


def rows_of(runs: list[Run]) -> list[dict[str, str]]:
    """The rows of the finished runs among ``runs`` (read from their folders)."""
    return [row_of(run) for run in runs if run.status == COMPLETE]


def row_of(run: Run) -> dict[str, str]:
    """A finished run's row: its identity columns, its metrics, its record."""
    results = (RunDir(run.path).read_results() if run.path is not None else None) or {}
    numerics = results.get("numerics") or {}
    versions = dict(results.get("versions") or {})
    commit = versions.pop("git_commit", "")
    selection = results.get("selection") or {}
    split, labels = hashes(run.path) if run.path is not None else ("", "")
    identity = {
        "experiment": _text(run.choice("experiment")),
        "figure": figure_of(run),
        "dataset": dataset_of(run),
        "method": _text(run.choice("method")),
        "method_label": _text(lookup(run.config, "report.method")),
        "noise": _text(run.choice("noise")),
        "noise_rate": _text(run.value("noise.rate")),
        "seed": _text(run.seed),
        "split_hash": split,
        "label_hash": labels,
        "numerics": _text(numerics.get("mode")),
        "cpu_capability": _text(numerics.get("aten_cpu_capability")),
        "cpu": _text(numerics.get("cpu")),
        "commit": commit,
        "versions": json.dumps(versions, sort_keys=True) if versions else "",
        "selected_epoch": _text(selection.get("epoch")),
        "last_epoch": _text(selection.get("last_epoch")),
        "test_best_epoch": _text(selection.get("test_best_epoch")),
        "wall_s": _text(results.get("wall_time_s")),
    }
    record = {
        "overrides": _json(_override_lines(run)),
        "choices": _json(run.choices),
        "config": _json(run.config),
        "noise_summary": _json(run.noise),
    }
    return {**identity, **{name: repr(float(v)) for name, v in run.metrics.items()}, **record}


def _override_lines(run: Run) -> list[str]:
    """The run's command-line overrides as Hydra wrote them, which :func:`runs_of` parses again."""
    path = RunDir(run.path).overrides if run.path is not None else None
    if path is not None and path.is_file():
        import yaml

        return [str(line) for line in yaml.safe_load(path.read_text()) or []]
    return [f"{key}={value}" for key, value in run.overrides.items()]


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _json(value: Any) -> str:
    # Key order kept: the report reads the config as the run wrote it.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def hashes(run_dir: Path) -> tuple[str, str]:
    """``(split_hash, label_hash)`` of a run folder's label files; blank when it has no labels.csv."""
    run = RunDir(run_dir)
    if not run.labels.is_file():
        return "", ""
    parts = []
    for path in (run.labels, run.validation, run.unlabeled, run.filtered):
        if path.is_file():
            table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2).reshape(-1, 3)
            held = np.full(len(table), path == run.validation, dtype=np.int64)
            parts.append(np.column_stack([table, held]))
    found = np.concatenate(parts)
    found = found[np.argsort(found[:, 0], kind="stable")]
    index, true, observed, held = (np.ascontiguousarray(found[:, i], dtype="<i8") for i in range(4))
    return _digest(index, true, held), _digest(index, observed)


def _digest(*arrays: np.ndarray) -> str:
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(array.tobytes())
    return digest.hexdigest()[:HASH_DIGITS]


def fields(rows: list[dict[str, str]]) -> list[str]:
    """runs.csv's columns: the identity, every metric any row has (sorted), the record."""
    metrics = sorted({name for row in rows for name in row} - set(IDENTITY) - set(RECORD))
    return [*IDENTITY, *metrics, *RECORD]


def write_runs(rows: list[dict[str, str]], folder: Path) -> Path:
    """``folder/runs.csv``, or ``runs.csv.gz`` past ``COMPRESS_ABOVE`` bytes (byte for byte the same file
    for the same rows: no time or name in the gzip header); the other is removed."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=fields(rows), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    data = text.getvalue().encode()
    folder = Path(folder)
    plain, packed = folder / RUNS, folder / RUNS_GZ
    if len(data) > COMPRESS_ABOVE:
        packed.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
        plain.unlink(missing_ok=True)
        return packed
    plain.write_bytes(data)
    packed.unlink(missing_ok=True)
    return plain


def runs_file(folder: Path) -> Path | None:
    """The runs.csv (or runs.csv.gz) of a results folder, or None."""
    return next((path for path in (Path(folder) / RUNS, Path(folder) / RUNS_GZ) if path.is_file()), None)


def read_runs(path: Path) -> list[dict[str, str]]:
    """The rows of a runs.csv or runs.csv.gz (a folder: the one it holds)."""
    path = Path(path)
    if path.is_dir():
        found = runs_file(path)
        if found is None:
            raise FileNotFoundError(
                f"{path} has no {RUNS} or {RUNS_GZ}; give a results/<reproduction> folder"
            )
        path = found
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return list(csv.DictReader(io.StringIO(data.decode())))


def runs_of(rows: list[dict[str, str]]) -> list[Run]:
    """The report's records of the rows: finished runs, as :func:`collect` reads them from their folders
    (no folder: the figures that need the run's files, its embeddings or per-epoch curves, leave them out)."""
    return [run_of(row) for row in rows]


def run_of(row: dict[str, str]) -> Run:
    metrics = {
        name: float(value)
        for name, value in row.items()
        if name not in IDENTITY and name not in RECORD and value not in ("", None)
    }
    return Run(
        None,
        COMPLETE,
        parse_overrides(json.loads(row["overrides"])),
        json.loads(row["config"]),
        json.loads(row["choices"]),
        metrics,
        noise=json.loads(row["noise_summary"]),
    )


@dataclass
class Verdicts:
    """What the runs decide: the papers' claims, each method against its baselines (a comparison of
    methods), what selecting on the test split inflates, and how well each method finds the flips."""

    claims: list[claims_module.Verdict]
    against_baselines: list[comparisons.Comparison]
    inflations: list[selection_bias.Inflation]
    detected: list[dict]


def draw_verdicts(runs: list[Run], directory: Path, interval: str = T) -> Verdicts:
    """Judge ``runs`` and write what a reproduction commits into ``directory``: claims.csv,
    comparisons.csv and detection.csv (where the runs have any), test_selection.csv; the same files
    whether the runs came from their folders or from runs.csv."""
    groups = group_runs(runs)
    verdicts = claims_module.evaluate(groups, interval=interval)
    with interval_kind(interval):
        against_baselines = comparisons.compare_baselines(groups)
        inflations = selection_bias.inflations(groups)
    detected = detection_rows(groups)
    directory = Path(directory)
    claims_module.write_claims_csv(verdicts, directory / "claims.csv")
    for name, found, write in (
        ("comparisons.csv", against_baselines, comparisons.write_csv),
        ("test_selection.csv", inflations, selection_bias.write_csv),
        ("detection.csv", detected, write_detection_csv),
    ):
        if found:
            write(found, directory / name)
        else:
            (directory / name).unlink(missing_ok=True)
    return Verdicts(verdicts, against_baselines, inflations, detected)
