"""The papers' published numbers and the rule that puts one beside our cell.

Each paper that prints numbers has a CSV of them beside its module (``Paper.published``, e.g.
``report/papers/yu2018.csv``), one row per printed number: ``table``, ``dataset`` (a conf/dataset option,
or a ``report.dataset`` label such as ``mnist_even_odd``), ``method`` (what ``report.method`` says for
that method's runs), ``metric`` (our name: ``test/recall@1``, ``test/knn_accuracy@3``), ``noise`` (the
sample noise rate as a fraction, or a bracketed per-class vector), ``param`` (``;``-separated
``dotted.key=value`` conditions the run's config must meet, e.g. ``loss.match_weight=0.01``), ``value``
and ``std`` as printed, ``unit`` (``%`` or ``fraction``) and ``source`` (table, row, and any misprint
noted). The paper is the file's: the key used in ``report.figure``, ``<paper>/<what>``.

``metric`` names the paper's checkpoint as our runs log it, so the paper's number sits beside the
checkpoint the paper reports: ``test/...`` where it reports the last epoch (a protocol with no validation
split tests the last one), ``test_best_epoch/...`` where its framework reports the best test epoch (Roth
et al.'s, which Levi et al. ran), ``test_train/...`` for a score of the training images.

A row no run is meant to match says so in its ``method``, and why in its ``source``
(:func:`not_reproduced`): ``(cited [N])``, another paper's number the paper prints beside its own, or
``(not reproduced)``, a method this project does not implement (``source``: ``... not reproduced: why``).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from noisydml.report import papers
from noisydml.report.collect import canonical

UNITS = {"%": 0.01, "fraction": 1.0}


@dataclass(frozen=True)
class Published:
    """One published number, in our units (fractions where the paper prints percent)."""

    paper: str
    table: str
    dataset: str
    method: str
    metric: str
    noise: Any
    param: str
    value: float
    std: float | None
    source: str

    @property
    def citation(self) -> str:
        return f"{self.paper} {self.source}"


def load_published(files: list[tuple[str, Path]] | None = None) -> list[Published]:
    """Every row of every paper's CSV (``files``: ``(paper, path)`` pairs; unset, the papers'), scaled to
    fractions, paper by paper."""
    return [
        row
        for paper, path in (papers.published_files() if files is None else files)
        for row in _read(paper, path)
    ]


def _read(paper: str, path: Path) -> list[Published]:
    rows = []
    with Path(path).open(newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            if row["unit"] not in UNITS:
                raise ValueError(f"{path}:{line}: unit={row['unit']!r} is not one of {sorted(UNITS)}")
            scale = UNITS[row["unit"]]
            rows.append(
                Published(
                    paper=paper,
                    table=row["table"],
                    dataset=row["dataset"],
                    method=row["method"],
                    metric=row["metric"],
                    noise=_parse_value(row["noise"]),
                    param=row["param"],
                    value=float(row["value"]) * scale,
                    std=float(row["std"]) * scale if row["std"] else None,
                    source=row["source"],
                )
            )
    return rows


def not_reproduced(row: Published) -> str | None:
    """Why no experiment runs ``row``'s cell, or None when one is meant to."""
    cited = re.search(r"\(cited (\[[^]]+\])\)", row.method)
    if cited:
        return f"another paper's number ({cited.group(1)} in {row.paper}), printed beside its own"
    if "(not reproduced)" in row.method:
        return row.source.partition("not reproduced:")[2].strip() or "not reproduced (no reason given)"
    return None


def _parse_value(text: str) -> Any:
    """A number, a bracketed list of numbers (a tuple), or the text itself."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        return tuple(_parse_value(part) for part in text[1:-1].split(",") if part.strip())
    try:
        return float(text)
    except ValueError:
        return {"null": None, "true": True, "false": False}.get(text.lower(), text)


def same_method(a: str, b: str) -> bool:
    """Method labels compare without regard to case or runs of spaces."""
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def find_published(
    published: list[Published],
    *,
    paper: str | None,
    dataset: str,
    method: str,
    metric: str,
    value_of: Callable[[str], Any],
) -> Published | None:
    """The published number for one cell of our table: same paper (when the runs name one that
    a paper's CSV knows), data set, method, metric and noise rate, and every ``param`` condition met
    by the cell's config (``value_of`` looks a dotted key up). The first such row, or None."""
    papers = {p.paper for p in published}
    noise = value_of("noise.rate")
    for row in published:
        if paper in papers and row.paper != paper:
            continue
        if row.dataset != dataset or row.metric != metric or not same_method(row.method, method):
            continue
        if not _same_value(row.noise, noise):
            continue
        if all(_holds(condition, value_of) for condition in row.param.split(";") if condition.strip()):
            return row
    return None


def _holds(condition: str, value_of: Callable[[str], Any]) -> bool:
    key, _, text = condition.partition("=")
    return _same_value(_parse_value(text), value_of(key.strip()))


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return canonical(a) == canonical(b)
