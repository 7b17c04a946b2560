"""``noisydml-report``: tables, figures and the claims summary of sweeps, beside the published numbers;
``noisydml-report --theory --p 0.2 --classes 100``: Le & Odobez's noise calculator.

The report goes to ``<out>/<name>/``: ``report.md`` (claims, figures, tables), ``claims.md``,
``claims.csv`` (every paired comparison: effect, 95% CI, p-value, seeds, verdict), ``cells.csv`` (every
table cell, numbers as fractions), ``runs.csv`` (every run with its status) and
``figures/*.png``. A comparison across papers (conf/experiment/noisy_dml/), which no paper's claim is
about, gets instead of the claims each method against its own paper's baseline (``comparisons.csv``,
:mod:`noisydml.report.comparisons`) and, where its runs scored the test split every epoch, what
selecting on the test split inflates (``test_selection.csv``, :mod:`noisydml.report.selection_bias`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from noisydml.loggers.wandb_report import log_report
from noisydml.report import claims as claims_module
from noisydml.report import comparisons, selection_bias
from noisydml.report.calculator import DEFAULT_ETAS, theory_text
from noisydml.report.collect import COMPLETE, FAILED, MISSING, collect
from noisydml.report.detection import draw_detection
from noisydml.report.plots import draw_embeddings, draw_table
from noisydml.report.published import load_published
from noisydml.report.statistics import INTERVALS, T, interval_kind
from noisydml.report.tables import (
    Table,
    group_runs,
    markdown,
    md_cell,
    pivot,
    slug,
    write_cells_csv,
    write_runs_csv,
)

LEGEND = (
    "Cells: mean ± half the 95% confidence interval over seeds (Student's t; n = complete runs with the "
    "metric; cells.csv has the std too); recall, NMI, mAP and "
    "accuracies in %. `paper X, Δ ±Y`: the published number (src/noisydml/report/papers/<paper>.csv) and "
    "our mean minus it. `failed k/n`: run directories without a complete results.json (a crash, or a job "
    "still running); `missing k/n`: jobs of the sweep's multirun.yaml that have no directory yet."
)


@dataclass
class Report:
    directory: Path
    tables: list[Table]
    verdicts: list[claims_module.Verdict]
    figures: list[tuple[Path, str]]
    against_baselines: list[comparisons.Comparison]


def write_report(
    paths: Sequence[Path],
    out: Path,
    name: str | None = None,
    etas: Sequence[float] = DEFAULT_ETAS,
    metrics: Sequence[str] | None = None,
    interval: str = T,
) -> Report:
    """Read the runs under ``paths`` and write the report to ``out/<name>``; the claims' comparisons get
    ``interval`` intervals (``t`` or ``bootstrap``)."""
    runs = collect([Path(p) for p in paths])
    if not runs:
        raise ValueError(
            f"no runs under {', '.join(map(str, paths))}: expected sweep directories (multirun.yaml) or run "
            "directories (.hydra/ or results.json)"
        )
    groups = group_runs(runs)
    directory = Path(out) / (name or _default_name(groups, paths))
    figures_dir = directory / "figures"
    directory.mkdir(parents=True, exist_ok=True)
    published = load_published()
    tables = [pivot(group) for group in groups]
    verdicts = claims_module.evaluate(groups, interval=interval)
    with interval_kind(interval):
        against_baselines = comparisons.compare_baselines(groups)
        inflations = selection_bias.inflations(groups)
    # A comparison across papers gets its forest plot instead of the noise-rate line plots: some 30
    # methods on one axis cannot be read, and the papers' figures and noise bounds are not about it.
    figures = [
        figure
        for table in tables
        for figure in (
            draw_embeddings(table, figures_dir)
            if comparisons.is_comparison(table.group)
            else draw_table(table, figures_dir, etas)
        )
    ]
    figures += comparisons.draw_forest(against_baselines, figures_dir)
    figures += draw_detection(groups, figures_dir)

    claims_md = claims_module.markdown(verdicts)
    (directory / "claims.md").write_text(claims_md)
    claims_module.write_claims_csv(verdicts, directory / "claims.csv")
    if against_baselines:
        comparisons.write_csv(against_baselines, directory / "comparisons.csv")
    if inflations:
        selection_bias.write_csv(inflations, directory / "test_selection.csv")
    # Where no paper's claim applies, the comparison with each method's own baseline takes its place.
    claims_section = (
        claims_md.replace("# Claims", "## Claims", 1) + "\n" if verdicts or not against_baselines else ""
    )
    write_cells_csv(tables, published, directory / "cells.csv")
    write_runs_csv(tables, directory / "runs.csv")
    counts = ", ".join(f"{sum(r.status == s for r in runs)} {s}" for s in (COMPLETE, FAILED, MISSING))
    sources = "\n".join(f"- `{p}`" for p in paths)
    figure_md = "\n\n".join(f"![{caption}](figures/{path.name})\n\n*{caption}*" for path, caption in figures)
    failed = "".join(f"- `{run.path}`: {md_cell(run.error)}\n" for run in runs if run.status == FAILED)
    failed_md = f"## Failed runs\n\n{failed}\n" if failed else ""
    text = (
        f"# Report: {directory.name}\n\n{len(runs)} runs ({counts}) from:\n\n{sources}\n\n{failed_md}"
        f"{_tuning_markdown(paths)}{claims_section}"
        f"{comparisons.markdown(against_baselines, interval)}{selection_bias.markdown(inflations)}"
        f"## Figures\n\n{figure_md or 'none'}\n\n"
        f"# Tables\n\n{LEGEND}\n\n{markdown(tables, published, list(metrics) if metrics else None)}"
    )
    (directory / "report.md").write_text(text)
    return Report(directory, tables, verdicts, figures, against_baselines)


def _tuning_markdown(paths: Sequence[Path]) -> str:
    """The values scripts/reproduce.py tuned for the sweeps in ``paths`` (tuning.json), and the budget."""
    parts = []
    for path in paths:
        file = Path(path) / "tuning.json"
        if not file.is_file():
            continue
        tuning = json.loads(file.read_text())
        at = ", ".join(f"{k}={v}" for k, v in tuning["at"].items())
        lines = [
            f"## Tuning\n\nEach method below was tuned before its runs: {tuning['trials']} trials "
            f"({tuning['sampler']}) of {tuning['metric']} ({tuning['direction']}) on the validation split at "
            f"{at or 'the defaults'}; the test split was not read. Every other method ran at its published "
            "settings.\n",
            "| method | search space | chosen | best validation score |",
            "| --- | --- | --- | --- |",
        ]
        for method, study in tuning["methods"].items():
            space = ", ".join(f"`{k}={v}`" for k, v in study["space"].items())
            chosen = ", ".join(f"`{k}={v}`" for k, v in study["chosen"].items())
            lines.append(f"| {method} | {space} | {chosen} | {study['best_value']:.4f} |")
        parts.append("\n".join(lines) + "\n\n")
    return "".join(parts)


def _default_name(groups: list, paths: Sequence[Path]) -> str:
    figures = {g.figure for g in groups}
    if len(figures) == 1 and (figure := figures.pop()) not in ("default", "runs"):
        return slug(figure)
    return slug(Path(paths[0]).resolve().name)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="noisydml-report",
        description="Tables, figures and the claims summary of noisydml runs, beside the papers' numbers.",
    )
    parser.add_argument(
        "paths", nargs="*", type=Path, help="sweep directories, run directories, or folders of them"
    )
    parser.add_argument("--name", help="report folder name (default: the experiment's report.figure or name)")
    parser.add_argument(
        "--out", type=Path, default=Path("outputs/reports"), help="parent folder of the report"
    )
    parser.add_argument(
        "--eta",
        type=float,
        nargs="+",
        default=list(DEFAULT_ETAS),
        help="hard/easy sampling skews whose noise bound is drawn on noise plots (Eq. 24 at the runs' K) "
        "and printed by --theory",
    )
    parser.add_argument(
        "--metrics", nargs="+", help="only these metrics in the Markdown tables (e.g. test/recall@1)"
    )
    parser.add_argument(
        "--interval",
        choices=INTERVALS,
        default=T,
        help="the claims' 95%% intervals: Student's t (default) or the percentile bootstrap over seeds",
    )
    parser.add_argument(
        "--theory", action="store_true", help="print Le & Odobez's pair noise and triplet bound"
    )
    parser.add_argument(
        "--no-wandb",
        dest="wandb",
        action="store_false",
        help="do not log the report as an artifact to the W&B project and group of its runs (it is, when "
        "they logged to W&B: offline without an account)",
    )
    parser.add_argument("--p", type=float, help="with --theory: the sample label noise rate")
    parser.add_argument("--classes", type=int, help="with --theory: the number of classes K")
    args = parser.parse_args(argv)

    if args.theory:
        if args.p is None or args.classes is None:
            parser.error(
                "--theory needs --p (the sample noise rate) and --classes (K), "
                "e.g. --theory --p 0.2 --classes 100"
            )
        try:
            print(theory_text(args.p, args.classes, args.eta))
        except ValueError as error:
            parser.error(str(error))
        if not args.paths:
            return 0
    if not args.paths:
        parser.error("give sweep or run directories, e.g. noisydml-report outputs/sweeps/<name>/<time>")
    try:
        report = write_report(args.paths, args.out, args.name, args.eta, args.metrics, args.interval)
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    for verdict in report.verdicts:
        where = f" [{verdict.where}]" if verdict.where else ""
        print(f"{verdict.status:>14}: {verdict.claim.id}{where}: {verdict.detail}")
    for line in comparisons.summary_lines(report.against_baselines):
        print(line.replace("**", ""))
    print(f"\nreport: {report.directory / 'report.md'} ({len(report.figures)} figures)")
    if args.wandb:
        runs = [run.path for table in report.tables for run in table.group.runs if run.path is not None]
        for line in log_report(report.directory, runs):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
