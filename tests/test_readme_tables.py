"""The README's claims table is the committed results' (results/<reproduction>/claims.csv and stamp.json),
drawn by scripts/readme_tables.py: no number in it is typed by hand."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import time
from pathlib import Path

from noisydml.report import claims, papers
from noisydml.report.claims.verdicts import compare, judge, outcome
from noisydml.report.tables import Group

ROOT = Path(__file__).resolve().parent.parent


def script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_claims_table_is_what_the_committed_results_give() -> None:
    tables = script("readme_tables")
    readme = (ROOT / "README.md").read_text()
    assert tables.render(readme) == readme, "run: python scripts/readme_tables.py"


def test_a_reproduction_without_results_says_so_and_one_with_them_shows_its_verdicts(tmp_path: Path) -> None:
    tables = script("readme_tables")
    assert tables.NOT_YET in tables.block(tmp_path)
    # A committed digits result: levi2021-even-odd held on 8 seeds, each half too.
    seeds = [str(s) for s in range(8)]
    gains = [0.10, 0.12, 0.11, 0.09, 0.10, 0.12, 0.11, 0.10]
    found = compare(
        "noise.rate=0",
        "test/recall@1",
        dict(zip(seeds, gains, strict=True)),
        dict.fromkeys(seeds, 0.0),
        ("EPS", "Triplet"),
    )
    claim = next(c for c in papers.claims() if c.id == "levi2021-even-odd")
    verdict = judge(claim, Group("levi2021/digits", "digits", []), outcome([found], []))
    assert verdict.status == claims.HELD
    folder = tmp_path / "digits"
    folder.mkdir()
    claims.write_claims_csv([verdict], folder / "claims.csv")
    stamp = {
        "commit": "abcdef0123",
        "tree_changed": False,
        "cpu": ["Test CPU"],
        "numerics": ["portable"],
        "versions": [{"torch": "2.14.1"}],
        "seeds": {"levi2021/digits": list(range(8))},
    }
    (folder / "stamp.json").write_text(json.dumps(stamp))
    text = tables.block(tmp_path)
    row = next(line for line in text.splitlines() if line.startswith("| `levi2021-even-odd`"))
    assert (
        "levi2021/digits [digits]: **held**, noise.rate=0 +10.62 [+9.74, +11.51]; halves held / held" in row
    )
    assert row.endswith(f"| {tables.NOT_YET} |")  # MNIST-5k has no file
    assert "8 seeds per experiment, on Test CPU (numerics portable; torch 2.14.1)" in text
    # The commit is in the stamp file, never in the README (no history there).
    assert "abcdef0" not in text
    # A stamp with the measured wall time says it against the reproduction's budget, and what was traded
    # where it is over.
    for key, wall_s, said in (
        ("digits", 24 * 60, "; 16 runs and their reports in 24 min, 2 at a time on 2 cores (budget 30 min)"),
        (
            "mnist5k",
            71 * 60,
            "; 16 runs and their reports in 71 min, 2 at a time on 2 cores, over its 60-min "
            "budget: the seeds are sized so that each claim's halves can replicate",
        ),
    ):
        timed = {**stamp, "wall_s": wall_s, "cores": 2, "jobs": 2, "complete_runs": 16}
        (tmp_path / key).mkdir(exist_ok=True)
        claims.write_claims_csv([verdict], tmp_path / key / "claims.csv")
        (tmp_path / key / "stamp.json").write_text(json.dumps(timed))
        assert said in tables.block(tmp_path), key


def test_publish_results_copies_the_claims_and_stamps_them(tmp_path: Path) -> None:
    publish = script("publish_results")
    report = tmp_path / "report"
    report.mkdir()
    (report / "claims.csv").write_text("claim\nx\n")
    # A table with no row (a comparison of methods has no claim) is not kept.
    (report / "comparisons.csv").write_text("method\n")
    sweep = tmp_path / "sweep"
    for seed in (0, 1):
        run = sweep / f"seed={seed}"
        run.mkdir(parents=True)
        record = {
            "status": "complete",
            "seed": seed,
            "config": {"report": {"figure": "levi2021/digits"}},
            "numerics": {"mode": "portable", "cpu": "Test CPU"},
            "versions": {"torch": "2.14.1", "python": "3.11.7", "git_commit": "1234abc"},
        }
        (run / "results.json").write_text(json.dumps(record))
    results = str(tmp_path / "results")
    assert publish.main(["digits", str(report), str(sweep), "--results", results]) == 0
    out = tmp_path / "results" / "digits"
    assert (out / "claims.csv").read_text() == "claim\nx\n" and not (out / "comparisons.csv").exists()
    stamp = json.loads((out / "stamp.json").read_text())
    assert stamp["cpu"] == ["Test CPU"] and stamp["numerics"] == ["portable"]
    assert stamp["versions"] == [{"git_commit": "1234abc", "python": "3.11.7", "torch": "2.14.1"}]
    assert stamp["seeds"] == {"levi2021/digits": [0, 1]} and stamp["complete_runs"] == 2
    # The commit is the one the runs trained at, whatever checkout redraws the report; no time without
    # --started.
    assert stamp["commit"] == "1234abc" and stamp["published_at"] != "1234abc" and "wall_s" not in stamp
    started = time.time() - 125
    assert (
        publish.main(
            [
                "digits",
                str(report),
                str(sweep),
                "--results",
                results,
                "--started",
                str(started),
                "--jobs",
                "2",
            ]
        )
        == 0
    )
    stamp = json.loads((out / "stamp.json").read_text())
    assert 125 <= stamp["wall_s"] < 185 and stamp["jobs"] == 2 and stamp["cores"] == os.cpu_count()


def test_the_readme_says_where_methods_beat_the_training_free_reference_and_where_not(tmp_path: Path) -> None:
    tables = script("readme_tables")
    folder = tmp_path / "noisy_dml_cpu"
    folder.mkdir()
    fields = (
        "dataset",
        "noise",
        "noise_rate",
        "method",
        "baseline",
        "verdict",
        "verdict_all_seeds",
        "seeds_to_replicate",
        "n_comparisons",
    )
    rows = [
        ("digits", "symmetric", "0.5", "PRISM", "kNN filter + triplet", "better", "better", ""),
        ("digits", "symmetric", "0.5", "BSPML", "kNN filter + triplet", "worse", "worse", ""),
        # Worse on all the seeds, not on both halves: counted as worse there, not as replicated.
        ("digits", "symmetric", "0.5", "MCL", "kNN filter + triplet", "unstable", "worse", "12"),
        (
            "digits",
            "symmetric",
            "0.5",
            "Triplet, random semi-hard",
            "kNN filter + triplet",
            "inconclusive",
            "inconclusive",
            "",
        ),
        # Against its own paper's baseline: not a statement about the reference.
        ("digits", "symmetric", "0.5", "BSPML", "Multi-similarity", "unstable", "better", "8"),
        ("mnist5k", "small_cluster", "0.25", "PRISM", "kNN filter + triplet", "missing", "missing", ""),
    ]
    with (folder / "comparisons.csv").open("w", newline="") as f:
        csv.writer(f).writerows([fields, *((*row, 4) for row in rows)])
    text = tables.block(tmp_path)
    assert (
        "  - against the training-free kNN filter + triplet (digits, symmetric noise at 50%): better 1 "
        "(PRISM); worse 2 (BSPML, MCL); 1 inconclusive or missing; on each half of the seeds too: 2 "
        "(BSPML, PRISM)" in text
    )
    assert (
        "(mnist5k, small_cluster noise at 25%): better none; worse none; 1 inconclusive or missing; on each "
        "half of the seeds too: none" in text
    )
    assert "of 6 comparisons, 1 better, 1 worse, 2 unstable, 1 inconclusive, 1 missing" in text
    assert (
        "both halves would reach it with about 81% chance at a median of 10 seeds (at most: estimated for 2 "
        "of the 2" in text
    )
    assert (
        "by noise model, on all the seeds: symmetric noise, methods better at 1 and worse at 2 of 4 "
        "method-settings, 2 of them on each half of the seeds too; small_cluster noise, methods better at 0 "
        "and worse at 0 of 1 method-settings, 0 of them on each half of the seeds too" in text
    )
