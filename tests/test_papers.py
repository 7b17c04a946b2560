"""The report's papers are discovered: a sixth paper is new files (its module and its CSV of published
numbers) and no edit to a shared module, and the report picks up its claims, figure citations, plotted
axis, logged diagnostics and published numbers."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
import yaml

from noisydml.report import claims, papers
from noisydml.report.cli import write_report
from noisydml.report.collect import collect, epoch_metrics
from noisydml.report.published import load_published
from noisydml.report.tables import group_runs

# A paper the package does not have: one claim (Recall@1 at gamma 0.5 above 0.9 on every seed), the
# figure it publishes of its weight against gamma, and one printed number.
FAKE_PAPER = """
from pathlib import Path

from noisydml.report.claims import Claim, Outcome
from noisydml.report.claims.verdicts import compare, outcome
from noisydml.report.pairing import RECALL, by_seed
from noisydml.report.papers import Axis, Cite, Diagnostic, Paper
from noisydml.report.tables import Group, pivot


def _check(group: Group) -> Outcome | None:
    if group.paper != "fake2030":
        return None
    (row,) = pivot(group, "loss.gamma").rows
    recall = by_seed(row, 0.5, RECALL)
    return outcome([compare("gamma=0.5", RECALL, recall, {s: 0.9 for s in recall}, ("ours", "0.9"))], [])


PAPER = Paper(
    key="fake2030",
    title="Fake et al. 2030",
    claims=(Claim("fake2030-gamma", "Fake et al. 2030", "Gamma 0.5 beats 90%", "R@1 > 0.9", "γ", _check),),
    cites=(Cite("loss.gamma", "train/fake_weight", "Fake et al. Fig. 9"),),
    axes={"loss.gamma": Axis("γ (loss.gamma)", ("test/recall@1", "train/fake_weight"))},
    diagnostics=(Diagnostic("train/fake_weight", "fake weight"),),
    published=Path(__file__).with_suffix(".csv"),
)
"""
FAKE_PUBLISHED = (
    "table,dataset,method,metric,noise,param,value,std,unit,source\n"
    'Table 9,digits,triplet + all,test/recall@1,0,loss.gamma=0.5,93.5,,%,"Table 9, row 1"\n'
)


@pytest.fixture
def sixth_paper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake paper's files in a folder of their own, added to the papers package's search path."""
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "fake2030.py").write_text(FAKE_PAPER)
    (folder / "fake2030.csv").write_text(FAKE_PUBLISHED)
    monkeypatch.setattr(papers, "__path__", [*papers.__path__, str(folder)])
    yield
    sys.modules.pop(f"{papers.__name__}.fake2030", None)


def write_runs(root: Path) -> None:
    """Seeds 0-2 at gamma 0.1 and 0.5: Recall@1 0.95 at 0.5, and the weight logged every epoch."""
    for gamma in (0.1, 0.5):
        for seed in range(3):
            run = root / f"gamma{gamma}_seed{seed}"
            (run / ".hydra").mkdir(parents=True)
            config = {
                "name": "fake",
                "seed": seed,
                "report": {"figure": "fake2030/fig9"},
                "dataset": {"name": "digits"},
                "loss": {"gamma": gamma},
                "noise": {"rate": 0},
            }
            choices = {"loss": "triplet", "miner": "all", "dataset": "digits", "experiment": "fake2030/fig9"}
            (run / ".hydra" / "overrides.yaml").write_text(
                yaml.safe_dump([f"loss.gamma={gamma}", f"seed={seed}"])
            )
            (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
            (run / ".hydra" / "hydra.yaml").write_text(
                yaml.safe_dump({"hydra": {"runtime": {"choices": choices}}})
            )
            (run / "csv").mkdir()
            (run / "csv" / "metrics.csv").write_text(f"epoch,train/fake_weight\n0,1.0\n1,{gamma}\n")
            metrics = {"test/recall@1": 0.95 if gamma == 0.5 else 0.8}
            results = {"status": "finished", "metrics": metrics, "config": config, "seed": seed}
            (run / "results.json").write_text(json.dumps(results))


def test_the_papers_package_holds_the_five_papers_and_the_comparison() -> None:
    keys = [paper.key for paper in papers.papers()]
    assert keys == ["le2019", "yu2018", "bdml", "levi2021", "zhang2023", "prism", "noisy_dml"]
    assert len(papers.claims()) == 22 and papers.unclaimed() == {"noisy_dml"}


@pytest.mark.slow
def test_a_sixth_paper_is_read_from_its_own_files(sixth_paper: None, tmp_path: Path) -> None:
    assert papers.papers()[-1].key == "fake2030"
    assert "train/fake_weight" in epoch_metrics()
    (published,) = [p for p in load_published() if p.paper == "fake2030"]
    assert published.value == pytest.approx(0.935)

    write_runs(tmp_path / "runs")
    runs = collect([tmp_path / "runs"])
    # The paper's diagnostic is read from the last epoch logged.
    assert sorted(r.metrics["train/fake_weight"] for r in runs) == [0.1] * 3 + [0.5] * 3
    verdicts = {v.claim.id: v for v in claims.evaluate(group_runs(runs))}
    assert verdicts["fake2030-gamma"].pooled == claims.HELD
    assert verdicts["fake2030-gamma"].where == "fake2030/fig9 [digits]"

    report = write_report([tmp_path / "runs"], tmp_path / "out", "fake")
    text = (report.directory / "report.md").read_text()
    assert "| fake2030-gamma | Fake et al. 2030 | Gamma 0.5 beats 90% |" in text
    # Its axis, its diagnostic's name and, the runs being its experiment's, its figure's citation.
    assert (
        "fake weight against γ (loss.gamma): triplet loss, all miner, digits; experiment fake2030/fig9: "
        "reproduces Fake et al. Fig. 9." in text
    )
    assert (
        report.directory / "figures" / "fake2030_fig9_digits__train_fake_weight_vs_loss.gamma.png"
    ).is_file()
    with (report.directory / "cells.csv").open() as f:
        cells = [row for row in csv.DictReader(f) if row["published"]]
    (cell,) = cells
    assert (cell["column_value"], cell["published"], cell["published_source"]) == (
        "0.5",
        "0.935",
        "fake2030 Table 9, row 1",
    )
