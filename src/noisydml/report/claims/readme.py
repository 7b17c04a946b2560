"""The README's answer and the claims in detail, drawn from the committed results (``results/<reproduction>/
claims.csv`` and its ``stamp.json``, written by ``scripts/publish_results.py``): the functions
``scripts/readme_tables.py`` writes README.md's block and ``results/claims.md`` with, and the docs' Results
page and each paper's page draw on (``scripts/docs/hooks.py``), so the three cannot disagree.

The README's answer (:func:`block`) is one table: a row per paper counting its claims held, contradicted,
undecided and not evaluated on each reproduction, and a row per claim with its one-line reading and one word
per reproduction. The detail (:func:`detail`, :func:`paper_claims`) has each reproduction's stamp in a line,
each claim's verdict first, then the comparison it rests on, its interval, the halves and the paper's
sentence. No number in either is typed: a reproduction without a committed claims.csv says so. Every paper
of :mod:`noisydml.report.papers` with claims has its rows, in the registry's order.

``results`` is always given: the checkout's ``results/`` folder is the caller's to name.
"""

from __future__ import annotations

import csv
import json
import math
import re
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from statistics import median

from noisydml.report import papers, registry
from noisydml.report.claims.render import RATES
from noisydml.report.collect import method_config
from noisydml.report.detection import METHOD_INPUTS
from noisydml.report.records import Claim, Departure, Paper

# A comparison's detection table (scripts/publish_results.py): the kNN vote's AUC on the inputs per setting.
DETECTION = "detection.csv"
# The README names the methods better than the reference on a data set and noise model up to this many.
NAMED = 6
# The reproductions the tables have a column for, in order, and their make targets.
REPRODUCTIONS = (
    ("digits", "digits", "make reproduce-digits"),
    ("mnist5k", "MNIST-5k", "make reproduce-mnist5k"),
)
# The comparisons of every method under PRISM's protocols (no claims: comparisons.csv), in order: the
# results folder, what they run on and their make targets.
COMPARISONS = (
    ("noisy_dml_cpu", "digits", "make reproduce-noisy-dml-cpu"),
    ("noisy_dml_mnist5k", "MNIST-5k", "make reproduce-noisy-dml-mnist5k"),
    (
        "noisy_dml_mnist1d",
        "MNIST-1D, and instance-dependent noise on the digits",
        "make reproduce-noisy-dml-mnist1d",
    ),
)
# The wall time each reproduction is meant to fit on 2 cores, in minutes.
BUDGETS = {
    "digits": 30,
    "mnist5k": 60,
    "noisy_dml_cpu": 60,
    "noisy_dml_mnist5k": 90,
    "noisy_dml_mnist1d": 180,
}
# The training-free reference every noisy_dml method is compared with (report.references).
REFERENCE = "reference/knn_filter"
NOT_YET = "not yet reproduced at this version"
# One word per claim and reproduction; the detail keeps the report's own verdicts.
HELD, CONTRADICTED, UNDECIDED, NOT_EVALUATED = "held", "contradicted", "undecided", "not evaluated"
WORDS = (HELD, CONTRADICTED, UNDECIDED, NOT_EVALUATED)
NOT_RUN = "?"
DECIDING = {
    "held": HELD,
    "contradicted": CONTRADICTED,
    "inconclusive": UNDECIDED,
    "unstable": UNDECIDED,
    "underpowered": UNDECIDED,
}
WIDTH = 110
# A cell whose experiment departs from its paper in a way that could decide the verdict (Claim.rests_on).
MARK = "†"


def wrap(text: str) -> list[str]:
    """A paragraph as lines of at most ``WIDTH`` characters (the README keeps its lines short)."""
    return textwrap.wrap(text, WIDTH, break_long_words=False, break_on_hyphens=False)


def anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def word(rows: list[dict]) -> str:
    """A claim's verdict on one reproduction in one word: ``contradicted`` when an experiment that tests
    it contradicts it, ``held`` when every one holds it, ``undecided`` when one is inconclusive, underpowered
    or unstable
    (held or contradicted on all the seeds, not on both halves), ``not evaluated`` when none tests it (no
    runs, a stand-in's comparison, or only beyond what the paper states)."""
    decided = [DECIDING[r["claim_verdict"]] for r in _by_experiment(rows) if r["claim_verdict"] in DECIDING]
    if not decided:
        return NOT_EVALUATED
    if CONTRADICTED in decided:
        return CONTRADICTED
    return HELD if all(w == HELD for w in decided) else UNDECIDED


def departures(claim: Claim, rows: list[dict]) -> list[tuple[Departure, dict]]:
    """The claim's departures (``Claim.rests_on``) that apply to an experiment of ``rows`` (the claim's rows
    on one reproduction) whose verdict is decided, and its runs' seeds where they are not the experiment's
    registered ones (:mod:`noisydml.report.registry`), each with that experiment's first row."""
    found = []
    for first in _by_experiment(rows):
        if first["claim_verdict"] not in DECIDING:
            continue
        figure = first["experiment"].split(" [")[0]
        mine = [r for r in rows if r["experiment"] == first["experiment"]]
        for departure in claim.rests_on:
            if figure in departure.on and (departure.applies is None or departure.applies(mine)):
                found.append((departure, first))
        if (seeds := registry.unregistered(figure, registry.ran(mine))) is not None:
            found.append((seeds, first))
    return found


def cell(claim: Claim, rows: list[dict]) -> str:
    """The claim's word on one reproduction (``word``), where an experiment whose departure leaves the claim
    unshown counts as not testing it, and ``MARK`` after it when a departure applies."""
    departed = departures(claim, rows)
    unshown = {first["experiment"] for departure, first in departed if not departure.evaluates}
    found = word([r for r in rows if r["experiment"] not in unshown])
    return found + (MARK if departed else "")


def _by_experiment(rows: list[dict]) -> list[dict]:
    """The first row of each experiment: the claim's verdict there is on every one of its rows."""
    first: dict[str, dict] = {}
    for row in rows:
        first.setdefault(row["experiment"], row)
    return list(first.values())


def _columns(results: Path) -> list[tuple[str, str, str, list[dict] | None]]:
    return [
        (key, title, command, read_rows(results / key / "claims.csv"))
        for key, title, command in REPRODUCTIONS
    ]


def block(results: Path, link: Callable[[Paper], str] | None = None) -> str:
    """The README's answer, between the markers: a row per paper counting its claims' verdicts on each
    reproduction, then a row per claim with its one-line reading and one word per reproduction; each
    paper's row links to ``link(paper)`` (its section of results/claims.md unless given)."""
    columns = _columns(results)
    lines = [
        "",
        *wrap(
            "Each paper's claims on the CPU-scale reproductions (`results/<reproduction>/claims.csv`). "
            "`held`: in every experiment that tests it, each comparison's 95% interval lies on the paper's "
            "side, on all the seeds and on each half of them; `contradicted`: one lies on the other side "
            "after Holm's adjustment, likewise; `undecided`: neither, or not on both halves; `not "
            f"evaluated`: no run here tests it; `{MARK}`: its experiment departs from the paper in a way "
            "that could decide it (the detail says how). The comparisons, their intervals and the papers' "
            "sentences: "
            + (
                "below, and on each paper's page."
                if link
                else "[results/claims.md](results/claims.md), and the docs' Results page."
            )
        ),
        "",
        *_answer(papers.papers(), columns, link),
    ]
    where = "below" if link else "on the docs' Results page"
    return "\n".join([*lines, "", *comparisons_block(results, where)]) + "\n"


def comparisons_block(results: Path, where: str) -> list[str]:
    """PRISM's protocols in the README: a row per committed comparison's data set and noise model with the
    kNN vote's AUC on the inputs at each rate (how visible the noise is without training), the methods
    better and worse than their own papers' baselines and than the training-free reference, and those
    better than the reference by name; then the comparisons not run at this version and their commands."""
    label = method_config(REFERENCE)[1] or REFERENCE
    lines = wrap(
        "PRISM's noise protocols, every method against its own paper's baseline and against the "
        f"training-free {label} (`results/noisy_dml_*/comparisons.csv`; each comparison {where}). "
        "The kNN vote's ROC AUC on the inputs says how visible the noise is before any training (1: every "
        "flip stands out, 0.5: none does). Counts are of method-settings better or worse on all the seeds "
        "after Benjamini-Hochberg, then how many of them each half of the seeds reaches too; `underpowered`: "
        "halves with too few seeds. The methods better than the reference are named: those better on both "
        "halves of the seeds too, then, after `on all seeds only`, those better on all the seeds alone. "
        "After `exploratory`: off the registered seeds, counted apart."
    )
    table = [
        "| data set, noise | kNN vote's AUC on the inputs | against their own baselines "
        f"| against the {label} | better than the {label} |",
        "|---|---|---|---|---|",
    ]
    missing = []
    for key, title, command in COMPARISONS:
        rows = read_rows(results / key / "comparisons.csv")
        if rows is None:
            missing.append(f"{title} (`{command}`)")
            continue
        table += comparison_rows(rows, read_rows(results / key / DETECTION) or [], label, where)
    if len(table) > 2:
        lines += ["", *table]
    if missing:
        lines += ["", *wrap(f"{NOT_YET[0].upper()}{NOT_YET[1:]}: {'; '.join(missing)}.")]
    return lines


def comparison_rows(rows: list[dict], detection: list[dict], label: str, where: str) -> list[str]:
    """The README table's rows of one comparison: one per data set and noise model; more than ``NAMED``
    methods better than the reference are counted, and said to be named ``where``."""
    votes = input_votes(detection)
    settings: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        settings.setdefault((row["dataset"], row["noise"]), []).append(row)
    out = []
    for (dataset, noise), found in settings.items():
        rates = sorted({r["noise_rate"] for r in found}, key=float)
        seen = ", ".join(
            f"{votes[dataset, noise, r]:.3f} at {_percent(r)}" for r in rates if (dataset, noise, r) in votes
        )
        own = [r for r in found if r["baseline"] != label]
        reference = [r for r in found if r["baseline"] == label]
        named = registry.apart(reference, lambda rows: _better_names(rows, where))
        tallies = f"{registry.apart(own, _tally)} | {registry.apart(reference, _tally)}"
        out.append(f"| {dataset}, {noise} | {seen or '-'} | {tallies} | {_md(named)} |")
    return out


def _better_names(reference: list[dict], where: str) -> str:
    """The methods better than the reference, by rate: first those both halves of the seeds replicate, then,
    apart, those better on all the seeds only (underpowered or unstable), so that a name never reads as a
    replicated verdict it is not; counted, and said to be named ``where``, past ``NAMED`` methods."""
    replicated: dict[str, list[str]] = {}
    pooled_only: dict[str, list[str]] = {}
    for row in sorted(reference, key=lambda r: (r["method"], float(r["noise_rate"]))):
        if (row.get("verdict_all_seeds") or row["verdict"]) == "better":
            found = replicated if row["verdict"] == "better" else pooled_only
            found.setdefault(row["method"], []).append(_percent(row["noise_rate"]))
    if len(replicated.keys() | pooled_only.keys()) > NAMED:
        return (
            f"{len(replicated)} methods on both halves of the seeds, {len(pooled_only)} on all seeds only, "
            f"named {where}"
        )

    def listed(better: dict[str, list[str]]) -> str:
        return "; ".join(f"{method} at {' and '.join(at)}" for method, at in better.items())

    if not pooled_only:
        return listed(replicated) or "none"
    first = listed(replicated) or "none on both halves of the seeds"
    return f"{first}; on all seeds only: {listed(pooled_only)}"


def _tally(rows: list[dict]) -> str:
    """``b better, w worse of n (b', w' on both halves, u underpowered)``."""
    pooled = Counter(r.get("verdict_all_seeds") or r["verdict"] for r in rows)
    both = Counter(r["verdict"] for r in rows)
    underpowered = f", {both['underpowered']} underpowered" if both["underpowered"] else ""
    return (
        f"{pooled['better']} better, {pooled['worse']} worse of {len(rows)} "
        f"({both['better']}, {both['worse']} on both halves{underpowered})"
    )


def _answer(
    listed: list[Paper], columns: list, link: Callable[[Paper], str] | None = None, counts: bool = True
) -> list[str]:
    link = link or (lambda paper: f"results/claims.md#{anchor(paper.title)}")
    lines = [
        f"| {'paper, claim' if counts else 'claim'} | " + " | ".join(t for _, t, _, _ in columns) + " |",
        "|---" * (1 + len(columns)) + "|",
    ]
    for paper in listed:
        if not paper.claims:
            continue
        if counts:
            counted = [_counts(rows, paper.claims) for *_, rows in columns]
            lines.append(
                f"| **{_md(paper.title)}** ([detail]({link(paper)})) | " + " | ".join(counted) + " |"
            )
        for claim in paper.claims:
            cells = [
                cell(claim, _rows_of(rows, claim)) if rows is not None else NOT_RUN for *_, rows in columns
            ]
            lines.append(f"| {_md(_claim_text(columns, claim))} | " + " | ".join(cells) + " |")
    return lines


def answer_rows(key: str, results: Path) -> list[str]:
    """One paper's claims in one word per reproduction, as the README has them."""
    paper = papers.paper(key)
    return _answer([paper], _columns(results), counts=False) if paper is not None and paper.claims else []


def _rows_of(rows: list[dict] | None, claim) -> list[dict]:
    """The claim's rows, of the experiments its passage is about (``Claim.about``): a committed verdict on
    another experiment, judged before the claim was scoped to its passage, is not the claim's."""
    about = set(claim.about)
    return [
        r
        for r in rows or ()
        if r["claim"] == claim.id
        and (not about or not r["experiment"] or r["experiment"].split(" [")[0] in about)
    ]


def _claim_text(columns: list, claim) -> str:
    """The claim's one-line reading as the committed files have it (the code's, where none does)."""
    for *_, rows in columns:
        for row in _rows_of(rows, claim):
            if row.get("claim_text"):
                return row["claim_text"]
    return claim.text


def _counts(rows: list[dict] | None, claims) -> str:
    if rows is None:
        return NOT_YET
    counted = Counter(cell(claim, _rows_of(rows, claim)).removesuffix(MARK) for claim in claims)
    return ", ".join(f"{counted[w]} {w}" for w in WORDS if counted[w])


def detail(results: Path) -> str:
    """results/claims.md: each reproduction in a line, then per paper its claims' verdicts (first), the
    comparison each rests on with its interval and halves, and the paper's sentences."""
    columns = _columns(results)
    lines = [
        "# The claims in detail",
        "",
        "<!-- generated by scripts/readme_tables.py from results/; do not edit -->",
        "",
        *wrap(
            f"{RATES} Against a stand-in: `not evaluated (stand-in)`; beyond what the paper states: "
            "`extension`, never the paper's verdict. Effects are the mean paired difference in the paper's "
            "direction (points for accuracies, ratio units for ratios) with its 95% interval."
        ),
        "",
        "## The reproductions",
        "",
    ]
    for key, title, command, rows in columns:
        lines.append(f"- **{title}**: {stamp_line(results / key, rows, command)}")
    lines.append("")
    for paper in papers.papers():
        if paper.claims:
            lines += [f"## {paper.title}", "", *paper_claims(paper.key, results)]
    return "\n".join(lines).rstrip() + "\n"


def paper_claims(key: str, results: Path) -> list[str]:
    """One paper's claims, each as its one-line reading, the paper's sentence (its number, where it gives
    one) and our comparisons beneath it: a row per reproduction and experiment, the verdict first, then the
    comparison the verdict rests on with its 95% interval, and the verdicts of the two halves of the seeds."""
    paper = papers.paper(key)
    if paper is None or not paper.claims:
        return []
    columns = _columns(results)
    lines = []
    for claim in paper.claims:
        notes = []
        lines += [f"**{_claim_text(columns, claim)}**", ""]
        if claim.quote:
            lines += [f"The paper: “{claim.quote}”", ""]
        lines += [
            "| verdict | on | experiment | ours: the comparison it rests on [95% interval] | halves |",
            "|---|---|---|---|---|",
        ]
        for _, title, _, rows in columns:
            if rows is None:
                lines.append(f"| {NOT_YET} | {title} | | | |")
                continue
            mine = _rows_of(rows, claim)
            departed: dict[str, list[Departure]] = {}
            for departure, first in departures(claim, mine):
                departed.setdefault(first["experiment"], []).append(departure)
            # An experiment that runs none of the claim's methods (bdml/digits under Le & Odobez's) says
            # nothing of it; it is listed only when no experiment does.
            experiments = _by_experiment(mine)
            tested = [r for r in experiments if r["claim_verdict"] != NOT_EVALUATED] or experiments[:1]
            for first in tested or [{"experiment": "", "claim_verdict": NOT_EVALUATED}]:
                found = [r for r in mine if r["experiment"] == first["experiment"]]
                deciding = _deciding(found)
                ours = f"{deciding['comparison']} {interval_cell(deciding)}" if deciding else ""
                halves = (
                    f"{first['claim_half_a']} / {first['claim_half_b']}" if first.get("claim_half_a") else ""
                )
                verdict = f"**{first['claim_verdict']}**"
                found = departed.get(first["experiment"], [])
                notes += [
                    f"{MARK} {title}, {first['experiment']}: {_departure_text(d, first)}" for d in found
                ]
                if any(not d.evaluates for d in found):
                    verdict = f"**{NOT_EVALUATED}**{MARK} (its comparisons: {first['claim_verdict']})"
                elif found:
                    verdict += MARK
                if first.get("extension_verdict"):
                    verdict += f" (extension: {first['extension_verdict']})"
                experiment = first["experiment"] or "no experiment"
                lines.append(f"| {verdict} | {title} | {_md(experiment)} | {_md(ours)} | {_md(halves)} |")
        lines.append("")
        if notes:
            lines += [*(f"{note}  " for note in notes[:-1]), notes[-1], ""]
    return lines


def _departure_text(departure: Departure, first: dict) -> str:
    """The verdict and what it rests on, in a sentence: "contradicted on an analogue where ...", or where the
    analogue cannot show the claim, "not evaluated: ..."."""
    if departure.evaluates:
        return f"{first['claim_verdict']} {departure.reason}"
    return f"{NOT_EVALUATED}: {departure.reason}"


def stamp_line(folder: Path, rows: list[dict] | None, command: str) -> str:
    """A reproduction's stamp in one line: the command and commit, the CPU and numerics, the seeds of each
    experiment, the runs and the wall time against the budget."""
    if rows is None:
        return f"{NOT_YET} (`{command}` writes `{folder.relative_to(folder.parent.parent)}/`)"
    stamp = json.loads((folder / "stamp.json").read_text()) if (folder / "stamp.json").is_file() else {}
    counts = sorted(len(s) for s in (stamp.get("seeds") or {}).values())
    if not counts:
        seeds = "seeds unknown"
    elif len(counts) == 1:
        seeds = f"1 experiment with {counts[0]} seeds"
    elif len(set(counts)) == 1:
        seeds = f"{len(counts)} experiments with {counts[0]} seeds each"
    else:
        seeds = f"{len(counts)} experiments with {', '.join(map(str, counts[:-1]))} and {counts[-1]} seeds"
    # A list where the runs trained at several commits (publish_results.py --mixed-commits): said loudly.
    listed = stamp.get("commit") if isinstance(stamp.get("commit"), list) else [stamp.get("commit") or "?"]
    commit = " / ".join(str(c)[:7] for c in listed) + (
        " with local changes" if stamp.get("tree_changed") else ""
    )
    if len(listed) > 1:
        commit = f"{len(listed)} commits, MIXED ({commit}: its runs are not one version's)"
    cpus = "; ".join(stamp.get("cpu") or ["?"])
    runs = f", {stamp['complete_runs']} runs" if stamp.get("complete_runs") else ""
    # The runs a later commit changed on purpose (the stamp's changed_since, added by hand with that commit).
    changed = "".join(
        f"; its {', '.join(c['noise'])} runs compute other numbers since {c['commit'][:7]} ({c['why']}): "
        "re-run pending"
        for c in stamp.get("changed_since", [])
    )
    return (
        f"`{command}` at {commit} on {cpus}, numerics {'/'.join(stamp.get('numerics') or ['?'])}; "
        f"{seeds}{runs}" + _time_text(folder.name, stamp) + changed
    )


def read_rows(path: Path) -> list[dict] | None:
    if not path.is_file():
        return None
    with path.open() as f:
        return list(csv.DictReader(f))


def _time_text(key: str, stamp: dict) -> str:
    """The measured wall time, against the reproduction's budget, when the stamp has it."""
    if not stamp.get("wall_s"):
        return ""
    minutes = stamp["wall_s"] / 60
    cores, jobs = stamp.get("cores") or "?", stamp.get("jobs") or "?"
    sittings = f" ({stamp['sittings']} sittings)" if stamp.get("sittings") else ""
    text = f" in {minutes:.0f} min{sittings} on {cores} cores, {jobs} runs at a time"
    budget = BUDGETS.get(key)
    if budget is None:
        return text
    return text + (f" (budget {budget} min)" if minutes <= budget else f", over its {budget}-min budget")


def comparisons_text(path: Path) -> str:
    rows = read_rows(path)
    key = path.parent.name
    if rows is None:
        command = next((c for k, _, c in COMPARISONS if k == key), "make reproduce-...")
        return f"{NOT_YET} (`{command}` writes `results/{key}/`)"
    verdicts = ("better", "worse", "underpowered", "unstable", "inconclusive", "missing")
    counts = {v: sum(r["verdict"] == v for r in rows) for v in verdicts}
    family = next((r["n_comparisons"] for r in rows if r.get("n_comparisons")), "?")
    underpowered = f"{counts['underpowered']} underpowered, " if counts["underpowered"] else ""
    text = (
        f"of {len(rows)} comparisons, {counts['better']} better, {counts['worse']} worse, {underpowered}"
        f"{counts['unstable']} unstable, {counts['inconclusive']} inconclusive, {counts['missing']} missing "
        f"(Benjamini-Hochberg over {family}, false discovery rate 5%, and each verdict judged again on each "
        f"half of the seeds; `results/{key}/comparisons.csv`)"
    )
    needed = [int(r["seeds_to_replicate"]) for r in rows if r.get("seeds_to_replicate")]
    short = counts["unstable"] + counts["underpowered"]
    if short:
        text += (
            f". Better or worse on all the seeds but not on both halves: {short}; both halves would reach "
            f"it with about 81% chance at a median of {median(needed):g} seeds (at most: estimated for "
            f"{len(needed)} of the {short} from their effect and spread, at the bar Benjamini-Hochberg "
            "reached in the half of the seeds that rejected fewer comparisons)"
            if needed
            else f". Better or worse on all the seeds but not on both halves: {short}"
        )
    return text


def reference_lines(rows: list[dict], detection: list[dict] | None = None) -> list[str]:
    """Where the methods beat the training-free reference and where they do not: a line counting both by
    noise model, then a line per setting (data set, noise model, rate) naming the methods better and worse
    than it, and how many are neither, with the kNN vote's AUC on the inputs where ``detection`` (a report's
    detection.csv) has it. Better and worse are the verdicts on all the seeds (after Benjamini-Hochberg);
    each line says how many of them each half of the seeds reaches too."""
    label = method_config(REFERENCE)[1] or REFERENCE
    votes = input_votes(detection or [])
    settings: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    replicated: dict[tuple[str, str, str], list[str]] = {}
    for row in rows:
        if row["baseline"] == label:
            key = (row["dataset"], row["noise"], row["noise_rate"])
            pooled = row.get("verdict_all_seeds") or row["verdict"]
            settings.setdefault(key, {}).setdefault(pooled, []).append(row["method"])
            if row["verdict"] in ("better", "worse"):
                replicated.setdefault(key, []).append(row["method"])
    if not settings:
        return []
    by_noise: dict[str, Counter] = {}
    replicated_by_noise: Counter = Counter()
    for key, verdicts in settings.items():
        counts = by_noise.setdefault(key[1], Counter())
        for verdict, methods in verdicts.items():
            counts[verdict] += len(methods)
        replicated_by_noise[key[1]] += len(replicated.get(key, []))
    lines = [
        f"against the training-free {label}, by noise model, on all the seeds: "
        + "; ".join(
            f"{noise} noise, methods better at {c['better']} and worse at {c['worse']} of "
            f"{c.total()} method-settings, {replicated_by_noise[noise]} of them on each half of the seeds too"
            for noise, c in by_noise.items()
        )
    ]
    for key, verdicts in settings.items():
        dataset, noise, rate = key
        better, worse = verdicts.get("better", []), verdicts.get("worse", [])
        rest = sum(
            len(methods) for verdict, methods in verdicts.items() if verdict not in ("better", "worse")
        )
        seen = f", kNN vote's AUC on the inputs {votes[key]:.3f}" if key in votes else ""
        lines.append(
            f"against the training-free {label} ({dataset}, {noise} noise at {_percent(rate)}{seen}): better "
            f"{_names(better)}; worse {_names(worse)}; {rest} inconclusive or missing; on each half of the "
            f"seeds too: {_names(replicated.get(key, []))}"
        )
    return lines


def input_votes(detection: list[dict]) -> dict[tuple[str, str, str], float]:
    """The kNN label vote's ROC AUC on the inputs (no training) per data set, noise model and rate, from a
    report's detection.csv: how hard the noise is to see without learning anything."""
    return {
        (r["dataset"], r["noise"], r["noise_rate"]): float(r["auc"])
        for r in detection
        if r["method"] == METHOD_INPUTS and r.get("auc")
    }


def _names(methods: list[str]) -> str:
    return f"{len(methods)} ({', '.join(sorted(methods))})" if methods else "none"


def _percent(rate: str) -> str:
    return f"{float(rate):.0%}" if rate else "?"


def _deciding(rows: list[dict]) -> dict | None:
    """The comparison the verdict rests on: a contradicting one, else the least favourable; the paper's own
    before extensions and stand-ins."""
    found = [r for r in rows if r.get("effect")]
    own = [r for r in found if not r.get("extension") and r["verdict"] != "not evaluated (stand-in)"] or found
    if not own:
        return None
    against = [r for r in own if r["verdict"] == "contradicted"]
    return against[0] if against else min(own, key=lambda r: float(r["ci_low"] or "-inf"))


def interval_cell(row: dict) -> str:
    scale = (
        100
        if row["metric"].startswith(("test/recall", "test/nmi", "test/map", "test/ncm", "test/knn"))
        else 1
    )
    scale = 1 if "noisy/topline" in row["metric"] else scale
    digits = 2 if scale == 100 else 3

    def number(text: str) -> str:
        value = float(text) if text else math.nan
        if math.isinf(value):
            return "−∞" if value < 0 else "+∞"
        return ("+" if value >= 0 else "−") + f"{abs(value) * scale:.{digits}f}"

    return f"{number(row['effect'])} [{number(row['ci_low'])}, {number(row['ci_high'])}]"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|")
