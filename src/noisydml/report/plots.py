"""The curves of our tables: one generic line plot (a metric against the column key, one line per
method, each point's run count n in the legend or beside it, error bars the 95% t-interval of the mean
where n > 1) and, per column key, which metrics to draw (``figure_spec``: the axes any sweep may vary, and
each paper's own axes, :mod:`noisydml.report.papers`). A figure's title says what its runs swept
(``swept``); only the runs of a paper's experiment (the ``experiment=`` they recorded) are titled
with the published figure they reproduce. Noise-rate plots also get the noisy / topline ratio (Le &
Odobez Figs. 1d-3d, 4) and, where asked for (an experiment of a paper that draws them, or
``noisydml-report --eta``), vertical lines at the triplet-loss noise bound for each eta: Eq. 24's
finite-K bound at the number of classes the runs trained on, Eq. 27's large-K one when the runs do not
say.

Runs that leave an ``embeddings.npz`` (see :mod:`noisydml.report.collect`) also get a 2-d scatter of
their test embeddings (Levi et al. Fig. 2; PCA when d > 2) and, when it lists image paths, a retrieval
grid (query and nearest neighbours; Yu et al. Fig. 7, Levi et al. Fig. 3).

Figures are drawn on matplotlib's object API with the Agg canvas, never through pyplot, so the report
changes no global backend and holds no figure open; each is written as a PNG and, for papers, an SVG
beside it (``save_figure``).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy import stats

from noisydml.noise.theory import finite_k_triplet_bound, triplet_noise_bound
from noisydml.report import papers
from noisydml.report.calculator import DEFAULT_ETAS
from noisydml.report.collect import COMPLETE, canonical
from noisydml.report.papers import Axis
from noisydml.report.records import slug
from noisydml.report.tables import ROW_GROUPS, Row, Table, is_percent, topline_ratio
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


PNG_DPI = 150
# Characters of a line plot's title per line, at its 7-inch width and 10-point type.
TITLE_WIDTH = 90


def points_caption(unit: str = "runs") -> str:
    """What a line plot's caption says of its points and error bars; ``unit``: what n counts."""
    return (
        f"Points: the mean over seeds of n {unit} each (n in the legend, or beside each point where it "
        "differs); error bars: the 95% t-interval of that mean where n > 1; a hollow point has n = 1 and no "
        "interval."
    )


@dataclass
class Series:
    """One line: a label, x positions, means, the half-widths of their 95% intervals (nan: no error
    bar) and the runs (or seed pairs) each point averages, and how to draw it."""

    label: str
    x: list[float]
    mean: list[float]
    error: list[float]
    n: list[int]
    color: int = 0
    dashed: bool = False

    @property
    def legend(self) -> str:
        """The label with its points' n: one value, or their range (each point then carries its own)."""
        low, high = min(self.n), max(self.n)
        return f"{self.label} (n={low})" if low == high else f"{self.label} (n={low}–{high})"


def save_figure(figure: Figure, path: Path) -> Path:
    """``path`` as a PNG at ``PNG_DPI`` and the same figure as an SVG beside it, for papers; the SVG's
    element ids are salted alike and it carries no date, so a report drawn twice is the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=PNG_DPI)
    with rc_context({"svg.hashsalt": "noisydml"}):
        figure.savefig(path.with_suffix(".svg"), metadata={"Date": None})
    return path


def cite(cites: dict[str, dict[str, str]], metric: str, paper: str) -> str | None:
    """The published figure of ``paper`` that this plot reproduces, if it publishes one."""
    return cites.get(metric, {}).get(paper)


def reproduces(table: Table) -> str | None:
    """The paper whose published figures the table's runs reproduce: its experiment's, when every run
    recorded that experiment (``Group.experiment``); None for a sweep of the command line's own choices."""
    return table.group.paper if table.group.experiment else None


def swept(table: Table, rows: Sequence[Row] | None = None) -> tuple[str, str]:
    """What the runs of ``rows`` (default: every row) differ in and what they share, in words:
    ``("miner", "triplet loss, uniform noise, digits")``. The first names the overrides the rows differ
    in (empty for one row); the second the method, or the loss and miner, and the noise model they all
    share, then the data set."""
    rows = list(table.rows if rows is None else rows)
    values = [dict(row.signature) for row in rows]
    keys = sorted({k for v in values for k in v}, key=lambda k: (k not in ROW_GROUPS, k))
    varying = [k for k in keys if len({v.get(k) for v in values}) > 1]
    shared = []
    methods = {row.method for row in rows}
    if "method" not in varying and len(methods) == 1 and any(r.choice("method") for r in rows):
        shared.append(methods.pop())
    elif "method" not in varying:
        for group in ("loss", "miner"):
            options = {row.choice(group) for row in rows}
            if group not in varying and len(options) == 1 and None not in options:
                shared.append(f"{options.pop()} {group}")
    noises = {row.choice("noise") for row in rows}
    if "noise" not in varying and len(noises) == 1 and None not in noises:
        shared.append(f"{noises.pop()} noise")
    shared.append(table.group.dataset)
    return " and ".join(varying), ", ".join(shared)


def title_of(table: Table, what: str, source: str | None, rows: Sequence[Row] | None = None) -> str:
    """``what`` against the column key, what the rows differ in and share (``swept``), and on a second
    line, for a paper's experiment, which experiment and the published figure it reproduces."""
    by, shared = swept(table, rows)
    title = f"{what} against {figure_spec(table.column_key).xlabel}"
    title += f", by {by} ({shared})" if by else f": {shared}"
    if table.group.experiment:
        title += f"\nexperiment {table.group.experiment}"
        if source:
            title += f": reproduces {source}"
    return title


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
    """A line per series with 95% interval error bars where a point has them, and its n in the legend
    (beside each point when its points differ); a point of one run is hollow. ``vlines`` are ``(x,
    label)`` reference lines. Series are shifted sideways by ``dodge`` x the x range each (linear axes) so
    their error bars do not hide one another."""
    fig = Figure(figsize=(7.0, 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    colors = [f"C{i}" for i in range(10)]
    xs = [x for s in series for x in s.x]
    step = 0.0 if log2x or not xs else dodge * ((max(xs) - min(xs)) or 1.0)
    for i, s in enumerate(series):
        color = colors[s.color % len(colors)]
        error = [0.0 if math.isnan(v) else v for v in s.error]
        shift = step * (i - (len(series) - 1) / 2)
        shifted = [x + shift for x in s.x]
        single = [n == 1 for n in s.n]
        # A point with an interval is filled, one of a single run hollow; a series of both shows filled.
        ax.errorbar(
            shifted,
            s.mean,
            yerr=error if any(error) else None,
            label=s.legend,
            color=color,
            linestyle="--" if s.dashed else "-",
            marker="o",
            markersize=6,
            markerfacecolor="white" if all(single) else color,
            capsize=3,
        )
        if any(single) and not all(single):
            at = [j for j, one in enumerate(single) if one]
            ax.plot(
                [shifted[j] for j in at],
                [s.mean[j] for j in at],
                "o",
                markersize=6,
                color=color,
                markerfacecolor="white",
                # Above the series' own filled markers.
                zorder=3,
            )
        if min(s.n) != max(s.n):
            for xj, yj, n in zip(shifted, s.mean, s.n, strict=True):
                ax.annotate(
                    f"n={n}", (xj, yj), xytext=(4, 4), textcoords="offset points", fontsize=7, color=color
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
    # A line of the title longer than the axes is wrapped, not cut off at the figure's edge.
    ax.set_title("\n".join(textwrap.fill(line, TITLE_WIDTH) for line in title.split("\n")), fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return save_figure(fig, path)


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
                points.append((x, cell.mean(metric), cell.ci95(metric), len(cell.values(metric))))
        if points:
            x, mean, error, n = (list(v) for v in zip(*points, strict=True))
            series.append(Series(row.label, x, mean, error, n, colors[row.partner_key], row.topline))
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
                # A ratio of the means (no seed in common) stands for one value.
                points.append((x, mean, _half_interval(std, pairs), max(pairs, 1)))
        if points:
            x, mean, error, n = (list(v) for v in zip(*points, strict=True))
            series.append(Series(f"{row.label} / topline", x, mean, error, n, colors[row.partner_key]))
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


def bound_etas(table: Table, etas: Sequence[float] | None) -> Sequence[float]:
    """The etas whose noise bound a noise-rate figure of ``table`` draws: ``etas`` when the report was
    asked for them, else ``DEFAULT_ETAS`` on an experiment of a paper that draws its bound
    (``Paper.noise_bound``), else none."""
    if etas is not None:
        return etas
    paper = papers.paper(reproduces(table) or "")
    return DEFAULT_ETAS if paper is not None and paper.noise_bound else ()


def bound_caption(vlines: Sequence[tuple[float, str]], classes: int | None) -> str:
    """What a figure's dotted lines are, for its caption (the legend has no room for it)."""
    if not vlines:
        return ""
    which = (
        f"Eq. 24 at K = {classes}, the classes these runs trained on"
        if classes is not None and classes >= 2
        else "Eq. 27, the large-K limit (the runs do not say how many classes they trained on)"
    )
    return (
        " Dotted vertical lines: Le & Odobez's bound on the label noise rate p below which the triplet loss "
        f"with semi-hard mining stays noise-tolerant ({which}), one line per η; {ETA_MEANING}."
    )


def draw_table(table: Table, out: Path, etas: Sequence[float] | None = None) -> list[tuple[Path, str]]:
    """Every figure the table supports, as ``(png, caption)``; the noise bound of each of ``etas`` on its
    noise-rate figures (None: where its experiment's paper draws them, ``bound_etas``)."""
    spec = figure_spec(table.column_key)
    present = set(table.metrics)
    xs, ticks = _axis(table)
    classes = num_classes(table)
    asked = bound_etas(table, etas)
    vlines = theory_lines(asked, classes) if spec.noise_axis and ticks is None else []
    bounds = bound_caption(vlines, classes)
    paper = reproduces(table) or ""
    drawn = []
    base = f"{table.group.slug}__"
    for metric in [m for m in spec.metrics if m in present]:
        title = title_of(table, metric_name(metric), cite(spec.cites, metric, paper))
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
        drawn.append((path, f"{caption_of(title)} {points_caption()}{bounds}"))
        if spec.noise_axis and metric in spec.ratio_cites:
            ratios = ratio_series(table, metric)
            if ratios:
                name = short_name(metric)
                noisy = [row for row in table.rows if table.partner(row) is not None]
                source = cite(spec.ratio_cites, metric, paper)
                title = title_of(table, f"noisy / topline {name}", source, noisy)
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
                drawn.append((path, f"{caption_of(title)} {points_caption('seed pairs')}{bounds}"))
    drawn += draw_embeddings(table, out)
    return drawn


def caption_of(title: str) -> str:
    """A figure's title as the first sentence of its caption."""
    return title.replace("\n", "; ") + "."


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
    fig = Figure(figsize=(6.0, 5.5), layout="constrained")
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
    return save_figure(fig, path)


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
    fig = Figure(figsize=(1.2 * (neighbours + 1), 1.3 * len(chosen) + 0.7))
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
    return save_figure(fig, path)
