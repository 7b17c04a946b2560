"""The papers' curves from our tables: one generic line plot (a metric against the column key, one line
per method, error bars the 95% t-interval of the mean over seeds) and, per column key, which metrics to
draw and which published figure each reproduces (``figure_spec``: the axes any sweep may vary, and each
paper's own axes and citations, :mod:`noisydml.report.papers`). Noise-rate plots also get the noisy /
topline ratio (Le & Odobez Figs. 1d-3d, 4) and vertical lines at the triplet-loss noise bound for each eta
asked for: Eq. 24's finite-K bound at the number of classes the runs trained on, Eq. 27's large-K one
when the runs do not say.

Runs that leave an ``embeddings.npz`` (see :mod:`noisydml.report.collect`) also get a 2-d scatter of
their test embeddings (Levi et al. Fig. 2; PCA when d > 2) and, when it lists image paths, a retrieval
grid (query and nearest neighbours; Yu et al. Fig. 7, Levi et al. Fig. 3).

Figures are drawn on matplotlib's object API with the Agg canvas, never through pyplot, so the report
changes no global backend and holds no figure open.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy import stats

from noisydml.noise.theory import finite_k_triplet_bound, triplet_noise_bound
from noisydml.report import papers
from noisydml.report.collect import COMPLETE, canonical
from noisydml.report.papers import Axis
from noisydml.report.tables import Table, is_percent, slug, topline_ratio
from noisydml.utils.run_directory import RunDir


@dataclass(frozen=True)
class FigureSpec:
    """What to draw when a table's columns are ``key``: the metrics, the x label, which published figure
    each metric's plot (and its noisy/topline ratio's) reproduces, and the extras of noise-rate plots."""

    metrics: tuple[str, ...]
    xlabel: str
    cites: dict[str, dict[str, str]] = field(default_factory=dict)
    ratio_cites: dict[str, dict[str, str]] = field(default_factory=dict)
    log2x: bool = False
    noise_axis: bool = False


NOISE_AXIS = "noise.rate"
# Keys any sweep may vary, whatever its paper: the metrics the evaluator logs; a paper plots the keys of
# its own method (Paper.axes).
AXES = {
    NOISE_AXIS: Axis(
        "label noise rate p",
        ("test/recall@1", "test/nmi", "test/knn_accuracy@3", "test/ncm_accuracy", "test/map"),
    ),
    "backbone.embedding_size": Axis("embedding size", ("test/recall@1",), log2x=True),
}
DEFAULT_METRICS = ("test/recall@1", "test/nmi")


def figure_spec(key: str) -> FigureSpec:
    """The plots of a table whose columns are ``key``; a metric a paper cites is drawn too."""
    axis = AXES.get(key) or papers.axis(key) or Axis(key, DEFAULT_METRICS)
    cites = papers.cites(key)
    return FigureSpec(
        metrics=(*axis.metrics, *(m for m in cites if m not in axis.metrics)),
        xlabel=axis.xlabel,
        cites=cites,
        ratio_cites=papers.cites(key, ratio=True),
        log2x=axis.log2x,
        noise_axis=key == NOISE_AXIS,
    )


METRIC_NAMES = {
    "test/recall@1": "Recall@1",
    "test/nmi": "NMI",
    "test/knn_accuracy@3": "3-NN accuracy",
    "test/ncm_accuracy": "nearest-class-mean accuracy",
    "test/map": "mAP",
}


@dataclass
class Series:
    """One line: a label, x positions, means and the half-widths of their 95% intervals (nan: no error
    bar), and how to draw it."""

    label: str
    x: list[float]
    mean: list[float]
    error: list[float]
    color: int = 0
    dashed: bool = False


def cite(cites: dict[str, dict[str, str]], metric: str, paper: str) -> str | None:
    """The published figure this plot reproduces: the group's paper's, else every paper's."""
    by_paper = cites.get(metric, {})
    if paper in by_paper:
        return by_paper[paper]
    return "; ".join(by_paper.values()) or None


def short_name(metric: str) -> str:
    """The evaluator's name of a metric, or the paper's of its diagnostic, else the metric itself."""
    if metric in METRIC_NAMES:
        return METRIC_NAMES[metric]
    return next((d.name for d in papers.diagnostics(lambda d: d.metric == metric and d.name)), metric)


def metric_name(metric: str) -> str:
    name = short_name(metric)
    return f"{name} (%)" if is_percent(metric) else name


def line_plot(
    series: Sequence[Series],
    path: Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    xticks: Sequence[str] | None = None,
    log2x: bool = False,
    vlines: Sequence[tuple[float, str]] = (),
    hline: float | None = None,
    dodge: float = 0.01,
) -> Path:
    """A line per series with 95% interval error bars; ``vlines`` are ``(x, label)`` reference lines.
    Series are shifted sideways by ``dodge`` x the x range each (linear axes) so their error bars do not
    hide one another."""
    fig = Figure(figsize=(7.0, 4.8), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    colors = [f"C{i}" for i in range(10)]
    xs = [x for s in series for x in s.x]
    step = 0.0 if log2x or not xs else dodge * ((max(xs) - min(xs)) or 1.0)
    for i, s in enumerate(series):
        error = [0.0 if math.isnan(v) else v for v in s.error]
        shift = step * (i - (len(series) - 1) / 2)
        ax.errorbar(
            [x + shift for x in s.x],
            s.mean,
            yerr=error if any(error) else None,
            label=s.label,
            color=colors[s.color % len(colors)],
            linestyle="--" if s.dashed else "-",
            marker="o",
            markersize=4,
            capsize=3,
        )
    for i, (x, label) in enumerate(vlines):
        ax.axvline(x, color="0.35", linestyle=(0, (1 + i, 2)), linewidth=1, label=label)
    if hline is not None:
        ax.axhline(hline, color="0.6", linewidth=0.8)
    if log2x:
        ax.set_xscale("log", base=2)
    if xticks is not None:
        ax.set_xticks(range(len(xticks)), xticks)
    elif log2x:
        xs = sorted({x for s in series for x in s.x})
        ax.set_xticks(xs, [f"{x:g}" for x in xs])
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


def _axis(table: Table) -> tuple[list[float], list[str] | None]:
    """x positions of the table's columns: the values themselves when numeric, else 0, 1, 2, ..."""
    numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in table.columns)
    if numeric:
        return [float(c) for c in table.columns], None
    return list(range(len(table.columns))), [str(c) for c in table.columns]


def _colors(table: Table) -> dict[frozenset, int]:
    """A noisy row and its topline share a colour."""
    colors: dict[frozenset, int] = {}
    for row in table.rows:
        colors.setdefault(row.partner_key, len(colors))
    return colors


def metric_series(table: Table, metric: str) -> list[Series]:
    xs, _ = _axis(table)
    colors = _colors(table)
    series = []
    for row in table.rows:
        points = []
        for x, column in zip(xs, table.columns, strict=True):
            cell = row.cells.get(canonical(column))
            if cell and cell.values(metric):
                points.append((x, cell.mean(metric), cell.ci95(metric)))
        if points:
            x, mean, error = (list(v) for v in zip(*points, strict=True))
            series.append(Series(row.label, x, mean, error, colors[row.partner_key], row.topline))
    if is_percent(metric):
        for s in series:
            s.mean = [v * 100 for v in s.mean]
            s.error = [v * 100 for v in s.error]
    return series


def ratio_series(table: Table, metric: str) -> list[Series]:
    xs, _ = _axis(table)
    colors = _colors(table)
    series = []
    for row in table.rows:
        partner = table.partner(row)
        if partner is None:
            continue
        points = []
        for x, column in zip(xs, table.columns, strict=True):
            mean, std, pairs = topline_ratio(row, partner, column, metric)
            if not math.isnan(mean):
                points.append((x, mean, _half_interval(std, pairs)))
        if points:
            x, mean, error = (list(v) for v in zip(*points, strict=True))
            series.append(Series(f"{row.label} / topline", x, mean, error, colors[row.partner_key]))
    return series


def _half_interval(std: float, n: int) -> float:
    """Half the 95% t-interval of a mean of ``n`` values with spread ``std`` (nan below two)."""
    if n < 2 or math.isnan(std):
        return math.nan
    return float(stats.t.ppf(0.975, n - 1)) * std / math.sqrt(n)


# How the figures' captions say what eta is (Le & Odobez Sec. 5.2).
ETA_MEANING = (
    "η: how much the miner favours hard negative pairs, which it weights η/K against 1/(ηK) for easy ones "
    "(positives 1)"
)


def num_classes(table: Table) -> int | None:
    """K of Le & Odobez's bound: the classes the table's runs trained on (results.json's noise summary),
    the most common when they differ; None when no run says."""
    counts = [
        int(r.noise["num_classes"]) for row in table.rows for r in row.runs if r.noise.get("num_classes")
    ]
    return max(set(counts), key=counts.count) if counts else None


def theory_lines(etas: Sequence[float], classes: int | None = None) -> list[tuple[float, str]]:
    """The triplet-loss noise bound for each eta: Eq. 24's at ``classes`` K (its eps(K) term kept), or
    Eq. 27's large-K limit when K is unknown."""
    if classes is None or classes < 2:
        return [
            (triplet_noise_bound(eta), f"Eq. 27 (large K), η={eta:g}: p<{triplet_noise_bound(eta):.2f}")
            for eta in etas
        ]
    return [
        (bound, f"Eq. 24 at K={classes}, η={eta:g}: p<{bound:.2f}")
        for eta in etas
        for bound in [finite_k_triplet_bound(eta, classes)]
    ]


def draw_table(table: Table, out: Path, etas: Sequence[float] = ()) -> list[tuple[Path, str]]:
    """Every figure the table supports, as ``(png, caption)``."""
    spec = figure_spec(table.column_key)
    present = set(table.metrics)
    xs, ticks = _axis(table)
    vlines = theory_lines(etas, num_classes(table)) if spec.noise_axis and ticks is None else []
    # The caption says what the bound's eta is; the legend has no room for it.
    meaning = f" Dotted lines: the triplet loss's noise bound; {ETA_MEANING}." if vlines else ""
    drawn = []
    base = f"{table.group.slug}__"
    for metric in [m for m in spec.metrics if m in present]:
        source = cite(spec.cites, metric, table.group.paper)
        title = f"{metric_name(metric)} vs {spec.xlabel}: {table.group.title}"
        if source:
            title += f"\nreproduces {source}"
        path = out / f"{base}{slug(metric)}_vs_{slug(table.column_key)}.png"
        series = metric_series(table, metric)
        if not series:
            continue
        line_plot(
            series,
            path,
            title=title,
            xlabel=spec.xlabel,
            ylabel=metric_name(metric),
            xticks=ticks,
            log2x=spec.log2x and ticks is None,
            vlines=vlines,
        )
        drawn.append((path, title.replace("\n", " ") + meaning))
        if spec.noise_axis and metric in spec.ratio_cites:
            ratios = ratio_series(table, metric)
            if ratios:
                name = short_name(metric)
                source = cite(spec.ratio_cites, metric, table.group.paper)
                title = f"noisy / topline {name}: {table.group.title}\nreproduces {source}"
                path = out / f"{base}ratio_{slug(metric)}_vs_{slug(table.column_key)}.png"
                line_plot(
                    ratios,
                    path,
                    title=title,
                    xlabel=spec.xlabel,
                    ylabel=f"{name} noisy / topline",
                    xticks=ticks,
                    vlines=vlines,
                    hline=1.0,
                )
                drawn.append((path, title.replace("\n", " ") + meaning))
    drawn += draw_embeddings(table, out)
    return drawn


def draw_embeddings(table: Table, out: Path) -> list[tuple[Path, str]]:
    """For each method and column value, the first complete run with an ``embeddings.npz``."""
    drawn = []
    for row in table.rows:
        for column in table.columns:
            cell = row.cells.get(canonical(column))
            runs = [
                r
                for r in (cell.runs if cell else [])
                if r.status == COMPLETE and RunDir(r.path).embeddings.is_file()
            ]
            if not runs:
                continue
            run = runs[0]
            data = np.load(RunDir(run.path).embeddings, allow_pickle=False)
            what = f"{row.label}, {table.column_key}={column}, seed {run.seed}"
            name = f"{table.group.slug}__{slug(row.label)}_{slug(str(column))}_seed{run.seed}"
            path = scatter_embeddings(
                data["embeddings"],
                data["labels"],
                out / f"{name}__embeddings.png",
                title=f"test embeddings: {what}\n(as Levi et al. Fig. 2)",
            )
            drawn.append((path, f"test embeddings: {what}"))
            if "paths" in data.files:
                path = retrieval_grid(
                    data["embeddings"],
                    data["labels"],
                    [_image_path(run.path, p) for p in data["paths"]],
                    out / f"{name}__retrieval.png",
                    title=f"nearest neighbours: {what} (as Yu et al. Fig. 7, Levi et al. Fig. 3)",
                )
                drawn.append((path, f"retrieval: {what}"))
    return drawn


def _image_path(run_dir: Path, text: Any) -> Path:
    path = Path(str(text))
    return path if path.is_absolute() else run_dir / path


def scatter_embeddings(embeddings: np.ndarray, labels: np.ndarray, path: Path, *, title: str) -> Path:
    """Test embeddings in 2-d, one colour per class; more than 2 dimensions are projected by PCA."""
    points = np.asarray(embeddings, dtype=float)
    xlabel, ylabel = "dim 1", "dim 2"
    if points.shape[1] > 2:
        centred = points - points.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        points = centred @ vt[:2].T
        xlabel, ylabel = "PC 1", "PC 2"
    fig = Figure(figsize=(6.0, 5.5), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    classes = np.unique(labels)
    for i, c in enumerate(classes):
        mask = labels == c
        ax.scatter(points[mask, 0], points[mask, 1], s=6, color=f"C{i % 10}", label=str(c), alpha=0.7)
    if len(classes) <= 20:
        ax.legend(title="class", fontsize=7, markerscale=2, loc="best")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


def retrieval_grid(
    embeddings: np.ndarray,
    labels: np.ndarray,
    images: Sequence[Path],
    path: Path,
    *,
    title: str,
    queries: int = 4,
    neighbours: int = 8,
    seed: int = 0,
) -> Path:
    """Random queries (first column) and their nearest test neighbours, framed green when the class
    matches the query's and red when not; an unreadable image shows as a grey tile."""
    from matplotlib.image import imread

    points = np.asarray(embeddings, dtype=float)
    chosen = np.random.default_rng(seed).choice(len(points), size=min(queries, len(points)), replace=False)
    fig = Figure(figsize=(1.2 * (neighbours + 1), 1.3 * len(chosen) + 0.7), dpi=100)
    FigureCanvasAgg(fig)
    # Fixed margins: a layout engine over this many axes costs more than the drawing.
    axes = fig.subplots(
        len(chosen),
        neighbours + 1,
        squeeze=False,
        gridspec_kw={
            "wspace": 0.08,
            "hspace": 0.25,
            "left": 0.02,
            "right": 0.98,
            "bottom": 0.03,
            "top": 0.86,
        },
    )
    for row, q in enumerate(chosen):
        distances = np.linalg.norm(points - points[q], axis=1)
        distances[q] = np.inf
        order = np.argsort(distances, kind="stable")[:neighbours]
        for col, index in enumerate([q, *order]):
            ax = axes[row][col]
            try:
                ax.imshow(imread(images[index]), cmap="gray")
            except (OSError, ValueError, SyntaxError):
                ax.imshow(np.full((8, 8), 0.8), cmap="gray", vmin=0, vmax=1)
            color = "black" if col == 0 else ("green" if labels[index] == labels[q] else "red")
            for spine in ax.spines.values():
                spine.set_edgecolor(color)
                spine.set_linewidth(3)
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title("query" if col == 0 else f"#{col}", fontsize=8)
    fig.suptitle(title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
