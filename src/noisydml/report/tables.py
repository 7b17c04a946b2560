"""Runs grouped into tables: rows are methods, columns the key the sweep varies, cells mean +- the half
width of its 95% confidence interval.

Runs are grouped by ``report.figure`` (else ``name``) and data set. Within a group, the column key is the
override that varies from run to run, preferring the axes the papers plot (``COLUMN_KEYS``); the rows
are the remaining override combinations (seed dropped), labelled by ``report.method``, else by the label
of the published method whose groups the runs chose (``loss=triplet miner=fixed_semihard`` is "Triplet +
fixed semi-hard", :func:`noisydml.utils.method_names.published_label`), else ``<loss> + <miner>`` from Hydra's
choices; a topline run's row says ``(topline)``. The interval is Student's t over a cell's complete
runs, t(0.975, n - 1) * std / sqrt(n) with the sample std (ddof = 1); blank for one run. cells.csv keeps
the std beside it.
"""

from __future__ import annotations

import csv
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from noisydml.report.collect import COMPLETE, FAILED, MISSING, NO_RESULT, Run, canonical, lookup, signature
from noisydml.report.published import Published, find_published
from noisydml.report.records import Group
from noisydml.utils.method_names import published_label

# The axes the papers plot against, in the order preferred when a sweep varies more than one.
COLUMN_KEYS = ("noise.rate", "loss.match_weight", "backbone.embedding_size", "loss.age_max", "loss.mu")
# Config groups that make a run a different method (its row), never a column.
ROW_GROUPS = (
    "method",
    "loss",
    "miner",
    "noise",
    "backbone",
    "dataset",
    "experiment",
    "optimizer",
    "scheduler",
)
# Shown x 100 with two decimals, as the papers print them: these scores of the test split (or of the
# training images) at any checkpoint, the one a paper's number is set beside included.
PERCENT_NAMES = ("recall@", "nmi", "map", "ncm_accuracy", "knn_accuracy")
PERCENT_STAGES = ("test", "test_last", "test_best_epoch", "test_train", "test_last_train")


@dataclass
class Cell:
    """The runs of one method at one column value, whatever their status."""

    runs: list[Run] = field(default_factory=list)

    def values(self, metric: str) -> list[float]:
        """The metric of each seed's complete run (:meth:`per_seed`)."""
        return list(self.per_seed(metric).values())

    def per_seed(self, metric: str) -> dict[str, float]:
        """The metric of each seed's complete run, keyed by canonical seed. A seed run twice (the same job
        in two folders given to the report) counts once where both computed the same; with different results
        (another commit, numerics mode or machine) it is refused naming both: a seed is one run, and their
        mean would be a run that never happened."""
        by_seed: dict[str, list[Run]] = defaultdict(list)
        for run in self.runs:
            if run.status == COMPLETE and metric in run.metrics:
                by_seed[canonical(run.seed)].append(run)
        for runs in by_seed.values():
            if len({run.metrics[metric] for run in runs}) > 1:
                shown = "; ".join(f"{run.path}: {run.metrics[metric]:.6g}" for run in runs[:3])
                raise ValueError(
                    f"seed {runs[0].seed} ran {len(runs)} times with different {metric} ({shown}): a seed is "
                    "one run; give the report the folders of one of them"
                )
        return {seed: float(runs[0].metrics[metric]) for seed, runs in by_seed.items()}

    def mean(self, metric: str) -> float:
        values = self.values(metric)
        return float(np.mean(values)) if values else math.nan

    def std(self, metric: str) -> float:
        values = self.values(metric)
        return float(np.std(values, ddof=1)) if len(values) > 1 else math.nan

    def ci95(self, metric: str) -> float:
        """Half the width of the mean's 95% t-interval over the seeds."""
        values = self.values(metric)
        if len(values) < 2:
            return math.nan
        return float(stats.t.ppf(0.975, len(values) - 1)) * self.std(metric) / math.sqrt(len(values))

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.runs)

    def value_of(self, key: str) -> Any:
        """A config value the cell's runs share, from a run that has its own config when there is one."""
        own = [r for r in self.runs if r.has_config] or self.runs
        return own[0].value(key)


@dataclass
class Row:
    """One method: its runs by column value. ``signature`` is its overrides without the column and
    seed; ``method`` the method's label, ``label`` the same with whatever tells rows of one method apart
    (``(topline)``, an override)."""

    label: str
    runs: list[Run]
    cells: dict[str, Cell]
    signature: frozenset = frozenset()
    method: str = ""

    def _first(self) -> Run:
        return next((r for r in self.runs if r.has_config), self.runs[0])

    def choice(self, group: str) -> Any:
        return self._first().choice(group)

    @property
    def topline(self) -> bool:
        return self._first().topline

    @property
    def partner_key(self) -> frozenset:
        """Equal for a noisy row and its topline: the overrides without the noise model and the column."""
        return frozenset(item for item in self.signature if item[0] != "noise")


@dataclass
class Table:
    group: Group
    column_key: str
    columns: list[Any]
    rows: list[Row]

    @property
    def metrics(self) -> list[str]:
        """The metrics the runs logged; Recall@1 when none finished, so the missing ones still show."""
        found = {m for r in self.group.runs for m in r.metrics}
        # The name breaks metric_order's ties (val/x and test_best_epoch/x): a set's order changes with
        # Python's hash seed, and the report must not.
        return sorted(found, key=lambda m: (metric_order(m), m)) or ["test/recall@1"]

    def partner(self, row: Row) -> Row | None:
        """The topline row of a noisy row (same method, noise=topline), or None."""
        return next(
            (r for r in self.rows if r.topline and not row.topline and r.partner_key == row.partner_key), None
        )


def metric_order(metric: str) -> tuple:
    stage, _, name = metric.partition("/")
    k = re.match(r"recall@(\d+)$", name)
    rank = (0, int(k.group(1))) if k else (1, 0)
    return (stage != "test", rank, name)


def is_percent(metric: str) -> bool:
    stage, _, name = metric.partition("/")
    return stage in PERCENT_STAGES and name.startswith(PERCENT_NAMES)


def group_runs(runs: list[Run]) -> list[Group]:
    """Runs grouped by experiment and data set, in the order first seen."""
    groups: dict[tuple[str, str], Group] = {}
    for run in runs:
        key = (figure_of(run), dataset_of(run))
        groups.setdefault(key, Group(*key, runs=[])).runs.append(run)
    return list(groups.values())


def figure_of(run: Run) -> str:
    return str(lookup(run.config, "report.figure") or run.config.get("name") or "runs")


def dataset_of(run: Run) -> str:
    """``report.dataset`` (a label the published table uses, e.g. mnist_even_odd), else the data set."""
    label = lookup(run.config, "report.dataset") if run.has_config else None
    if label:
        return str(label)
    if "dataset" in run.overrides:
        return str(run.overrides["dataset"])
    return str(lookup(run.config, "dataset.name") or run.choice("dataset") or "unknown")


def choose_column_key(runs: list[Run]) -> str:
    """The override that varies across the runs, the papers' axes first; ``noise.rate`` when none does.

    Another key is a column only when every run overrides it: one that a few runs set (a method's own
    setting, e.g. ``data.unlabeled_fraction`` of the semi-supervised loss) belongs to their row."""
    keys = {k for r in runs for k in r.overrides}
    varying = [
        k
        for k in keys
        if k != "seed"
        and k not in ROW_GROUPS
        and not k.startswith(("hydra.", "report."))
        and (k in COLUMN_KEYS or all(k in r.overrides for r in runs))
        and len({canonical(r.value(k)) for r in runs}) > 1
    ]
    ranked = sorted(
        varying, key=lambda k: (COLUMN_KEYS.index(k) if k in COLUMN_KEYS else len(COLUMN_KEYS), k)
    )
    return ranked[0] if ranked else "noise.rate"


def pivot(group: Group, column_key: str | None = None) -> Table:
    """The group's runs as methods x values of ``column_key`` (chosen by ``choose_column_key`` if None)."""
    column_key = column_key or choose_column_key(group.runs)
    by_row: dict[frozenset, list[Run]] = defaultdict(list)
    for run in group.runs:
        by_row[signature(run.overrides, drop=(column_key, "seed"))].append(run)
    rows = []
    columns: dict[str, Any] = {}
    for sig, runs in by_row.items():
        cells: dict[str, Cell] = defaultdict(Cell)
        for run in runs:
            value = run.value(column_key)
            columns.setdefault(canonical(value), value)
            cells[canonical(value)].runs.append(run)
        rows.append(Row(label="", runs=runs, cells=dict(cells), signature=sig))
    _label_rows(rows)
    rows.sort(key=lambda r: (r.method.casefold(), r.topline, r.label))
    ordered = sorted(columns.values(), key=_column_order)
    return Table(group, column_key, ordered, rows)


def _column_order(value: Any) -> tuple:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, canonical(value))


def _label_rows(rows: list[Row]) -> None:
    for row in rows:
        row.method = _method_label(row)
        row.label = f"{row.method} (topline)" if row.topline else row.method
    by_label: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_label[row.label].append(row)
    for same in by_label.values():
        if len(same) < 2:
            continue
        # Rows that share a method label differ in some override: name it.
        keys = sorted({k for r in same for k, _ in r.signature})
        differing = [k for k in keys if len({dict(r.signature).get(k) for r in same}) > 1]
        for row in same:
            # As given (data.seed=7, not the signature's 7.0): the row's runs share each value.
            values = row.runs[0].overrides
            extra = ", ".join(f"{k}={_typed(values[k]) if k in values else 'default'}" for k in differing)
            if extra:
                row.label = f"{row.label} | {extra}"


def _typed(value: Any) -> str:
    """An override's value as a user types it: ``true``, ``[1,10]``, ``7``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_typed(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_typed(v)}" for k, v in value.items()) + "}"
    return "null" if value is None else str(value)


def _method_label(row: Row) -> str:
    own = [r for r in row.runs if r.has_config]
    method = next((lookup(r.config, "report.method") for r in own if lookup(r.config, "report.method")), None)
    if method is None and not own:
        # A job that never ran has the sweep's base config (with its method file's label when it
        # overrides method=): wrong when it overrides the loss or miner alone.
        run = row.runs[0]
        if not any(g in run.overrides for g in ("loss", "miner")):
            method = lookup(run.config, "report.method")
    if method is None:
        loss, miner = row.choice("loss"), row.choice("miner")
        if loss is not None or miner is not None:
            choices = {**row._first().choices, "loss": loss, "miner": miner}
            method = published_label(choices) or f"{loss or '?'} + {miner or '?'}"
        else:
            method = str(row.choice("method") or "default")
    return str(method)


def cell_published(
    table: Table, row: Row, cell: Cell, metric: str, published: list[Published]
) -> Published | None:
    if row.topline:
        return None
    return find_published(
        published,
        paper=table.group.paper,
        dataset=table.group.dataset,
        method=row.method,
        metric=metric,
        value_of=cell.value_of,
    )


def format_number(value: float, metric: str) -> str:
    if math.isnan(value):
        return "-"
    return f"{value * 100:.2f}" if is_percent(metric) else f"{value:.4f}"


def format_cell(cell: Cell, metric: str, pub: Published | None) -> str:
    """``mean ± 95% CI (n=…)``, the paper's number and our delta beside it, and which runs failed, are no
    result or are missing."""
    total = len(cell.runs)
    values = cell.values(metric)
    parts = []
    if values:
        half = cell.ci95(metric)
        spread = f" ± {format_number(half, metric)}" if not math.isnan(half) else ""
        parts.append(f"{format_number(cell.mean(metric), metric)}{spread} (n={len(values)})")
    if pub is not None:
        text = f"paper {format_number(pub.value, metric)}"
        if values:
            delta = cell.mean(metric) - pub.value
            text += f", Δ {'+' if delta >= 0 else '−'}{format_number(abs(delta), metric)}"
        parts.append(text)
    for status in (FAILED, NO_RESULT, MISSING):
        if cell.count(status):
            parts.append(f"{status} {cell.count(status)}/{total}")
    complete = [run for run in cell.runs if run.status == COMPLETE]
    complete_without = sum(metric not in run.metrics for run in complete)
    if complete_without:
        parts.append(f"not logged {complete_without}/{total}")
    # A seed's job reached in two folders, with the same result (per_seed), counted once.
    if repeated := len(complete) - complete_without - len(values):
        parts.append(f"repeated {repeated}/{total}")
    return "; ".join(parts) or "-"


def md_cell(text: str) -> str:
    """Text for a Markdown table cell: a ``|`` inside would end the cell."""
    return str(text).replace("|", "\\|")


def column_label(table: Table, value: Any) -> str:
    return f"{table.column_key}={value}"


def run_counts(runs: list[Run]) -> str:
    """``4 runs (4 complete, 0 failed, 0 no result, 0 missing)``."""
    counts = ", ".join(
        f"{sum(r.status == s for r in runs)} {s}" for s in (COMPLETE, FAILED, NO_RESULT, MISSING)
    )
    return f"{len(runs)} runs ({counts})"


# What each stage's scores are, for the line that says which checkpoint a paper's numbers sit beside.
CHECKPOINTS = {
    "test": "the selected checkpoint, the last epoch without a validation split",
    "test_last": "the last epoch",
    "test_best_epoch": "the best test epoch",
    "test_train": "the training images, scored with test/'s weights, the last epoch's without a validation "
    "split",
}


def _has_published(table: Table, metric: str, published: list[Published]) -> bool:
    return any(
        cell_published(table, row, cell, metric, published) is not None
        for row in table.rows
        for cell in row.cells.values()
    )


def _weights(stage: str) -> str:
    """The stage whose weights scored ``stage``: the training images are scored with the tested ones."""
    return stage.removesuffix("_train")


def checkpoint_note(table: Table, metric: str, published: list[Published]) -> str:
    """Which checkpoint the paper's numbers are set beside: this table's, when the published rows name its
    metric (the paper's checkpoint, :mod:`noisydml.report.published`), or the table of the same score at
    the paper's checkpoint; ``""`` when the paper prints no number of this score. Where the paper's other
    numbers from these runs sit beside other weights, the note says so: a paper that scored one model for
    both (Levi et al.'s Tables 3 and 4) is set beside two of ours."""
    stage, _, name = metric.partition("/")
    if _has_published(table, metric, published):
        note = f"The paper's numbers beside its checkpoint: {CHECKPOINTS.get(stage, stage)} ({stage}/)."
        others = dict.fromkeys(
            where
            for other in table.metrics
            if _weights(where := other.partition("/")[0]) != _weights(stage)
            and _has_published(table, other, published)
        )
        if others:
            beside = "; ".join(f"{where}/ at {CHECKPOINTS.get(_weights(where), where)}" for where in others)
            note += f" The paper's other numbers from these runs sit beside other weights: {beside}."
        return note
    for other in table.metrics:
        if other != metric and other.partition("/")[2] == name and _has_published(table, other, published):
            where = other.partition("/")[0]
            return (
                f"The paper's numbers are beside {other}, its checkpoint ({CHECKPOINTS.get(where, where)})."
            )
    return ""


def metric_tables(
    table: Table, published: list[Published], metrics: list[str] | None = None, level: int = 3
) -> str:
    """One Markdown table per metric (only ``metrics`` when given), each under a heading of ``level``."""
    out = []
    for metric in [m for m in table.metrics if metrics is None or m in metrics]:
        unit = " (%)" if is_percent(metric) else ""
        out.append(f"{'#' * level} {metric}{unit}\n")
        note = checkpoint_note(table, metric, published)
        if note:
            out.append(f"{note}\n")
        out.append("| method | " + " | ".join(md_cell(column_label(table, c)) for c in table.columns) + " |")
        out.append("|---" * (len(table.columns) + 1) + "|")
        for row in table.rows:
            cells = []
            for column in table.columns:
                cell = row.cells.get(canonical(column))
                cells.append(
                    format_cell(cell, metric, cell_published(table, row, cell, metric, published))
                    if cell
                    else ""
                )
            out.append("| " + " | ".join(md_cell(text) for text in [row.label, *cells]) + " |")
        out.append("")
    return "\n".join(out)


CELL_FIELDS = (
    "figure",
    "dataset",
    "metric",
    "method",
    "column_key",
    "column_value",
    "n",
    "mean",
    "std",
    "ci95",
    "runs",
    "complete",
    "failed",
    "no_result",
    "missing",
    "published",
    "published_std",
    "delta",
    "published_source",
)


def write_cells_csv(tables: list[Table], published: list[Published], path: Path) -> Path:
    """One line per group x metric x method x column value, numbers as fractions, as the runs log them."""
    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CELL_FIELDS, lineterminator="\n")
        writer.writeheader()
        for table in tables:
            for metric in table.metrics:
                for row in table.rows:
                    for column in table.columns:
                        cell = row.cells.get(canonical(column))
                        if cell is None:
                            continue
                        pub = cell_published(table, row, cell, metric, published)
                        mean = cell.mean(metric)
                        writer.writerow(
                            {
                                "figure": table.group.figure,
                                "dataset": table.group.dataset,
                                "metric": metric,
                                "method": row.label,
                                "column_key": table.column_key,
                                "column_value": column,
                                "n": len(cell.values(metric)),
                                "mean": csv_number(mean),
                                "std": csv_number(cell.std(metric)),
                                "ci95": csv_number(cell.ci95(metric)),
                                "runs": len(cell.runs),
                                "complete": cell.count(COMPLETE),
                                "failed": cell.count(FAILED),
                                "no_result": cell.count(NO_RESULT),
                                "missing": cell.count(MISSING),
                                "published": csv_number(pub.value if pub else math.nan),
                                "published_std": csv_number(
                                    pub.std if pub and pub.std is not None else math.nan
                                ),
                                "delta": csv_number(mean - pub.value if pub else math.nan),
                                "published_source": pub.citation if pub else "",
                            }
                        )
    return Path(path)


def csv_number(value: float) -> str:
    """A number for a CSV cell: blank for nan (no value), else at full precision."""
    return "" if math.isnan(value) else repr(round(value, 10))


def write_jobs_csv(tables: list[Table], path: Path) -> Path:
    """Every run: its status, directory and overrides, so a missing or failed job can be found and re-run,
    and why a failed one failed or a no-result one is none."""
    with Path(path).open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["figure", "dataset", "method", "status", "seed", "path", "overrides", "error"])
        for table in tables:
            for row in table.rows:
                for run in row.runs:
                    overrides = " ".join(f"{k}={v}" for k, v in run.overrides.items())
                    writer.writerow(
                        [
                            table.group.figure,
                            table.group.dataset,
                            row.label,
                            run.status,
                            run.seed,
                            run.path or "",
                            overrides,
                            run.error,
                        ]
                    )
    return Path(path)


def topline_ratios(row: Row, topline: Row, column: Any, metric: str) -> dict[str, float]:
    """Noisy / topline per seed at one column value (Le & Odobez Fig. 1d): a seed pairs a noisy run with its
    topline (same seed, same kept-or-flipped draw). Empty when no seed has both."""
    noisy, top = row.cells.get(canonical(column)), topline.cells.get(canonical(column))
    if noisy is None or top is None:
        return {}
    a, b = noisy.per_seed(metric), top.per_seed(metric)
    return {s: a[s] / b[s] for s in a if s in b and b[s] != 0}


def topline_ratio(row: Row, topline: Row, column: Any, metric: str) -> tuple[float, float, int]:
    """``(mean, std, pairs)`` of noisy / topline at one column value, averaged over the paired seeds
    (``topline_ratios``). With no seed in common it is the ratio of the means (no std, 0 pairs); nan
    when either side has no complete run.
    """
    ratios = list(topline_ratios(row, topline, column, metric).values())
    if ratios:
        std = float(np.std(ratios, ddof=1)) if len(ratios) > 1 else math.nan
        return float(np.mean(ratios)), std, len(ratios)
    noisy, top = row.cells.get(canonical(column)), topline.cells.get(canonical(column))
    if noisy is None or top is None:
        return math.nan, math.nan, 0
    a, b = noisy.per_seed(metric), top.per_seed(metric)
    if a and b and np.mean(list(b.values())) != 0:
        return float(np.mean(list(a.values())) / np.mean(list(b.values()))), math.nan, 0
    return math.nan, math.nan, 0
