"""``noisydml-report MY_SWEEP --against results/<reproduction>``: a new method set beside a reproduction's
committed runs (its ``runs.csv``, :mod:`noisydml.report.board`), without running them again.

Each finished run of the user's is paired with the committed runs of the same experiment (the
``experiment=`` it ran under), noise model, noise rate and seed: the same noisy labels, as the committed
methods pair with one another. A pairing whose ``split_hash`` or ``label_hash`` differs is refused (the
numbers would not be on the same labels); one whose numerics mode differs is said (strict and native
numerics round differently). The user's run then takes the place its job would have had in the
reproduction's sweep: the committed job's overrides with the user's method, under the reproduction's figure.

Then the comparisons, with :mod:`noisydml.report.comparisons`' rules:

- ``comparisons.csv`` (and claims.csv, detection.csv): what the reproduction would have committed had the new
  method been in it, its own baselines (``report.baselines``) and the kNN filter reference
  (``report.references``) included, adjusted over the reproduction's whole family as its report is: the
  same file a report over one sweep holding every method writes;
- ``board.csv``: the new method against each committed method at each setting, Benjamini-Hochberg over
  this family alone (the user's comparisons), each judged again on the two halves of the seeds, underpowered
  or unstable where a half does not reach the verdict;
- ``ranks.csv``: where each method ranks at each setting by its mean test Recall@1 over the seeds;
- a critical-difference diagram per data set (Demsar 2006, scikit-posthocs' ``critical_difference_diagram``
  over the Friedman-Nemenyi test): each method's mean rank over the blocks, a block being one setting and
  seed (one draw of noisy labels every method trained on), and a bar joining the methods the Nemenyi test
  cannot tell apart.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy.stats import rankdata

from noisydml.report import comparisons
from noisydml.report.board import Verdicts, draw_verdicts, read_runs, rows_of, run_of, write_runs
from noisydml.report.collect import COMPLETE, collect
from noisydml.report.pairing import METHOD_KEYS, RECALL, by_seed, peer_key
from noisydml.report.plots import save_figure
from noisydml.report.records import Run, lookup, slug
from noisydml.report.statistics import T, interval_kind
from noisydml.report.tables import Group, Row, csv_number, group_runs, pivot

# What makes two runs the same job but for the method: the setting and the seed.
SETTING = ("experiment", "noise", "noise_rate", "seed")
# Overrides that label a run or place its files, not what it computes.
LABELS = ("name", "hydra", "report", "paths", "logger", "experiment")
RANK_FIELDS = ("figure", "dataset", "noise", "noise_rate", "method", "new", "mean", "n_seeds", "rank", "of")


@dataclass
class Against:
    directory: Path
    verdicts: Verdicts
    board: list[comparisons.Comparison]
    ranks: list[dict[str, Any]]
    figures: list[tuple[Path, str]]
    warnings: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)


def place(
    mine: list[Run], mine_rows: list[dict[str, str]], board_rows: list[dict[str, str]]
) -> tuple[list[Run], list[str]]:
    """The user's finished runs (and their rows) as jobs of the board's sweep, and a warning line per
    difference that does not refuse them (numerics, a setting the board lacks, a protocol key). Raises
    ``ValueError``, in one line, for a run on other data or other noisy labels than the board's, a run of no
    experiment, and a method the board already has."""
    by_setting: dict[tuple[str, ...], list[dict[str, str]]] = defaultdict(list)
    for row in board_rows:
        by_setting[tuple(row[key] for key in SETTING)].append(row)
    committed = {row["method"] for row in board_rows}
    placed, warnings = [], []
    for run, row in zip(mine, mine_rows, strict=True):
        where = f"noise={row['noise']} noise.rate={row['noise_rate']} seed={row['seed']}"
        if not row["experiment"]:
            raise ValueError(
                f"{run.path} ran under no experiment=, so it pairs with no committed run; "
                f"{board_experiment(row, board_rows)}"
            )
        if row["method"] and row["method"] in committed:
            raise ValueError(
                f"method={row['method']} is already on the board ({run.path}); compare a method of your own, "
                "or report the sweep with the board's sweeps: noisydml-report <sweeps...>"
            )
        twins = by_setting.get(tuple(row[key] for key in SETTING))
        if not twins:
            warnings.append(
                f"{where} of experiment={row['experiment']}: no committed run there, so this run is left out"
            )
            continue
        twin = twins[0]
        check_same_labels(row, twin, where)
        if row["numerics"] != twin["numerics"] or row["cpu_capability"] != twin["cpu_capability"]:
            warnings.append(
                f"{where}: numerics={row['numerics'] or '?'} at {row['cpu_capability'] or '?'} here, "
                f"numerics={twin['numerics'] or '?'} at {twin['cpu_capability'] or '?'} on the board; their "
                "numbers round differently (run with the board's numerics= to match it)"
            )
        committed_run = run_of(twin)
        warnings += _protocol(run, committed_run, where)
        placed.append(_as_job(run, committed_run))
    return placed, list(dict.fromkeys(warnings))


def board_experiment(row: dict[str, str], board_rows: list[dict[str, str]]) -> str:
    """Which of the board's experiments to run the run of ``row`` under, as the end of a line: the one whose
    committed runs share its data set and noise model (then its noise rate); one on its data set with another
    noise, said so; and where the board has none on its data set, every one of them."""
    dataset, noise, rate = row.get("dataset", ""), row.get("noise", ""), row.get("noise_rate", "")
    matches: dict[str, tuple[bool, bool, bool]] = {}
    for theirs in board_rows:
        match = (theirs["dataset"] == dataset, theirs["noise"] == noise, theirs["noise_rate"] == rate)
        matches[theirs["experiment"]] = max(match, matches.get(theirs["experiment"], match))
    if not matches:
        return "the board holds no experiment to run it under"
    best = max(matches.values())
    chosen = sorted(name for name, match in matches.items() if match == best)
    named = " or ".join(f"experiment={name}" for name in chosen)
    if best[:2] == (True, True):
        return f"run it under the board's experiment on {dataset} with {noise} noise: {named}"
    if best[0]:
        others = sorted(
            {r["noise"] for r in board_rows if r["experiment"] in chosen and r["dataset"] == dataset}
        )
        return (
            f"the board holds no run on {dataset} with {noise} noise; run it under the board's experiment "
            f"on {dataset} (with {', '.join(others)} noise): {named}"
        )
    everyone = " or ".join(f"experiment={name}" for name in sorted(matches))
    return f"the board holds no run on {dataset} with {noise} noise; its experiments: {everyone}"


def check_same_labels(row: dict[str, str], twin: dict[str, str], where: str) -> None:
    """Refuse, in one line, a run whose split or noisy labels are not the committed run's."""
    for key, what, cause in (
        ("split_hash", "training split", "another version of the data set (or of its split code)"),
        ("label_hash", "noisy labels", "other noise code (a noise model changed since the board's commit)"),
    ):
        if row[key] and twin[key] and row[key] != twin[key]:
            raise ValueError(
                f"{where} of experiment={row['experiment']}: the {what} differ from the board's ({key} "
                f"{row[key]} here, {twin[key]} on the board, commit {twin['commit'] or '?'}): likely "
                f"{cause}; run at the board's commit and data to compare"
            )


def _protocol(run: Run, committed: Run, where: str) -> list[str]:
    """A line per key the user's command line set to other than the board's run has (its epochs, its
    batch), but for the method's own keys and the labels."""
    lines = []
    for key in run.overrides:
        if re.split(r"[.@/]", key.lstrip("+~"))[0] in (*METHOD_KEYS, *LABELS, "seed", "noise"):
            continue
        mine, theirs = lookup(run.config, key), lookup(committed.config, key)
        if mine != theirs:
            lines.append(f"{where}: {key}={mine} here, {theirs} on the board: not the board's protocol")
    return lines


def _as_job(run: Run, committed: Run) -> Run:
    """The user's run as the job the board's sweep would have run for its method: the committed job's
    overrides with the user's method keys, under the board's figure and name."""
    method = {k: v for k, v in run.overrides.items() if re.split(r"[.@]", k)[0] in METHOD_KEYS}
    overrides = {
        **{k: v for k, v in committed.overrides.items() if re.split(r"[.@]", k)[0] not in METHOD_KEYS},
        **method,
    }
    report = {**(run.config.get("report") or {}), "figure": lookup(committed.config, "report.figure")}
    config = {**run.config, "name": committed.config.get("name"), "report": report}
    return replace(run, overrides=overrides, config=config, sweep=None)


def board_comparisons(
    groups: list[Group], new: set[str], metric: str = RECALL
) -> list[comparisons.Comparison]:
    """Each new method (a ``method=`` option in ``new``) against every other method of its group at each
    setting where both share the other overrides, paired by seed; Benjamini-Hochberg over these alone."""
    found = []
    for group in groups:
        table = pivot(group, "noise.rate")
        for row in (r for r in table.rows if str(r.choice("method")) in new):
            for other in table.rows:
                if other is row or str(other.choice("method")) in new or peer_key(other) != peer_key(row):
                    continue
                for column in table.columns:
                    found.append(comparisons.compare_rows(group, row, [other], "", column, metric))
    return comparisons.adjust(found)


def ranks(groups: list[Group], new: set[str], metric: str = RECALL) -> list[dict[str, Any]]:
    """Each method's rank at each setting (1 the highest mean over seeds; ties share the mean rank)."""
    found = []
    for group, noise, column, rows in _settings(groups, new):
        means = {}
        for row in rows:
            values = by_seed(row, column, metric)
            if values:
                means[row.method] = (float(np.mean(list(values.values()))), len(values), row)
        order = rankdata([-mean for mean, _, _ in means.values()], method="average")
        for (method, (mean, seeds, row)), rank in zip(means.items(), order, strict=True):
            found.append(
                {
                    "figure": group.figure,
                    "dataset": group.dataset,
                    "noise": noise,
                    "noise_rate": column,
                    "method": method,
                    "new": "yes" if str(row.choice("method")) in new else "",
                    "mean": csv_number(mean),
                    "n_seeds": seeds,
                    "rank": f"{rank:g}",
                    "of": len(means),
                }
            )
    return found


def _settings(groups: list[Group], new: set[str]) -> Iterator[tuple[Group, str, str, list[Row]]]:
    """``(group, noise, rate column, rows)`` of each setting of each group where a new method ran: the
    noisy rows of one noise model, toplines left out."""
    for group in groups:
        table = pivot(group, "noise.rate")
        if not any(str(r.choice("method")) in new for r in table.rows):
            continue
        for noise, rows in _by_noise(table.rows).items():
            for column in table.columns:
                yield group, noise, column, rows


def _by_noise(rows: list[Row]) -> dict[str, list[Row]]:
    found: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if not row.topline:
            found[str(row.choice("noise") or "")].append(row)
    return found


def blocks(
    groups: list[Group], new: set[str], metric: str = RECALL
) -> dict[str, dict[str, dict[str, float]]]:
    """Per data set, ``block -> method -> value``: a block per setting and seed where the new methods ran,
    each method's metric there; only the methods that have a value in every block (a complete design)."""
    by_dataset: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for group, noise, column, rows in _settings(groups, new):
        values = {row.method: by_seed(row, column, metric) for row in rows}
        ran = [set(values[r.method]) for r in rows if str(r.choice("method")) in new]
        seeds = set.intersection(*ran) if ran else set()
        for seed in sorted(seeds):
            block = f"{group.figure} {noise} {column} seed {seed}"
            by_dataset[group.dataset][block] = {m: v[seed] for m, v in values.items() if seed in v}
    complete = {}
    for dataset, found in by_dataset.items():
        methods = set.intersection(*(set(values) for values in found.values())) if found else set()
        complete[dataset] = {
            block: {m: v for m, v in values.items() if m in methods} for block, values in found.items()
        }
    return complete


def draw_critical_difference(
    groups: list[Group], new: set[str], out: Path, metric: str = RECALL
) -> list[tuple[Path, str]]:
    """A critical-difference diagram per data set (scikit-posthocs): mean ranks over the blocks of
    :func:`blocks`, bars joining the methods the Friedman-Nemenyi test cannot tell apart at 5%."""
    import pandas as pd
    import scikit_posthocs

    figures = []
    for dataset, found in blocks(groups, new, metric).items():
        data = pd.DataFrame.from_dict(found, orient="index")
        if data.shape[0] < 2 or data.shape[1] < 2:
            continue
        data = data[sorted(data.columns, key=str.casefold)]
        mean_ranks = data.rank(axis=1, ascending=False).mean()
        significance = scikit_posthocs.posthoc_nemenyi_friedman(data)
        figure = Figure(figsize=(8, 0.25 * len(data.columns) + 1.5))
        FigureCanvasAgg(figure)
        axes = figure.subplots()
        scikit_posthocs.critical_difference_diagram(mean_ranks, significance, ax=axes)
        title = f"{dataset}: mean rank of test Recall@1 over {len(data)} blocks (setting x seed)"
        axes.set_title(title, fontsize=9)
        figure.set_layout_engine("constrained")
        path = save_figure(figure, out / f"{slug(dataset)}_critical_difference.png")
        figures.append(
            (
                path,
                f"{dataset}: each method's mean rank (1 = the highest test Recall@1) over {len(data)} "
                "blocks, a block one noise setting and seed (the noisy labels every method trained on); a "
                "bar joins the methods the Friedman-Nemenyi test cannot tell apart at 5% (Demsar 2006)",
            )
        )
    return figures


def write_against(
    paths: list[Path], board: Path, out: Path, name: str | None = None, interval: str = T
) -> Against:
    """Place the user's runs under ``paths`` on the board in ``board`` (a results folder, or its runs.csv)
    and write the comparisons, ranks and diagram to ``out/<name>``."""
    mine = [run for run in collect([Path(p) for p in paths]) if run.status == COMPLETE]
    if not mine:
        raise ValueError(f"no finished run under {', '.join(map(str, paths))} to set beside the board")
    board_rows = read_runs(board)
    if not board_rows:
        raise ValueError(f"{board} holds no committed run")
    mine_rows = rows_of(mine)
    placed, warnings = place(mine, mine_rows, board_rows)
    if not placed:
        raise ValueError(
            f"none of the runs under {', '.join(map(str, paths))} has a committed run to pair with"
        )
    new = {str(run.choice("method")) for run in placed}
    default = f"{slug(Path(paths[0]).resolve().name)}_against_{slug(Path(board).name)}"
    directory = Path(out) / (name or default)
    directory.mkdir(parents=True, exist_ok=True)
    runs = [run_of(row) for row in board_rows] + placed
    verdicts = draw_verdicts(runs, directory, interval)
    write_runs(mine_rows, directory)
    groups = group_runs(runs)
    with interval_kind(interval):
        board_found = board_comparisons(groups, new)
    comparisons.write_csv(board_found, directory / "board.csv")
    ranked = ranks(groups, new)
    with (directory / "ranks.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=RANK_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(ranked)
    figures = draw_critical_difference(groups, new, directory / "figures")
    found = Against(directory, verdicts, board_found, ranked, figures, warnings, sorted(new))
    (directory / "against.md").write_text(markdown(found, board, interval))
    return found


def rank_lines(ranked: list[dict[str, Any]]) -> list[str]:
    """``digits, uniform noise at 0.5: Wide triplet ranks 3 of 34 (Recall@1 91.20)`` per new method."""
    return [
        f"{r['dataset']}, {r['noise']} noise at {r['noise_rate']}: {r['method']} ranks {r['rank']} of "
        f"{r['of']} (mean test Recall@1 {100 * float(r['mean']):.2f} over {r['n_seeds']} seeds)"
        for r in ranked
        if r["new"]
    ]


def own_lines(found: Against) -> list[str]:
    """The reproduction's summary lines of the new methods: against their baselines and the reference."""
    labels = {c.method for c in found.board}
    return [
        line
        for line in comparisons.summary_lines(found.verdicts.against_baselines)
        if any(f"**{label}** vs" in line for label in labels)
    ]


def markdown(found: Against, board: Path, interval: str) -> str:
    figures = "\n\n".join(f"![{caption}](figures/{path.name})" for path, caption in found.figures)
    warned = "".join(f"- {line}\n" for line in found.warnings)
    return (
        f"# {', '.join(found.new)} against `{board}`\n\n"
        + (f"## Warnings\n\n{warned}\n" if warned else "")
        + "## Where it ranks\n\n"
        + "".join(f"- {line}\n" for line in rank_lines(found.ranks))
        + f"\n{figures}\n\n"
        + "## Against each committed method\n\n"
        "Δ = new method − committed method, test Recall@1 paired by seed (the same noisy labels), "
        f"Benjamini-Hochberg over these {sum(c.result is not None for c in found.board)} comparisons, each "
        "judged again on each half of the seeds (board.csv has every number).\n\n"
        + "".join(f"- {line}\n" for line in comparisons.summary_lines(found.board))
        + "\n"
        + comparisons.markdown(found.verdicts.against_baselines, interval)
    )
