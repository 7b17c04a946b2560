"""The README's answer and results/claims.md are the committed results' (results/<reproduction>/claims.csv and
stamp.json), drawn by noisydml.report.claims.readme and written by scripts/readme_tables.py: no number in
them is typed by hand, and the README answers "does paper X's claim hold?" in its first table, a row per
paper and per claim, one word per cell."""

from __future__ import annotations

import csv
import importlib.util
import itertools
import json
from pathlib import Path

import pytest

from noisydml.report import claims, papers, registry
from noisydml.report.claims import readme as tables
from noisydml.report.claims.verdicts import compare, judge, outcome
from noisydml.report.detection import METHOD_INPUTS
from noisydml.report.tables import Group

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"


def script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_claims_table_is_what_the_committed_results_give() -> None:
    command = script("readme_tables")
    readme = (ROOT / "README.md").read_text()
    assert command.render(readme) == readme, "run: python scripts/readme_tables.py"
    assert (RESULTS / "claims.md").read_text() == tables.detail(RESULTS), (
        "run: python scripts/readme_tables.py"
    )


def test_the_readme_answers_first_a_row_per_paper_and_per_claim_one_word_a_cell() -> None:
    readme = (ROOT / "README.md").read_text()
    lines = readme.splitlines()
    assert len(lines) < 150
    long = [line for line in lines if len(line) > 120 and not line.startswith("|")]
    assert not long, long
    # The first table after the two commands is the answer.
    after = readme[readme.index("make test    #") :]
    first = next(i for i, line in enumerate(after.splitlines()) if line.startswith("|"))
    assert after.splitlines()[first] == "| paper, claim | digits | MNIST-5k |"
    table = itertools.takewhile(lambda line: line.startswith("|"), after.splitlines()[first + 2 :])
    rows = [line.split(" | ") for line in table]
    by_paper: dict[str, list[list[str]]] = {}
    paper = ""
    for row in rows:
        if row[0].startswith("| **"):
            paper = row[0]
            by_paper[paper] = [row]
        else:
            by_paper[paper].append(row)
            assert {row[1].removesuffix(tables.MARK), row[2].rstrip(" |").removesuffix(tables.MARK)} <= set(
                tables.WORDS
            ), row
    with_claims = [p for p in papers.papers() if p.claims]
    assert len(by_paper) == len(with_claims)
    for (head, *claim_rows), paper in zip(by_paper.values(), with_claims, strict=True):
        assert paper.title in head[0] and "(results/claims.md#" in head[0]
        assert [r[0].removeprefix("| ") for r in claim_rows] == [
            tables._md(tables._claim_text(tables._columns(RESULTS), c)) for c in paper.claims
        ]
        # Each paper's counts add up to its claims, and count the words beneath it.
        for column in (1, 2):
            counted = dict(
                (w, int(n)) for n, w in (part.split(" ", 1) for part in head[column].rstrip(" |").split(", "))
            )
            words = [r[column].rstrip(" |").removesuffix(tables.MARK) for r in claim_rows]
            assert counted == {w: words.count(w) for w in tables.WORDS if w in words}
    # The full quotes and the intervals are in the detail, not here.
    assert "“" not in readme and "[−" not in readme


def test_one_word_per_claim_from_its_experiments_verdicts() -> None:

    def rows(*verdicts: str) -> list[dict]:
        return [{"experiment": f"e{i}", "claim_verdict": v} for i, v in enumerate(verdicts)]

    assert tables.word(rows("not evaluated", "held", "held")) == "held"
    assert tables.word(rows("held", "unstable")) == "undecided"
    assert tables.word(rows("inconclusive", "contradicted")) == "contradicted"
    assert tables.word(rows("not evaluated (stand-in)", "not evaluated (extension)")) == "not evaluated"
    assert tables.word([]) == "not evaluated"


def _claim(claim_id: str) -> claims.Claim:
    return next(c for c in papers.claims() if c.id == claim_id)


def test_a_cell_whose_experiment_departs_from_its_paper_carries_a_mark() -> None:
    def rows(experiment: str, verdict: str, *comparisons: str) -> list[dict]:
        return [{"experiment": experiment, "claim_verdict": verdict, "comparison": c} for c in comparisons]

    # Contradicted where BSPML's weights do not see the noise: the word stands, marked.
    zhang = _claim("zhang2023-noise")
    digits = rows("zhang2023/digits [digits]", "contradicted", "BSPML vs Margin, noise.rate=0.1")
    assert tables.cell(zhang, digits) == f"contradicted{tables.MARK}"
    assert tables.cell(zhang, rows("zhang2023/cub [cub]", "contradicted", "x")) == "contradicted"
    # An analogue that cannot show the claim: not evaluated, marked, whatever its comparisons say.
    yu = _claim("yu2018-trade-off")
    assert tables.cell(yu, rows("yu2018/digits [digits]", "inconclusive", "λ=0.1 vs λ=0")) == (
        f"not evaluated{tables.MARK}"
    )
    assert tables.cell(yu, rows("yu2018/fig4_mnist [mnist]", "held", "λ=0.1 vs λ=0")) == "held"
    # A rate not run: marked until the runs have it.
    guarantee = _claim("le2019-guarantee-50")
    assert tables.cell(guarantee, rows("le2019/digits [digits]", "held", "p=0.2", "p=0.4")) == (
        f"held{tables.MARK}"
    )
    at_half = rows("le2019/digits [digits]", "held", "p=0.4: random vs threshold 0.9", "p=0.5: random vs x")
    assert tables.cell(guarantee, at_half) == "held"
    # An experiment that does not decide the claim carries no mark.
    assert tables.cell(zhang, rows("zhang2023/digits [digits]", "not evaluated", "")) == "not evaluated"


def test_the_claims_detail_says_what_a_marked_verdict_rests_on() -> None:
    detail = tables.detail(RESULTS)
    # Each committed BSPML verdict on the digits, then the analogue it rests on.
    experiment = "zhang2023/digits [digits]"
    rows = tables.read_rows(RESULTS / "digits" / "claims.csv")
    verdicts = {r["claim_verdict"] for r in rows if r["experiment"] == experiment} - {tables.NOT_EVALUATED}
    assert verdicts
    for verdict in verdicts:
        assert (
            f"{tables.MARK} digits, {experiment}: {verdict} on an analogue where BSPML's weights do not see "
            "the noise" in detail
        )
    assert (
        f"{tables.MARK} digits, yu2018/digits [digits]: not evaluated: the analogue cannot show it" in detail
    )
    assert (
        f"| **not evaluated**{tables.MARK} (its comparisons: inconclusive) | digits | yu2018/digits" in detail
    )


def test_a_verdict_on_seeds_other_than_the_registered_ones_is_marked() -> None:
    pilot = registry.unregistered("zhang2023/mnist5k", set(range(6)))
    assert (
        pilot is not None and "on its pilot's seeds (0-5)" in pilot.reason and "exploratory" in pilot.reason
    )
    registered = set(registry.registrations()["zhang2023/mnist5k"].seeds)
    assert registry.unregistered("zhang2023/mnist5k", registered) is None
    assert "on other seeds" in registry.unregistered("zhang2023/mnist5k", registered | {99}).reason
    # Every committed verdict whose runs are not its experiment's registered seeds carries the mark.
    for key, _, _ in tables.REPRODUCTIONS:
        rows = tables.read_rows(RESULTS / key / "claims.csv") or []
        for claim in papers.claims():
            mine = tables._rows_of(rows, claim)
            for first in tables._by_experiment(mine):
                figure = first["experiment"].split(" [")[0]
                ran = registry.ran([r for r in mine if r["experiment"] == first["experiment"]])
                found = registry.registrations().get(figure)
                if found and ran and ran != set(found.seeds) and first["claim_verdict"] in tables.DECIDING:
                    assert tables.cell(claim, mine).endswith(tables.MARK), (key, claim.id, figure)
    # The rule on a committed held verdict: unmarked on its registered seeds, marked on its pilot's.
    rows = tables.read_rows(RESULTS / "mnist5k" / "claims.csv") or []
    claim = next(c for c in papers.claims() if c.id == "bdml-every-rate")
    mine = tables._rows_of(rows, claim)
    assert mine and {r["claim_verdict"] for r in mine} == {"held"}
    assert not tables.cell(claim, mine).endswith(tables.MARK)
    pilot = " ".join(f"{s}.0" for s in registry.registrations()["bdml/mnist5k"].pilot)
    assert tables.cell(claim, [dict(r, seeds=pilot) for r in mine]).endswith(tables.MARK)


@pytest.mark.slow
def test_a_reproduction_without_results_says_so_and_one_with_them_shows_its_verdicts(tmp_path: Path) -> None:
    assert tables.NOT_YET in tables.block(tmp_path) and tables.NOT_YET in tables.detail(tmp_path)
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
        "seeds": {"levi2021/digits": list(range(8)), "bdml/digits": list(range(12))},
    }
    (folder / "stamp.json").write_text(json.dumps(stamp))
    text = tables.block(tmp_path)
    row = next(line for line in text.splitlines() if line.startswith(f"| {claim.text}"))
    # MNIST-5k has no file; 8 seeds are not the 30 levi2021/digits registers: marked.
    assert row == f"| {claim.text} | held{tables.MARK} | ? |"
    assert (
        "| **Levi et al. 2021** ([detail](results/claims.md#levi-et-al-2021)) | 1 held, 2 not evaluated | "
        in text
    )
    # The detail: the verdict first, the comparison it rests on, the halves, the paper's sentence.
    detail = tables.detail(tmp_path)
    assert (
        f"| **held**{tables.MARK} | digits | levi2021/digits [digits] | noise.rate=0 +10.62 [+9.74, +11.51] "
        "| held / held |" in detail
    )
    assert f"{tables.MARK} digits, levi2021/digits [digits]: held on other seeds (0-7)" in detail
    assert f"The paper: “{claim.quote}”" in detail and "## Levi et al. 2021" in detail
    # The stamp in a line: commit, CPU, numerics, seeds as counts; the wall time against the budget.
    assert (
        "`make reproduce-digits` at abcdef0 on Test CPU, numerics portable; 2 experiments with 8 and 12 seeds"
        in detail
    )
    assert "abcdef0" not in text  # the commit is in the detail, never in the README (no history there)
    # Runs trained at two commits: both named, and said to be mixed.
    (folder / "stamp.json").write_text(json.dumps({**stamp, "commit": ["abcdef0123", "1234567890"]}))
    assert "`make reproduce-digits` at 2 commits, MIXED (abcdef0 / 1234567: " in tables.detail(tmp_path)
    for key, wall_s, sittings, said in (
        ("digits", 24 * 60, {}, ", 16 runs in 24 min on 2 cores, 2 runs at a time (budget 30 min)"),
        ("mnist5k", 71 * 60, {}, ", 16 runs in 71 min on 2 cores, 2 runs at a time, over its 60-min budget"),
        ("mnist5k", 58 * 60, {"sittings": 2}, "in 58 min (2 sittings) on 2 cores, 2 runs at a time (budget"),
    ):
        timed = {**stamp, "wall_s": wall_s, "cores": 2, "jobs": 2, "complete_runs": 16, **sittings}
        (tmp_path / key).mkdir(exist_ok=True)
        claims.write_claims_csv([verdict], tmp_path / key / "claims.csv")
        (tmp_path / key / "stamp.json").write_text(json.dumps(timed))
        assert said in tables.detail(tmp_path), key
    # Runs a later commit changed on purpose: their noise, the commit and why, and that a re-run is due.
    change = {"commit": "fedcba9876", "noise": ["instance_dependent"], "why": "the noise draws no more"}
    (folder / "stamp.json").write_text(json.dumps({**stamp, "changed_since": [change]}))
    assert (
        "; its instance_dependent runs compute other numbers since fedcba9 (the noise draws no more): re-run "
        "pending" in tables.detail(tmp_path)
    )


def test_the_readme_says_where_methods_beat_the_training_free_reference_and_where_not(tmp_path: Path) -> None:
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
    rows = list(csv.DictReader((folder / "comparisons.csv").open()))
    lines = tables.reference_lines(rows)
    assert (
        "against the training-free kNN filter + triplet (digits, symmetric noise at 50%): better 1 "
        "(PRISM); worse 2 (BSPML, MCL); 1 inconclusive or missing; on each half of the seeds too: 2 "
        "(BSPML, PRISM)" in lines
    )
    assert any(
        "(mnist5k, small_cluster noise at 25%): better none; worse none; 1 inconclusive or missing; on each "
        "half of the seeds too: none" in line
        for line in lines
    )
    text = tables.comparisons_text(folder / "comparisons.csv")
    assert "of 6 comparisons, 1 better, 1 worse, 2 unstable, 1 inconclusive, 1 missing" in text
    assert (
        "both halves would reach it with about 81% chance at a median of 10 seeds (at most: estimated for 2 "
        "of the 2" in text
    )
    assert lines[0].endswith(
        "by noise model, on all the seeds: symmetric noise, methods better at 1 and worse at 2 of 4 "
        "method-settings, 2 of them on each half of the seeds too; small_cluster noise, methods better at 0 "
        "and worse at 0 of 1 method-settings, 0 of them on each half of the seeds too"
    )
    # The README has a row per data set and noise model: how visible the noise is to the kNN vote on the
    # inputs (the report's detection.csv), the methods against their own baselines and against the reference
    # (on all the seeds, then on both halves), and those better than the reference by name.
    (folder / "detection.csv").write_text(
        "dataset,noise,noise_rate,method,score,auc\n"
        f"digits,symmetric,0.5,{METHOD_INPUTS},start,0.7012\n"
        "digits,symmetric,0.5,PRISM,PRISM's score,0.91\n"
    )
    readme = tables.block(tmp_path)
    assert (
        "| digits, symmetric | 0.701 at 50% | 1 better, 0 worse of 1 (0, 0 on both halves) "
        "| 1 better, 2 worse of 4 (1, 1 on both halves) | PRISM at 50% |"
    ) in readme
    assert (
        "| mnist5k, small_cluster | - | 0 better, 0 worse of 0 (0, 0 on both halves) | 0 better, 0 worse "
        in readme
    )
    detection = tables.read_rows(folder / "detection.csv")
    assert "(digits, symmetric noise at 50%, kNN vote's AUC on the inputs 0.701): better 1" in " ".join(
        tables.reference_lines(rows, detection)
    )
    # The comparisons not run at this version say which command writes them.
    readme = " ".join(readme.split())
    assert (
        "MNIST-1D, and instance-dependent noise on the digits (`make reproduce-noisy-dml-mnist1d`)" in readme
    )


def test_the_methods_better_than_the_reference_are_named_apart_where_only_all_the_seeds_reach_it() -> None:
    reference = "kNN filter + triplet"
    verdicts = [
        # Better on all the seeds and on both halves at 25%, on all the seeds only at 50%.
        ("Margin", "0.25", "better", "better"),
        ("Margin", "0.5", "underpowered", "better"),
        ("ProxyNCA", "0.25", "unstable", "better"),
        ("FastAP", "0.25", "worse", "worse"),
        ("SNR", "0.5", "inconclusive", "inconclusive"),
    ]
    rows = [
        {"dataset": "mnist1d", "noise": "uniform", "noise_rate": rate, "method": method}
        | {"baseline": reference, "verdict": verdict, "verdict_all_seeds": pooled}
        for method, rate, verdict, pooled in verdicts
    ]
    (row,) = tables.comparison_rows(rows, [], reference, "below")
    assert row.endswith("| Margin at 25%; on all seeds only: Margin at 50%; ProxyNCA at 25% |")
    # None that both halves reach: said so, not left to read as replicated.
    (row,) = tables.comparison_rows([r for r in rows if r["verdict"] != "better"], [], reference, "below")
    assert row.endswith(
        "| none on both halves of the seeds; on all seeds only: Margin at 50%; ProxyNCA at 25% |"
    )
    many = [
        r | {"method": f"M{i}", "verdict": "better" if i < 2 else "underpowered"}
        for i, r in enumerate([rows[0]] * 7)
    ]
    (row,) = tables.comparison_rows(many, [], reference, "below")
    assert row.endswith("| 2 methods on both halves of the seeds, 5 on all seeds only, named below |")


def test_exploratory_comparisons_are_counted_and_named_apart_from_the_confirmatory_ones() -> None:
    # A comparison off its experiment's registered seeds (comparisons.csv's exploratory column) never reads
    # as a confirmatory verdict: its counts and names come after "exploratory:".
    reference = "kNN filter + triplet"
    verdicts = [
        ("PRISM", "better", "better", ""),
        ("MCL", "worse", "worse", ""),
        ("SNR", "better", "better", "yes"),
        ("FastAP", "inconclusive", "inconclusive", "yes"),
    ]
    rows = [
        {
            "dataset": "mnist1d",
            "noise": "uniform",
            "noise_rate": "0.5",
            "method": method,
            "baseline": reference,
        }
        | {"verdict": verdict, "verdict_all_seeds": pooled, "exploratory": exploratory}
        for method, verdict, pooled, exploratory in verdicts
    ]
    (row,) = tables.comparison_rows(rows, [], reference, "below")
    cells = [c.strip() for c in row.split("|")]
    assert cells[4] == (
        "1 better, 1 worse of 2 (1, 1 on both halves); "
        "exploratory: 1 better, 0 worse of 2 (1, 0 on both halves)"
    )
    assert cells[5] == "PRISM at 50%; exploratory: SNR at 50%"
    # Only exploratory rows (a pilot, or a setting whose focused run was traded): said so.
    (row,) = tables.comparison_rows(rows[2:], [], reference, "below")
    assert row.split("|")[5].strip() == "exploratory: SNR at 50%"


def test_publishing_refuses_runs_of_two_commits_and_the_readme_says_so_of_a_mixed_stamp(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from test_report import write_run

    for seed, commit in ((0, "a" * 40), (1, "b" * 40)):
        run = write_run(
            tmp_path / "sweep" / str(seed),
            [f"seed={seed}"],
            choices={"method": "le2019/triplet_random_semihard"},
            config={"seed": seed, "name": "tiny", "report": {"figure": "tests/tiny"}},
            metrics={"test/recall@1": 0.5},
        )
        results = json.loads((run / "results.json").read_text())
        results["versions"] = {"torch": "2", "git_commit": commit}
        (run / "results.json").write_text(json.dumps(results))
    publish = script("publish_results")
    with pytest.raises(SystemExit):
        publish.main(["mixed", str(tmp_path / "sweep"), "--results", str(tmp_path / "results")])
    assert (
        "the runs trained at 2 commits (aaaaaaaaaaaa (1 runs), bbbbbbbbbbbb (1 runs))"
        in capsys.readouterr().err
    )
    # Refused before anything is written.
    assert not (tmp_path / "results" / "mixed").exists()
    folder = tmp_path / "results" / "mixed"
    folder.mkdir(parents=True)
    stamp = {"commit": ["a" * 40, "b" * 40], "mixed_commits": True, "cpu": ["x"], "numerics": ["strict"]}
    (folder / "stamp.json").write_text(json.dumps(stamp))
    line = tables.stamp_line(folder, [], "make reproduce-mixed")
    assert "2 commits, MIXED (aaaaaaa / bbbbbbb: its runs are not one version's)" in line
