"""Publish a reproduction: its finished runs, the verdicts drawn from them, and where they came from.

    python scripts/publish_results.py digits outputs/reproduce/digits/*

writes into ``results/<reproduction>/``: ``runs.csv`` (``runs.csv.gz`` when large), a row per finished run
of the sweeps (``noisydml.report.board``); then, read back from that file alone, ``claims.csv`` (or
``comparisons.csv`` for a comparison of methods, which has no claims) and ``detection.csv`` (where the runs
have detection scores), the files a report over the sweeps writes; ``tuning.json``, the values
scripts/reproduce.py tuned for each sweep that tuned any (``{"<group>/<experiment>": its sweep's
tuning.json}``), so that a re-run elsewhere can tell a tuning difference from a numeric one; and
``stamp.json``: the commit (and whether the tree had changes), the CPU model and numerics mode, the library
versions and the seeds, as runs.csv records them (each distinct value once, so a mixed set of runs shows it
is mixed). A reproduction is one version's: runs that trained at more than one commit are refused, naming
the commits and how many runs each holds, unless ``--mixed-commits`` publishes them anyway, the stamp then
saying so (``mixed_commits``) and the README's stamp line too. The Makefile's reproduce targets call it;
scripts/readme_tables.py draws the README's table from these files, and ``noisydml-report MY_SWEEP
--against results/<reproduction>`` compares a new method with runs.csv's runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from noisydml.report.board import draw_verdicts, read_runs, rows_of, runs_of, write_runs
from noisydml.report.collect import FAILED, MISSING, NO_RESULT, collect

RESULTS = Path("results")
# What the results folder keeps of what the runs decide: the claims, else the comparisons, and how well
# each method and the kNN vote on the inputs find the flipped labels.
KEPT = ("claims.csv", "comparisons.csv", "detection.csv")
# The tables one of which a report must have.
VERDICTS = ("claims.csv", "comparisons.csv")
STAMP = "stamp.json"
TUNING = "tuning.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "reproduction", help="the folder name under results/ (digits, mnist5k, noisy_dml_cpu)"
    )
    parser.add_argument("sweeps", nargs="+", type=Path, help="the sweep folders of the reproduction")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results folder (default results/)")
    parser.add_argument(
        "--started",
        type=float,
        nargs="+",
        help="when each sitting of the reproduction began (seconds since the epoch; the make targets append "
        "one at each call): the stamp then records its wall time, the cores and --jobs. A sitting stopped "
        "before the next began (a machine taken back) counts up to the last file it wrote under the sweeps "
        "that the next left as it was (so a job cut short and resumed counts once), and one that wrote none "
        "of the files there now counts nothing",
    )
    parser.add_argument(
        "--wall-s",
        type=int,
        help="the reproduction's wall time in seconds, where it was timed outside (e.g. by /usr/bin/time)",
    )
    parser.add_argument("--jobs", type=int, help="how many runs the reproduction ran at a time")
    parser.add_argument(
        "--mixed-commits",
        action="store_true",
        help="publish runs that trained at more than one commit (refused otherwise), marked as such",
    )
    args = parser.parse_args(argv)

    runs = collect(args.sweeps)
    rows = rows_of(runs)
    commits = Counter(row["commit"] or "unknown" for row in rows)
    if len(commits) > 1 and not args.mixed_commits:
        held = ", ".join(f"{commit[:12]} ({count} runs)" for commit, count in commits.most_common())
        parser.error(
            f"{args.reproduction}: the runs trained at {len(commits)} commits ({held}), and a reproduction "
            "is one version's; run the others again at one commit (delete their results.json and rerun the "
            "make target), or pass --mixed-commits to publish them marked as mixed"
        )
    unfinished = [run for run in runs if run.status in (FAILED, MISSING, NO_RESULT)]
    if unfinished:
        print(
            f"{args.reproduction}: {len(unfinished)} jobs did not finish or are no result (the report's "
            "jobs.csv lists them); the verdicts are drawn from the finished runs alone",
            file=sys.stderr,
        )
    target = args.results / args.reproduction
    target.mkdir(parents=True, exist_ok=True)
    for name in (*KEPT, TUNING):
        (target / name).unlink(missing_ok=True)
    runs_path = write_runs(rows, target)
    rows = read_runs(runs_path)
    with tempfile.TemporaryDirectory() as drawn:
        draw_verdicts(runs_of(rows), Path(drawn))
        # A table with no row (no claim of the papers applies to a comparison of methods) is not kept.
        kept = [name for name in KEPT if len(_lines(Path(drawn) / name)) > 1]
        if not set(kept) & set(VERDICTS):
            sweeps = " ".join(map(str, args.sweeps))
            parser.error(f"the runs under {sweeps} decide no claim and no comparison")
        for name in kept:
            shutil.copyfile(Path(drawn) / name, target / name)
    if tuning := tuning_of(args.sweeps):
        (target / TUNING).write_text(json.dumps(tuning, indent=2, sort_keys=True) + "\n")
    stamp = stamp_of(rows)
    if len(commits) > 1:
        stamp["mixed_commits"] = True
    if args.started is not None or args.wall_s is not None:
        # The runs and their reports; this step (a report over all sweeps) adds a minute or two.
        sittings = [args.wall_s] if args.wall_s is not None else sittings_of(args.started, args.sweeps)
        stamp["wall_s"] = round(sum(sittings))
        if len(sittings) > 1:
            stamp["sittings"] = len(sittings)
        stamp["cores"] = os.cpu_count()
        stamp["jobs"] = args.jobs
    (target / STAMP).write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n")
    print(f"{args.reproduction}: {runs_path.name}, {', '.join(kept)} and {STAMP} in {target}")
    return 0


def sittings_of(starts: list[float], sweeps: list[Path]) -> list[float]:
    """The seconds each sitting worked: the last runs until now; an earlier one until the last file written
    under the sweeps (their folders and logs) before the next sitting began. Sittings that wrote none of the
    files there now (their runs deleted since) are left out."""
    starts = sorted(starts)
    written = [
        path.stat().st_mtime
        for sweep in sweeps
        for path in (sweep.with_name(sweep.name + ".log"), *sweep.rglob("*"))
        if path.is_file()
    ]
    worked = []
    for start, following in zip(starts, starts[1:], strict=False):
        ends = [t for t in written if start <= t < following]
        if ends:
            worked.append(max(ends) - start)
    return [*worked, time.time() - starts[-1]]


def stamp_of(rows: list[dict[str, str]]) -> dict:
    """Commit, CPU, numerics, versions and seeds of runs.csv's rows: ``commit`` is the one the runs trained
    at (each results.json records it), ``published_at`` the checkout that wrote the report (a report redrawn
    later, with a newer report, keeps the runs' commit)."""
    cpus, modes, versions, seeds = set(), set(), set(), {}
    for row in rows:
        cpus.add(row["cpu"] or "unknown")
        modes.add(row["numerics"] or "unknown")
        record = {**json.loads(row["versions"] or "{}"), "git_commit": row["commit"] or "unknown"}
        versions.add(json.dumps(record, sort_keys=True))
        seeds.setdefault(row["figure"], set()).add(_seed(row["seed"]))
    commits = sorted({json.loads(v).get("git_commit", "unknown") for v in versions})
    return {
        "commit": commits[0] if len(commits) == 1 else commits,
        "published_at": _git("rev-parse", "HEAD"),
        # Changes in the publishing checkout, but for the files publishing itself writes.
        "tree_changed": bool(
            _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!README.md", ":!results")
        ),
        "cpu": sorted(cpus),
        "numerics": sorted(modes),
        "versions": [json.loads(v) for v in sorted(versions)],
        "seeds": {figure: sorted(s, key=lambda x: (str(type(x)), x)) for figure, s in sorted(seeds.items())},
        "complete_runs": len(rows),
    }


def _seed(text: str) -> int | str:
    """A seed as results.json records it: an integer where it is one."""
    return int(text) if text.lstrip("-").isdigit() else text


def tuning_of(sweeps: list[Path]) -> dict:
    """Each sweep's tuning.json (scripts/reproduce.py's chosen values, budget and best validation scores),
    keyed by ``<parent>/<sweep>`` (``digits/bdml_noise``), without the machine's study folders."""
    found = {}
    for sweep in sorted(sweeps):
        file = Path(sweep) / TUNING
        if not file.is_file():
            continue
        record = json.loads(file.read_text())
        for study in (record.get("methods") or {}).values():
            study.pop("study", None)
        found[f"{Path(sweep).parent.name}/{Path(sweep).name}"] = record
    return found


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


def _git(*args: str) -> str:
    found = subprocess.run(["git", *args], capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else "unknown"


if __name__ == "__main__":
    sys.exit(main())
