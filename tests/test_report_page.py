"""The report of the sweep it was given, on the small sweep of issue 27 run for real: titled by what was
swept (no paper's figure: the runs recorded no experiment), its methods by their report labels, n shown in
the tables and the figures, its results before the claims it can evaluate and one line for the rest, every
figure as PNG and SVG, and report.html one file that a real browser (headless ``chromium``) renders with
every figure loaded."""

from __future__ import annotations

import csv
import html
import json
import re
import xml.etree.ElementTree as ElementTree

import pytest

import browser
from noisydml.report.cli import main, write_report
from noisydml.report.page import to_html

# Run in the page once it has loaded: what the browser made of it, written into the DOM it dumps.
PROBE = """<script>
window.addEventListener("load", () => {
  const images = [...document.images].map((image) => ({
    loaded: image.complete && image.naturalWidth > 0,
    shown: image.getBoundingClientRect().width,
  }));
  const probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify({
    title: document.title,
    heading: document.querySelector("h1").textContent,
    tables: document.querySelectorAll("table").length,
    images,
  });
  document.body.append(probe);
});
</script>
"""


def test_the_page_reads_the_markdown_the_report_writes():
    text = "\n".join(
        [
            "# Report: r",
            "",
            "Cells: `a|b` and **held**, *n = 1* < 2 & so on",
            "over two lines.",
            "",
            "| method | p=0 |",
            "|---|---|",
            "| A \\| B | 1.00 (n=1) |",
            "",
            "- `one`",
            "- two",
            "",
            "![a caption [digits]](figures/x.png)",
        ]
    )
    page = to_html(text, lambda src: f"data:{src}")
    assert page.split("\n") == [
        "<h1>Report: r</h1>",
        "<p>Cells: <code>a|b</code> and <strong>held</strong>, <em>n = 1</em> &lt; 2 &amp; so on",
        "over two lines.</p>",
        '<div class="scroll"><table>',
        "<thead>",
        "<tr>",
        "<th>method</th>",
        "<th>p=0</th>",
        "</tr>",
        "</thead>",
        "<tbody>",
        "<tr>",
        "<td>A | B</td>",
        "<td>1.00 (n=1)</td>",
        "</tr>",
        "</tbody>",
        "</table></div>",
        "<ul>",
        "<li><code>one</code></li>",
        "<li>two</li>",
        "</ul>",
        '<p><img src="data:figures/x.png" alt="a caption [digits]" /></p>',
        "",
    ]
    # Raw HTML shows as text; an image's path reaches ``image`` as written, not percent-encoded.
    assert to_html("<b>x</b>", str) == "<p>&lt;b&gt;x&lt;/b&gt;</p>\n"
    seen = []
    to_html("![f](figures/a b@1.png)".replace(" ", "%20"), lambda src: seen.append(src) or src)
    assert seen == ["figures/a b@1.png"]


@pytest.mark.slow
def test_the_small_sweeps_report_says_what_was_swept_shows_n_and_leads_with_its_results(
    small_sweep, tmp_path, capsys
):
    assert main([str(small_sweep), "--out", str(tmp_path), "--name", "small"]) == 0
    printed = capsys.readouterr().out
    out = tmp_path / "small"
    report = (out / "report.md").read_text()

    # What was swept, not a paper's figure: the runs recorded no experiment=. No theory lines unasked.
    swept = "against label noise rate p, by miner (triplet loss, uniform noise, digits). "
    assert f"*Recall@1 (%) {swept}" in report and f"*NMI (%) {swept}" in report
    assert "reproduces" not in report and "Le & Odobez Figs" not in report
    assert "Dotted vertical lines" not in report
    # Each point's n, and which interval the error bars are.
    assert "error bars: the 95% t-interval of that mean where n > 1; a hollow point has n = 1" in report
    # The methods by their report labels, each cell with its n.
    assert "| Triplet + fixed semi-hard | " in report and "| Triplet + random semi-hard | " in report
    assert "fixed_semihard |" not in report and "triplet + " not in report
    recall = report[report.index("#### test/recall@1 (%)") :].split("\n\n")[1].splitlines()
    assert len(recall) == 4 and all(line.count("(n=1)") == 2 for line in recall[2:])

    # Every figure a PNG and an SVG; the SVG's text (kept as comments beside its glyphs) has the legend's n.
    figures = out / "figures"
    pngs = sorted(figures.glob("*.png"))
    assert len(pngs) == 2 and all(png.with_suffix(".svg").is_file() for png in pngs)
    svg = (figures / "default_digits__test_recall@1_vs_noise.rate.svg").read_text()
    ElementTree.fromstring(svg)
    for legend in ("Triplet + fixed semi-hard (n=1)", "Triplet + random semi-hard (n=1)"):
        assert f"<!-- {legend} -->" in svg
    assert "reproduces" not in svg and "Eq. 2" not in svg

    # The results lead: figures and tables first, a few hundred words in (the legend, the captions).
    first_table = report.index("| method |")
    assert first_table < report.index("## Claims") and len(report[:first_table].split()) < 400
    # Then the claims these runs can evaluate, and one line for the others, in the report as on stdout.
    with (out / "claims.csv").open() as f:
        rows = list(csv.DictReader(f))
    unevaluated = {r["claim"] for r in rows if r["claim_verdict"] == "not evaluated"}
    evaluated = {r["claim"] for r in rows} - unevaluated
    assert evaluated == {"le2019-clean"} and len(unevaluated) > 10
    line = f"Not evaluated on these runs: {len(unevaluated)} claims of the papers"
    assert report.count(line) == 1 and printed.count(line) == 1
    claims_md = (out / "claims.md").read_text()
    for claim in unevaluated:
        assert f"| {claim} |" in claims_md and claim not in report and claim not in printed
    assert "| le2019-clean |" in report and "inconclusive: le2019-clean" in printed
    assert report.index("## Claims") < report.index("## Runs")


@pytest.mark.slow
def test_the_small_sweeps_report_renders_in_a_browser_with_every_figure_loaded(small_sweep, tmp_path):
    browser.chromium()
    report = write_report([small_sweep], tmp_path, "small")
    page = (report.directory / "report.html").read_text()
    # One file: each figure inline as its SVG, nothing read from beside it.
    assert 'src="figures/' not in page
    assert page.count('<img src="data:image/svg+xml;base64,') == len(report.figures) == 2

    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", f"{PROBE}</body>"))
    dom = browser.dump_dom(probe.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.DOTALL)
    assert found, f"the page did not load: {dom[:2000]}"
    seen = json.loads(html.unescape(found.group(1)))
    assert seen["title"] == seen["heading"] == "Report: small"
    markdown = (report.directory / "report.md").read_text()
    assert seen["tables"] == markdown.count("\n|---") > 10
    assert len(seen["images"]) == 2
    assert all(image["loaded"] and image["shown"] > 300 for image in seen["images"]), seen["images"]
