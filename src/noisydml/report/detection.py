"""Noise-detection curves: per epoch, how well a method that scores or selects samples finds the labels
the project flipped (which the papers could only guess). Each paper names what its method logs
(``Paper.diagnostics`` with a ``detection`` panel: PRISM the ROC AUC of its class-centre score and the
precision and recall of the samples it drops, BSPML the ROC AUC of its sample weights); the references for
all: a run's per-sample training loss (``noisydml.callbacks.loss_detection``), its ROC AUC and the
precision and recall of its highest losses at the true flip rate, and the kNN label vote
(``noisydml.callbacks.knn_detection``), the same numbers of the vote on each epoch's embedding and on the
features the run starts from.

One figure per group of runs (a comparison across papers: per data set) and measure (ROC AUC, precision,
recall): a line per method, noise setting and score, the mean over seeds, so each method's detection is
drawn beside the references'. The vote on the starting features is the same for every method trained on
the same noisy labels: it is one line per noise setting, ``reference: ...``, the mean over seeds.

The same numbers at the last epoch go in ``detection.csv`` and a table per data set and noise model in the
report (:func:`detection_rows`): per noise setting first the kNN vote on the inputs (how hard the noise is
to see without training: issue 36's measure of a benchmark's difficulty), then each method's detectors.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from noisydml.report import papers
from noisydml.report.collect import (
    COMPLETE,
    KNN_DIAGNOSTICS,
    KNN_START,
    LOSS_DIAGNOSTICS,
    REFERENCE_METRICS,
    Run,
)
from noisydml.report.comparisons import SETTING_FIELDS, is_comparison
from noisydml.report.pairing import by_seed
from noisydml.report.plots import save_figure
from noisydml.report.tables import Group, csv_number, md_cell, pivot
from noisydml.utils.run_directory import RunDir

# A panel per measure, every method's curve and the references' side by side.
PANELS = {
    "auc": "ROC AUC at finding flipped labels",
    "precision": "precision at finding flipped labels (flipped / flagged)",
    "recall": "recall at finding flipped labels (flagged / flipped)",
}


def detection_metrics() -> dict[str, tuple[str, str]]:
    """Each detection metric (the papers' methods', then the per-sample loss's and the kNN label vote's):
    the panel it is drawn in and the score it measures."""
    found = [*papers.diagnostics(lambda d: d.detection is not None), *LOSS_DIAGNOSTICS, *KNN_DIAGNOSTICS]
    return {d.metric: d.detection for d in found if d.detection is not None}


# detection.csv's columns: a row per noise setting and detector (the vote on the inputs once per setting,
# as METHOD_INPUTS, then each method's scores), the last epoch's values, the means over seeds.
FIELDS = (
    *SETTING_FIELDS,
    "method",
    "score",
    "auc",
    "precision",
    "recall",
    "n_seeds",
)
METHOD_INPUTS = "kNN label vote on the inputs (no training)"


def detection_rows(groups: list[Group]) -> list[dict]:
    """``detection.csv``'s rows for the groups of a comparison across papers: per data set, noise model and
    rate, the kNN label vote on the features the runs start from (every method's runs log the same, one
    value a seed), then each method's detection scores (its paper's, the per-sample loss's and the vote on
    its embedding) at the last epoch logged, each the mean over the seeds that logged it."""
    metrics = detection_metrics()
    names = detector_names(metrics)
    found = []
    for group in filter(is_comparison, groups):
        table = pivot(group, "noise.rate")
        for column in table.columns:
            for noise in sorted({str(row.choice("noise") or "") for row in table.rows}):
                rows = [row for row in table.rows if str(row.choice("noise") or "") == noise]
                setting = {
                    "figure": group.figure,
                    "dataset": group.dataset,
                    "noise": noise,
                    "noise_rate": column,
                }
                inputs: dict[str, dict[str, float]] = defaultdict(dict)
                methods: list[dict] = []
                for row in rows:
                    # detector -> panel -> seed -> value
                    by_detector: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
                    for metric, (panel, _) in metrics.items():
                        values = by_seed(row, column, metric)
                        if not values:
                            continue
                        if metric in REFERENCE_METRICS:
                            for seed, value in values.items():
                                inputs[panel].setdefault(seed, value)
                        else:
                            by_detector[_detector(metric)][panel] = values
                    methods += [
                        {**setting, "method": row.method, "score": names[detector], **_means(values)}
                        for detector, values in sorted(by_detector.items())
                    ]
                if inputs:
                    found.append({**setting, "method": METHOD_INPUTS, "score": KNN_START, **_means(inputs)})
                found += methods
    return found


def _detector(metric: str) -> str:
    """The detector a metric measures: ``train/loss_auc`` and ``train/loss_recall`` are the loss's."""
    return metric.rsplit("_", 1)[0]


def detector_names(metrics: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Each detector's name: the score its ROC AUC names (``per-sample loss``), else its first metric's."""
    names: dict[str, str] = {}
    for metric, (panel, score) in metrics.items():
        if panel == "auc" or _detector(metric) not in names:
            names[_detector(metric)] = score
    return names


def _means(by_panel: dict[str, dict[str, float]]) -> dict:
    """Each panel's mean over seeds (nan where none logged it) and how many seeds logged any."""
    means = {
        panel: float(np.mean(list(by_panel[panel].values()))) if panel in by_panel else math.nan
        for panel in PANELS
    }
    return {**means, "n_seeds": len({seed for values in by_panel.values() for seed in values})}


def write_detection_csv(rows: list[dict], path: Path) -> Path:
    """``detection.csv``: :func:`detection_rows`, numbers as fractions."""
    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: csv_number(v) if k in PANELS else v for k, v in row.items()})
    return Path(path)


def detection_markdown(rows: list[dict]) -> str:
    """The report's section: a table per data set and noise model, a column per rate, the vote on the
    inputs first, then each method's detectors, the ROC AUC at the last epoch (mean over seeds)."""
    if not rows:
        return ""
    out = [
        "## Finding the flipped labels\n",
        "ROC AUC at finding the flipped labels, the mean over seeds at the last epoch logged; first the kNN "
        "label vote on the inputs, which needs no training: where it is near 1 the noise is easy to see and "
        "a filter on it is hard to beat, where it is near 0.5 only a learned embedding can find the flips.\n",
    ]
    tables: dict[tuple[str, str], dict[tuple[str, str], dict[str, float]]] = defaultdict(dict)
    rates: dict[tuple[str, str], list] = defaultdict(list)
    for row in rows:
        key = (row["dataset"], row["noise"])
        if row["noise_rate"] not in rates[key]:
            rates[key].append(row["noise_rate"])
        tables[key].setdefault((row["method"], row["score"]), {})[str(row["noise_rate"])] = row["auc"]
    for key, cells in tables.items():
        columns = rates[key]
        out += [
            f"### {key[0]}, {key[1]} noise\n",
            "| detector | score | " + " | ".join(f"rate {c}" for c in columns) + " |",
            "|---|---|" + "---|" * len(columns),
        ]
        for (method, score), values in cells.items():
            numbers = [_auc(values.get(str(c), math.nan)) for c in columns]
            out.append(f"| {md_cell(method)} | {md_cell(score)} | " + " | ".join(numbers) + " |")
        out.append("")
    return "\n".join(out) + "\n"


def _auc(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def epoch_series(run: Run, metrics: dict[str, tuple[str, str]] | None = None) -> dict[str, dict[int, float]]:
    """``metric -> {epoch: value}`` of the detection metrics (unset: ``detection_metrics()``) in a run's
    ``csv/metrics.csv``."""
    metrics = detection_metrics() if metrics is None else metrics
    path = RunDir(run.path).metrics_csv
    series: dict[str, dict[int, float]] = defaultdict(dict)
    if not path.is_file():
        return series
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            for metric in metrics:
                if row.get(metric) and row.get("epoch"):
                    series[metric][int(float(row["epoch"]))] = float(row[metric])
    return series


def label(run: Run) -> tuple[str, str]:
    """The run's noise setting (a figure's panel) and method (a curve's legend)."""
    method = run.choices.get("method") or run.choices.get("loss") or "run"
    noise = run.choices.get("noise", "")
    rate = run.overrides.get("noise.rate", (run.config.get("noise") or {}).get("rate", ""))
    return f"{noise} {rate}".strip(), method


def draw_detection(groups: list[Group], out: Path) -> list[tuple[Path, str]]:
    """A figure per group and measure (AUC, precision, recall) that any of its complete runs logged: a
    panel per noise setting, a curve per method and score in it. The groups of a comparison across papers
    (one per noise model, conf/experiment/noisy_dml/) are drawn together per data set, every noise setting
    of the data set side by side."""
    figures = []
    metrics = detection_metrics()
    for group in _per_dataset(groups):
        # measure -> noise setting -> "method: score" -> epoch -> values over seeds
        curves: dict[str, dict[str, dict[str, dict[int, list[float]]]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        )
        # The method-free references: (panel, setting, name) -> epoch -> seed -> value, one value a seed.
        shared: dict[tuple[str, str, str], dict[int, dict]] = defaultdict(lambda: defaultdict(dict))
        scores: dict[str, set[str]] = defaultdict(set)
        for run in group.runs:
            if run.status != COMPLETE or run.path is None:
                continue
            setting, method = label(run)
            for metric, values in epoch_series(run, metrics).items():
                panel, score = metrics[metric]
                scores[panel].add(score)
                for epoch, value in values.items():
                    if metric in REFERENCE_METRICS:
                        shared[(panel, setting, f"reference: {score}")][epoch][str(run.seed)] = value
                    else:
                        curves[panel][setting][f"{method}: {score}"][epoch].append(value)
        for (panel, setting, name), by_epoch in shared.items():
            for epoch, seeds in by_epoch.items():
                curves[panel][setting][name][epoch] = list(seeds.values())
        for panel, settings in sorted(curves.items()):
            path = out / f"{group.slug}_detection_{panel}.png"
            caption = (
                f"{group.title}: {PANELS[panel]}, of {', '.join(sorted(scores[panel]))}, per epoch "
                "(mean over seeds), a panel per noise setting"
            )
            _plot(settings, path, PANELS[panel])
            figures.append((path, caption))
    return figures


def _per_dataset(groups: list[Group]) -> list[Group]:
    """The groups, those of a comparison across papers merged into one per data set."""
    merged: dict[tuple[str, str], Group] = {}
    for group in groups:
        if is_comparison(group):
            key = (group.paper, group.dataset)
            merged.setdefault(key, Group(group.paper, group.dataset, [])).runs.extend(group.runs)
        else:
            merged[(group.figure, group.dataset)] = group
    return list(merged.values())


def _plot(settings: dict[str, dict[str, dict[int, list[float]]]], path: Path, ylabel: str) -> None:
    """A panel per noise setting side by side; one legend, outside, for the curves of every panel (the
    CPU comparison draws some 30 methods, which a legend inside a panel would cover)."""
    names = sorted({name for lines in settings.values() for name in lines})
    colours = {name: f"C{i % 10}" for i, name in enumerate(names)}
    styles = {name: ("-", "--", ":", "-.")[(i // 10) % 4] for i, name in enumerate(names)}
    width = 3.2 * len(settings)
    figure = Figure(figsize=(width + 3.5, max(3.5, 0.16 * len(names) + 1)))
    FigureCanvasAgg(figure)
    axes_row = figure.subplots(1, len(settings), sharey=True, squeeze=False)[0]
    for axes, (setting, lines) in zip(axes_row, sorted(settings.items()), strict=True):
        for name, by_epoch in sorted(lines.items()):
            epochs = sorted(by_epoch)
            means = [np.mean(by_epoch[e]) for e in epochs]
            axes.plot(epochs, means, marker=".", color=colours[name], linestyle=styles[name], label=name)
        axes.set_title(setting or "noise", fontsize=8)
        axes.set_xlabel("epoch", fontsize=8)
        axes.tick_params(labelsize=7)
    axes_row[0].set_ylabel(ylabel, fontsize=8)
    handles, labels = [], []
    for axes in axes_row:
        for handle, name in zip(*axes.get_legend_handles_labels(), strict=True):
            if name not in labels:
                handles.append(handle)
                labels.append(name)
    figure.legend(handles, labels, loc="center left", bbox_to_anchor=(width / (width + 3.5), 0.5), fontsize=6)
    figure.subplots_adjust(left=0.06 * 10 / (width + 3.5), right=width / (width + 3.5) - 0.01, wspace=0.08)
    save_figure(figure, path)
