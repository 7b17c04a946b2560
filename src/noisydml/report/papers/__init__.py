"""What the report knows about each paper, one module per paper, found by discovery.

Every module of this package that defines ``PAPER`` (a :class:`Paper`) is a paper of the report: its
claims and their checks, the figures it publishes (which metric against which swept key), the values its
method logs every epoch, and a CSV of its published numbers. The report's modules read these only
through the functions below, so a new paper is a new module here (and its CSV), with no other file
edited. Papers are listed in ``order`` (then by key): the order of the claims in claims.md, of the
published rows a cell is matched against, and of the citations of one figure.

The records (:class:`Paper`, :class:`Cite`, :class:`Axis`, :class:`Diagnostic`, and the claims'
:class:`~noisydml.report.records.Claim`) live in :mod:`noisydml.report.records`, which imports nothing of the
report: this module imports only them, so :mod:`noisydml.report.collect`, the published numbers and the
verdicts can ask it for the papers while the papers' modules import those in turn.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

from noisydml.report.records import Axis, Cite, Claim, Departure, Diagnostic, Paper

__all__ = [
    "Axis",
    "Cite",
    "Departure",
    "Diagnostic",
    "Paper",
    "axis",
    "cites",
    "claims",
    "diagnostics",
    "paper",
    "papers",
    "published_files",
    "unclaimed",
]


def papers() -> list[Paper]:
    """Every module of this package that defines ``PAPER``, in ``order``."""
    return list(_papers(tuple(__path__)))


@functools.lru_cache(maxsize=8)
def _papers(path: tuple[str, ...]) -> tuple[Paper, ...]:
    # Listing the package's modules costs some 10 ms, and a report asks once per run it reads.
    found = []
    for module in pkgutil.iter_modules(list(path)):
        paper = getattr(importlib.import_module(f"{__name__}.{module.name}"), "PAPER", None)
        if isinstance(paper, Paper):
            found.append(paper)
    return tuple(sorted(found, key=lambda p: (p.order, p.key)))


def claims() -> tuple[Claim, ...]:
    """Every paper's claims, paper by paper."""
    return tuple(claim for paper in papers() for claim in paper.claims)


def unclaimed() -> set[str]:
    """The keys of experiments no paper's claim is about (``Paper.compares``)."""
    return {paper.key for paper in papers() if paper.compares}


def cites(key: str, ratio: bool = False) -> dict[str, dict[str, str]]:
    """``metric -> {paper: source}`` of the published figures our plots against ``key`` reproduce."""
    found: dict[str, dict[str, str]] = {}
    for paper in papers():
        for cite in paper.cites:
            if cite.key == key and cite.ratio == ratio:
                found.setdefault(cite.metric, {})[paper.key] = cite.source
    return found


def paper(key: str) -> Paper | None:
    """The paper keyed ``key`` (``le2019``), if there is one."""
    return next((p for p in papers() if p.key == key), None)


def axis(key: str) -> Axis | None:
    """The first paper's plot of the swept ``key``, if a paper has one."""
    return next((p.axes[key] for p in papers() if key in p.axes), None)


def diagnostics(keep: Callable[[Diagnostic], bool] = lambda d: True) -> list[Diagnostic]:
    """Every paper's per-epoch diagnostics that ``keep`` keeps, paper by paper."""
    return [d for paper in papers() for d in paper.diagnostics if keep(d)]


def published_files() -> list[tuple[str, Path]]:
    """``(paper key, CSV)`` of every paper that prints numbers."""
    return [(p.key, p.published) for p in papers() if p.published is not None]
