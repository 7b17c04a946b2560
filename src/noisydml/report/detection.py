"""Noise-detection curves: per epoch, how well a method that scores or selects samples finds the labels
the project flipped (which the papers could only guess). PRISM logs the ROC AUC of its class-centre
score and the precision and recall of the samples it drops; BSPML the ROC AUC of its sample weights.

One figure per group of runs and metric: a line per method and noise setting, the mean over seeds.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from noisydml.report.collect import COMPLETE, Run
from noisydml.report.tables import Group, slug
from noisydml.rundir import RunDir

DETECTION_METRICS = {
    "train/prism_auc": "ROC AUC of PRISM's score at finding flipped labels",
    "train/flipped_auc": "ROC AUC of BSPML's weights at finding flipped labels",
    "train/prism_precision": "precision of PRISM's dropped samples (flipped / dropped)",
    "train/prism_recall": "recall of PRISM's dropped samples (dropped / flipped)",
}


def epoch_series(run: Run) -> dict[str, dict[int, float]]:
    """``metric -> {epoch: value}`` of the detection metrics in a run's ``csv/metrics.csv``."""
    path = RunDir(run.path).metrics_csv
    series: dict[str, dict[int, float]] = defaultdict(dict)
    if not path.is_file():
        return series
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            for metric in DETECTION_METRICS:
                if row.get(metric) and row.get("epoch"):
                    series[metric][int(float(row["epoch"]))] = float(row[metric])
    return series


def label(run: Run) -> str:
    """The run's method and noise setting, as a curve's legend."""
    method = run.choices.get("method") or run.choices.get("loss") or "run"
    noise = run.choices.get("noise", "")
    rate = run.overrides.get("noise.rate", (run.config.get("noise") or {}).get("rate", ""))
    return f"{method}, {noise} {rate}".strip()


def draw_detection(groups: list[Group], out: Path) -> list[tuple[Path, str]]:
    """A figure per group and detection metric that any of its complete runs logged."""
    figures = []
    for group in groups:
        curves: dict[str, dict[str, dict[int, list[float]]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(list))
        )
        for run in group.runs:
            if run.status != COMPLETE or run.path is None:
                continue
            for metric, values in epoch_series(run).items():
                for epoch, value in values.items():
                    curves[metric][label(run)][epoch].append(value)
        for metric, lines in sorted(curves.items()):
            path = out / f"{group.slug}_{slug(metric)}.png"
            caption = f"{group.title}: {DETECTION_METRICS[metric]}, per epoch (mean over seeds)"
            _plot(lines, path, DETECTION_METRICS[metric], caption)
            figures.append((path, caption))
    return figures


def _plot(lines: dict[str, dict[int, list[float]]], path: Path, ylabel: str, title: str) -> None:
    figure = Figure(figsize=(7, 4.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for name, by_epoch in sorted(lines.items()):
        epochs = sorted(by_epoch)
        axes.plot(epochs, [np.mean(by_epoch[e]) for e in epochs], marker="o", label=name)
    axes.set_xlabel("epoch")
    axes.set_ylabel(ylabel, fontsize=8)
    axes.set_title(title, fontsize=8)
    axes.legend(fontsize=6)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
