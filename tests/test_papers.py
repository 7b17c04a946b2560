"""The report's papers are discovered: a sixth paper is new files (its module and its CSV of published
numbers) and no edit to a shared module, and the report picks up its claims, figure citations, plotted
axis, logged diagnostics and published numbers."""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from noisydml.report import claims, papers
from noisydml.report.claims import readme
from noisydml.report.cli import write_report
from noisydml.report.collect import collect, epoch_metrics
from noisydml.report.published import load_published
from noisydml.report.tables import group_runs

ROOT = Path(__file__).parents[1]
PAPERS_DIR = Path(papers.__file__).parent

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


def test_the_registry_is_every_module_of_the_papers_package_keyed_by_its_file() -> None:
    """The papers are the files of ``report/papers/``: no list elsewhere names them, so a paper is in the
    report, the README's answer, the docs and these tests exactly when its module is in the package."""
    modules = sorted(p.stem for p in PAPERS_DIR.glob("*.py") if p.stem != "__init__")
    assert sorted(paper.key for paper in papers.papers()) == modules
    assert len({paper.order for paper in papers.papers()}) == len(modules), "two papers share an order"
    ids = [claim.id for claim in papers.claims()]
    assert len(ids) == len(set(ids))
    for paper in papers.papers():
        assert all(claim.id.startswith(f"{paper.key}-") for claim in paper.claims), paper.key
        # The docs' words for it: its page's heading and its row of the home page's table.
        assert paper.title and paper.about and paper.reproduced, paper.key
    assert papers.unclaimed() == {p.key for p in papers.papers() if p.compares}


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav_pages(nav: list) -> list[str]:
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _mkdocs_nav() -> list:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]


def test_the_docs_list_exactly_the_registrys_papers_and_name_none_by_hand() -> None:
    """mkdocs.yml's navigation names no paper's page: the hooks add one per paper of the registry, in its
    order, and the home page's table of the papers is drawn from the registry too."""
    hooks = _hooks()
    keys = [paper.key for paper in papers.papers()]
    by_hand = [p for p in _nav_pages(_mkdocs_nav()) if p.startswith("papers/") and p != "papers/cpu.md"]
    assert not by_hand, f"mkdocs.yml lists {by_hand}: the hooks add each paper's page"
    pages = [p for p in _nav_pages(hooks.with_papers(_mkdocs_nav())) if p.startswith("papers/")]
    assert [p for p in pages if p != "papers/cpu.md"] == [f"papers/{key}.md" for key in keys]
    index = (ROOT / "docs" / "index.md").read_text()
    assert hooks.PAPERS_TABLE in index and not re.search(r"\]\(papers/(?!cpu\.md)", index)


def test_a_sixth_paper_is_new_files_only(sixth_paper: None, tmp_path: Path) -> None:
    """A paper's two files, and nothing else edited: it has a page, a place in the navigation and a row on
    the home page, and its claims a row in the README's answer and a section of results/claims.md."""
    hooks = _hooks()
    fake = papers.paper("fake2030")
    assert fake is not None and papers.papers()[-1] is fake
    assert {"Fake et al. 2030": "papers/fake2030.md"} in _flat(hooks.with_papers(_mkdocs_nav()))
    assert "| [Fake et al. 2030](papers/fake2030.md) |" in hooks.papers_table()
    assert hooks.paper_page(fake).startswith("# Fake et al. 2030\n")
    assert "| **Fake et al. 2030** ([detail](results/claims.md#fake-et-al-2030)) |" in readme.block(tmp_path)
    assert "## Fake et al. 2030" in readme.detail(tmp_path)


def _flat(nav: list) -> list:
    out = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        out += _flat(value) if isinstance(value, list) else [entry]
    return out


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
