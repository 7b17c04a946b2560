"""``noisydml-report``: tables, figures and the claims summary of sweeps, beside the published numbers;
``noisydml-report --theory --p 0.2 --classes 100``: Le & Odobez's noise calculator.

The report goes to ``<out>/<name>/``: ``report.md`` (the results first, a section per group of runs with
its figures and tables, then the claims these runs can evaluate and one line for the rest),
``report.html`` (the same page, one file, its figures inline), ``claims.md`` (every claim),
``claims.csv`` (every paired comparison: effect, 95% CI, p-value, seeds, verdict), ``cells.csv`` (every
table cell, numbers as fractions), ``runs.csv`` (every finished run, the file a reproduction commits:
:mod:`noisydml.report.board`), ``jobs.csv`` (every job with its status and folder, the failed, no-result
and missing ones too) and ``figures/`` (each figure as a PNG and an SVG). A comparison across papers
(conf/experiment/noisy_dml/), which no paper's claim is about, gets instead of the claims each method
against its own paper's baseline (``comparisons.csv``, :mod:`noisydml.report.comparisons`) and, where its
runs scored the test split every epoch, what selecting on the test split inflates (``test_selection.csv``,
:mod:`noisydml.report.selection_bias`).

``noisydml-report MY_SWEEP --against results/<reproduction>``: the runs of MY_SWEEP set beside a
reproduction's committed runs (:mod:`noisydml.report.against`), into ``<out>/<name>/``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from noisydml.loggers.wandb_report import log_report
from noisydml.report import claims as claims_module
from noisydml.report import comparisons, selection_bias
from noisydml.report.board import draw_verdicts, rows_of, write_runs
from noisydml.report.calculator import DEFAULT_ETAS, theory_text
from noisydml.report.collect import FAILED, NO_RESULT, collect
from noisydml.report.detection import detection_markdown, draw_detection
from noisydml.report.page import write_page
from noisydml.report.plots import draw_embeddings, draw_table, swept
from noisydml.report.published import Published, load_published
from noisydml.report.records import slug
from noisydml.report.statistics import INTERVALS, T
from noisydml.report.tables import (
    Table,
    group_runs,
    md_cell,
    metric_tables,
    pivot,
    run_counts,
    write_cells_csv,
    write_jobs_csv,
)
from noisydml.utils.checks import BadValue, Rule, check_value, check_writable
from noisydml.utils.run_directory import run_holding

LEGEND = (
    "Cells: mean ± half the 95% confidence interval over seeds (Student's t; n = complete runs with the "
    "metric; cells.csv has the std too); recall, NMI, mAP and "
    "accuracies in %. `paper X, Δ ±Y`: the published number (src/noisydml/report/papers/<paper>.csv) and "
    "our mean minus it. `failed k/n`: runs recorded failed or interrupted, or without a results.json (a "
    "crash, or a job still running); `no result k/n`: runs that ran to their end but are no result of "
    "their config (a debug mode, no selection metric logged, stopped by `trainer.max_time`, diverged); "
    "`missing k/n`: "
    "jobs of the sweep's multirun.yaml that have no directory yet. Each "
    "figure is also an SVG beside its PNG in `figures/`, and `report.html` is this page with them inline."
)


# Up to a full stop before a capital ("... digits). Points: ..."), not one inside a citation ("Figs. 1-3").
_FIRST_SENTENCE = re.compile(r"(.+?\.)(?=\s+[A-Z])")

# The range of each numeric flag, by its dest, checked as the arguments are parsed (each of a list's values).
RANGES = {
    "eta": Rule(
        "--eta", float, 1, example="--eta 2", why="eta is the hard/easy negative sampling ratio, at least 1"
    ),
    "p": Rule("--p", float, 0, 1, open_high=False, example="--p 0.2", why="the share of labels flipped"),
    "classes": Rule(
        "--classes", int, 2, example="--classes 100", why="labels flip only between 2 or more classes"
    ),
}
# What the command does with a flag: the noise calculator, a report of run folders, or their comparison
# with a board.
THEORY, REPORT, AGAINST = "with --theory", "by a report of run folders", "by --against with run folders"
# The parts that read each flag, by its dest; a flag given where none of them runs would be ignored, and is
# refused. --no-wandb is honoured everywhere: only a report logs to W&B.
READERS = {
    "p": (THEORY,),
    "classes": (THEORY,),
    "eta": (THEORY, REPORT),
    "metrics": (REPORT,),
    "name": (REPORT, AGAINST),
    "out": (REPORT, AGAINST),
    "interval": (REPORT, AGAINST),
    "against": (AGAINST,),
}


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
    etas: Sequence[float] | None = None,
    metrics: Sequence[str] | None = None,
    interval: str = T,
) -> Report:
    """Read the runs under ``paths`` and write the report to ``out/<name>``: report.md and the same page
    as report.html, its results first, then the claims these runs can evaluate. The claims' comparisons
    get ``interval`` intervals (``t`` or ``bootstrap``); noise-rate figures draw the noise bound of each
    of ``etas`` (None: only an experiment of a paper that draws it, :func:`plots.bound_etas`)."""
    scored: list[Path] = []
    runs = collect([Path(p) for p in paths], evaluated=scored)
    if not runs:
        only = " (noisydml-eval folders, a checkpoint's scores, are not runs)" if scored else ""
        raise ValueError(
            f"no runs under {', '.join(map(str, paths))}{only}: expected sweep directories (multirun.yaml) "
            "or run directories (.hydra/ or results.json)"
        )
    logged = sorted({metric for run in runs for metric in run.metrics})
    if unknown := [metric for metric in metrics or () if metric not in logged]:
        close = difflib.get_close_matches(unknown[0], logged, n=1)
        hint = f"; did you mean --metrics {close[0]}?" if close else ""
        raise ValueError(
            f"--metrics {unknown[0]}: no run under {', '.join(map(str, paths))} logged it, so its column "
            f"would be empty{hint} (they log: {', '.join(logged)})"
        )
    groups = group_runs(runs)
    directory = Path(out) / (name or _default_name(groups, paths))
    figures_dir = directory / "figures"
    directory.mkdir(parents=True, exist_ok=True)
    published = load_published()
    tables = [pivot(group) for group in groups]
    judged = draw_verdicts(runs, directory, interval)
    verdicts, against_baselines = judged.claims, judged.against_baselines
    inflations, detected = judged.inflations, judged.detected
    # A comparison across papers gets its forest plot instead of the noise-rate line plots: some 30
    # methods on one axis cannot be read, and the papers' figures and noise bounds are not about it.
    drawn = [
        draw_embeddings(table, figures_dir)
        if comparisons.is_comparison(table.group)
        else draw_table(table, figures_dir, etas)
        for table in tables
    ]
    across = comparisons.draw_forest(against_baselines, figures_dir) + draw_detection(groups, figures_dir)
    figures = [figure for found in drawn for figure in found] + across

    claims_module.write_claims_md(verdicts, directory / "claims.md")
    write_cells_csv(tables, published, directory / "cells.csv")
    write_jobs_csv(tables, directory / "jobs.csv")
    write_runs(rows_of(runs), directory)
    results = "".join(
        _table_section(table, found, published, metrics) for table, found in zip(tables, drawn, strict=True)
    )
    if across:
        results += f"### Across the groups\n\n{_figures_markdown(across)}\n\n"
    # Where no paper's claim applies, the comparison with each method's own baseline takes its place.
    claims_section = claims_module.report_section(verdicts) if verdicts or not against_baselines else ""
    sources = "\n".join(f"- `{p}`" for p in paths)
    failed = "".join(f"- `{run.path}`: {md_cell(run.error)}\n" for run in runs if run.status == FAILED)
    failed_md = f"\n## Failed runs\n\n{failed}" if failed else ""
    no_result = "".join(f"- `{run.path}`: {md_cell(run.error)}\n" for run in runs if run.status == NO_RESULT)
    if no_result:
        failed_md += (
            "\n## No result\n\nRuns that ran to their end but are no result of their config, each with why "
            f"(their metrics are kept in their folders and left out of the tables):\n\n{no_result}"
        )
    if scored:
        failed_md += (
            "\n## Left out\n\nFolders of `noisydml-eval`, a checkpoint's scores under a config, not runs of "
            "it (the run that trained the checkpoint holds its result):\n\n"
            + "".join(f"- `{folder}`\n" for folder in scored)
        )
    reasons = (("why the failed ones failed", failed), ("why the no-result ones are none", no_result))
    why = [text for text, listed in reasons if listed]
    where = f"the folders they came from, and {' and '.join(why)}," if why else "their folders"
    text = (
        f"# Report: {directory.name}\n\n{run_counts(runs)}; {where} at the end.\n\n"
        f"## Results\n\n{LEGEND}\n\n{results}{_tuning_markdown(paths)}{claims_section}"
        f"{comparisons.markdown(against_baselines, interval)}{detection_markdown(detected)}"
        f"{selection_bias.markdown(inflations)}"
        f"## Runs\n\n{run_counts(runs)} from:\n\n{sources}\n{failed_md}"
    )
    (directory / "report.md").write_text(text)
    write_page(text, directory / "report.html", title=f"Report: {directory.name}")
    return Report(directory, tables, verdicts, figures, against_baselines)


def _figures_markdown(figures: list[tuple[Path, str]]) -> str:
    """Each figure and its caption below it; the caption's first sentence is its alternative text."""
    return "\n\n".join(
        f"![{first.group(1) if (first := _FIRST_SENTENCE.match(caption)) else caption}]"
        f"(figures/{path.name})\n\n*{caption}*"
        for path, caption in figures
    )


def _table_section(
    table: Table,
    figures: list[tuple[Path, str]],
    published: list[Published],
    metrics: Sequence[str] | None,
) -> str:
    """One group's results: what its runs swept, its figures, then a table per metric."""
    group = table.group
    what = (
        f"the runs of experiment `{group.experiment}`"
        if group.experiment
        else "no paper's experiment (the runs recorded no `experiment=`)"
    )
    by, shared = swept(table)
    rows = f"a row per {by}" if by else "one row"
    intro = (
        f"### {group.title}\n\n{run_counts(group.runs)}: `{table.column_key}` in the columns and {rows}, "
        f"all with {shared}; {what}.\n\n"
    )
    shown = f"{_figures_markdown(figures)}\n\n" if figures else ""
    return intro + shown + metric_tables(table, published, list(metrics) if metrics else None, level=4) + "\n"


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


def check_report_arguments(args: argparse.Namespace) -> None:
    """The folders and values a report needs, refused before any run is read: paths that are not
    folders, a report name that is not one folder name, an --out that cannot be written."""
    for path in args.paths:
        if not path.is_dir():
            what = "does not exist" if not path.exists() else "is not a folder"
            raise ValueError(f"{path} {what}; give sweep directories, run directories, or folders of them")
    if args.name is not None and (
        not args.name.strip() or Path(args.name).name != args.name or args.name in (".", "..")
    ):
        raise ValueError(
            f"--name {args.name!r} is not a folder name (the report goes in <--out>/<--name>); give one "
            "without slashes, e.g. --name my_sweep"
        )
    check_writable(args.out, "--out", "--out <a folder you can write>", keep=False)
    if (run := run_holding(args.out)) is not None:
        raise ValueError(
            f"--out {args.out} is inside the run folder {run}, which a report never writes into; give a "
            "folder outside every run, e.g. --out outputs/reports"
        )


def build_parser() -> argparse.ArgumentParser:
    """The command's flags."""
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
        help="hard/easy sampling skews whose triplet-loss noise bound (Eq. 24 at the runs' K) is drawn on "
        "every noise-rate figure and printed by --theory (default: drawn only on an experiment of Le & "
        f"Odobez, and printed, at {' '.join(f'{eta:g}' for eta in DEFAULT_ETAS)})",
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
        "--against",
        metavar="BOARD",
        help="set the runs beside a reproduction's committed runs: its name (noisy_dml_cpu, from the "
        "installed package's results) or a folder holding a runs.csv; each run paired by experiment, noise "
        "setting and seed, compared with every committed method, ranked, and drawn in a critical-difference "
        "diagram",
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
    return parser


def check_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before any work, a numeric flag outside its range (:data:`RANGES`) and a flag that no part
    of this command's run reads (:data:`READERS`), naming the flag, its value and the fix."""
    for dest, rule in RANGES.items():
        for value in _listed(getattr(args, dest)):
            try:
                check_value(rule, value)
            except BadValue as error:
                parser.error(str(error))
    if not args.theory and not args.paths:
        parser.error("give sweep or run directories, e.g. noisydml-report outputs/sweeps/<name>/<time>")
    if args.theory and (args.p is None or args.classes is None):
        parser.error(
            "--theory needs --p (the sample noise rate) and --classes (K), "
            "e.g. --theory --p 0.2 --classes 100"
        )
    folders = bool(args.paths)
    running = {THEORY: args.theory, REPORT: folders and args.against is None}
    running[AGAINST] = folders and args.against is not None
    for action in parser._actions:
        readers = READERS.get(action.dest, ())
        given = getattr(args, action.dest, None)
        if not readers or given == action.default or any(running[part] for part in readers):
            continue
        flag = action.option_strings[0]
        shown = " ".join(f"{value:g}" if isinstance(value, float) else str(value) for value in _listed(given))
        fixes = dict.fromkeys(_what_runs(part, args) for part in readers)
        parser.error(
            f"{flag} {shown} is read only {' or '.join(readers)}, so nothing here would read it; "
            f"{' or '.join(fixes)}, or drop {flag}"
        )


def _listed(given: object) -> list:
    """A flag's values: a list's items, else the one value given (none for None)."""
    return given if isinstance(given, list) else [] if given is None else [given]


def _what_runs(part: str, args: argparse.Namespace) -> str:
    """What would make ``part`` of the command run, given ``args``."""
    if part == THEORY:
        return "add --theory"
    if not args.paths:
        return "give run folders"
    return "drop --against" if part == REPORT else "add --against BOARD"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_flags(parser, args)
    if args.theory:
        try:
            print(theory_text(args.p, args.classes, args.eta or DEFAULT_ETAS))
        except ValueError as error:
            parser.error(str(error))
        if not args.paths:
            return 0
    if args.against is not None:
        return _against(args)
    try:
        check_report_arguments(args)
        report = write_report(args.paths, args.out, args.name, args.eta, args.metrics, args.interval)
    except (ValueError, OSError) as error:
        # One line: the folder or value, and the fix.
        sys.exit(f"noisydml-report: {error}")
    evaluated, rest = claims_module.evaluated(report.verdicts)
    for verdict in evaluated:
        where = f" [{verdict.where}]" if verdict.where else ""
        print(f"{verdict.status:>14}: {verdict.claim.id}{where}: {verdict.detail}")
    if rest:
        print(claims_module.not_evaluated_line(rest).replace("`", ""))
    for line in comparisons.summary_lines(report.against_baselines):
        print(line.replace("**", ""))
    print(
        f"\nreport: {report.directory / 'report.md'}, the same page with its figures inline: "
        f"{report.directory / 'report.html'} ({len(report.figures)} figures, PNG and SVG)"
    )
    if args.wandb:
        runs = [run.path for table in report.tables for run in table.group.runs if run.path is not None]
        for line in log_report(report.directory, runs):
            print(line)
    return 0


def board_folder(against: str) -> Path:
    """The board ``--against`` names: a folder (or runs.csv) that exists, else a reproduction of the
    installed package's committed results (``noisydml.RESULTS_DIR``)."""
    from noisydml import RESULTS_DIR
    from noisydml.report.board import runs_file

    if Path(against).exists():
        return Path(against)
    if runs_file(RESULTS_DIR / against) is not None:
        return RESULTS_DIR / against
    boards = sorted(p.parent.name for p in RESULTS_DIR.glob("*/runs.csv*"))
    shown = ", ".join(boards) if boards else f"none is committed yet in {RESULTS_DIR}"
    raise ValueError(
        f"--against {against} is neither a folder nor a committed board; give a folder holding a runs.csv, "
        f"or a board's name ({shown})"
    )


def _against(args: argparse.Namespace) -> int:
    """``--against``: the comparisons, the ranks and the diagram; a refusal in one line."""
    from noisydml.report.against import own_lines, rank_lines, write_against

    try:
        check_report_arguments(args)
        board = board_folder(args.against)
        found = write_against(args.paths, board, args.out, args.name, args.interval)
    except (ValueError, OSError) as error:
        sys.exit(f"noisydml-report: {error}")
    for line in found.warnings:
        print(f"warning: {line}")
    print(*rank_lines(found.ranks), sep="\n")
    print("\nagainst its baselines and the reference, as the reproduction judges them (comparisons.csv):")
    print(*(line.replace("**", "") for line in own_lines(found)), sep="\n")
    print("\nagainst each committed method (board.csv):")
    print(*(line.replace("**", "") for line in comparisons.summary_lines(found.board)), sep="\n")
    print(
        f"\nagainst {args.against}: {found.directory / 'against.md'}; board.csv (against each committed "
        f"method), comparisons.csv (the reproduction's, with {', '.join(found.new)} in it), ranks.csv"
        + "".join(f", {path.name}" for path, _ in found.figures)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
