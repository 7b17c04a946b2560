"""The answer is where a reader looks: the README, the docs' Results page and a paper's page, rendered from
their Markdown (markdown-it, CommonMark with pipe tables, as GitHub and the docs render tables) and opened in
headless Chromium at 1600 x 1400. The table that says whether each claim holds starts on the first screen;
each reproduction's stamp is one line (its commit, CPU, numerics, seeds and runs), not a JSON file; the
claims' tables put the verdict first, and the comparisons of every method come per data set and noise."""

from __future__ import annotations

import csv
import html
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

import browser
from noisydml.report import papers
from noisydml.report.claims.readme import COMPARISONS, REPRODUCTIONS

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "results"
SCREEN = 1400
# Run in the page once it has loaded: the text a reader sees and where each heading and table starts.
PROBE = """<script>
window.addEventListener("load", () => {
  const top = (element) => element.getBoundingClientRect().top + window.scrollY;
  const probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify({
    text: document.body.innerText,
    headings: [...document.querySelectorAll("h1, h2, h3")].map((h) => [h.textContent, top(h)]),
    tables: [...document.querySelectorAll("table")].map((t) => ({
      top: top(t),
      header: [...t.querySelectorAll("th")].map((th) => th.textContent),
      first: [...(t.querySelector("tbody tr")?.querySelectorAll("td") ?? [])].map((td) => td.textContent),
    })),
  });
  document.body.append(probe);
});
</script>
"""


def _hooks():
    sys.path.insert(0, str(ROOT / "scripts" / "docs"))
    try:
        spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs" / "hooks.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    return module


def _seen(markdown: str, path: Path) -> dict:
    """``markdown`` as a page, opened in Chromium: what the probe saw; a screenshot beside it."""
    body = MarkdownIt("commonmark").enable("table").render(markdown)
    path.write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{body}{PROBE}</body></html>'
    )
    browser.screenshot(path.as_uri(), path.with_suffix(".png"))
    assert path.with_suffix(".png").stat().st_size > 10_000, "the page did not render"
    found = re.search(r'<pre id="probe">(.*?)</pre>', browser.dump_dom(path.as_uri()), re.DOTALL)
    assert found, "the page did not load"
    return json.loads(html.unescape(found.group(1)))


def _no_raw_json(text: str) -> None:
    assert not re.search(r'"\w+": [\[{"\d]', text), "raw JSON on the page"


def _verdict_words(table: dict) -> set[str]:
    """A row's verdicts, without the mark of a verdict that rests on a departure (``held†``)."""
    return {cell.strip().removesuffix("†") for cell in table["first"][1:]}


@pytest.mark.slow
def test_the_readme_answers_on_its_first_screen(tmp_path):
    browser.chromium()
    seen = _seen((ROOT / "README.md").read_text(), tmp_path / "readme.html")
    answer = seen["tables"][0]
    assert answer["header"] == ["paper, claim", "digits", "MNIST-5k"] and answer["top"] < SCREEN
    assert "Le & Odobez 2019" in answer["first"][0]
    _no_raw_json(seen["text"])


@pytest.mark.slow
def test_the_results_page_reads_as_an_answer_then_the_detail(tmp_path):
    browser.chromium()
    hooks = _hooks()
    seen = _seen(hooks.results_page(), tmp_path / "results.html")
    text = seen["text"]
    _no_raw_json(text)
    answer = seen["tables"][0]
    assert answer["header"][0] == "paper, claim" and answer["top"] < SCREEN
    # Each reproduction in a line: its command and commit, CPU, numerics, seeds per experiment and runs.
    for folder in sorted(p for p in RESULTS.iterdir() if (p / "stamp.json").is_file()):
        stamp = json.loads((folder / "stamp.json").read_text())
        # The runs' commit, or each of theirs where they trained at several.
        commits = stamp["commit"] if isinstance(stamp["commit"], list) else [stamp["commit"]]
        shown = " / ".join(c[:7] for c in commits)
        command = next(command for key, _, command in REPRODUCTIONS + COMPARISONS if key == folder.name)
        line = next(line for line in text.splitlines() if f"{command} at " in line and shown in line)
        # Runs of several commits are said so, loudly.
        assert ("MIXED" in line) == (len(commits) > 1)
        assert stamp["cpu"][0] in line and f"numerics {stamp['numerics'][0]}" in line and "experiment" in line
        assert f"{stamp['complete_runs']} runs" in line
    # Every claims table puts the verdict first; the comparisons come per data set and noise model.
    details = [t for t in seen["tables"][1:] if t["header"][0] == "verdict"]
    assert len(details) >= 20 and all(t["first"] and t["first"][0].strip() for t in details)
    with (RESULTS / "noisy_dml_cpu" / "comparisons.csv").open() as f:
        settings = {(r["dataset"], r["noise"]) for r in csv.DictReader(f)}
    headings = [h for h, _ in seen["headings"]]
    assert all(f"{d}, {n} noise" in headings for d, n in settings)
    assert "Recall@1: method / against (%)" in details[-1]["header"]


@pytest.mark.slow
def test_a_papers_page_opens_with_its_claims_and_their_verdicts(tmp_path):
    browser.chromium()
    hooks = _hooks()
    seen = _seen(hooks.paper_page(papers.paper("le2019")), tmp_path / "le2019.html")
    _no_raw_json(seen["text"])
    first = seen["tables"][0]
    assert first["header"] == ["claim", "digits", "MNIST-5k"] and first["top"] < SCREEN
    assert _verdict_words(first) <= {"held", "contradicted", "undecided", "not evaluated"}
    # Beneath it, each claim: the paper's sentence, then our comparisons, the verdict first.
    assert "The paper: “" in seen["text"]
    assert seen["tables"][1]["header"][0] == "verdict" and "ours" in seen["tables"][1]["header"][3]
