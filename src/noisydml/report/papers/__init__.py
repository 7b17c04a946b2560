"""What the report knows about each paper, one module per paper, found by discovery.

Every module of this package that defines ``PAPER`` (a :class:`Paper`) is a paper of the report: its
claims and their checks, the figures it publishes (which metric against which swept key), the values its
method logs every epoch, and a CSV of its published numbers. The report's modules read these only
through the functions below, so a new paper is a new module here (and its CSV), with no other file
edited. Papers are listed in ``order`` (then by key): the order of the claims in claims.md, of the
published rows a cell is matched against, and of the citations of one figure.

This module imports nothing of the report at import time: :mod:`noisydml.report.collect` reads the
papers' diagnostics, and the papers' modules import the report's tables, which import ``collect``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from noisydml.report.claims import Claim


@dataclass(frozen=True)
class Cite:
    """A published figure or table that our plot of ``metric`` against ``key`` reproduces; ``ratio``:
    the plot of its noisy/topline ratio (noise-rate plots only)."""

    key: str
    metric: str
    source: str
    ratio: bool = False


@dataclass(frozen=True)
class Axis:
    """How to plot a swept key: its x label, the metrics drawn against it (those the runs logged), and
    whether its x axis is log2."""

    xlabel: str
    metrics: tuple[str, ...]
    log2x: bool = False


@dataclass(frozen=True)
class Diagnostic:
    """A value a paper's method logs once per epoch during training (the report reads the last one).
    ``name`` labels a figure's axis; ``detection`` is ``(panel, score)`` when the value measures how well
    the method finds the flipped labels (``auc``, ``precision`` or ``recall``, and what it scores)."""

    metric: str
    name: str | None = None
    detection: tuple[str, str] | None = None


@dataclass(frozen=True)
class Paper:
    """One paper, keyed as the first part of ``report.figure`` (``<key>/<what>``) in its experiments.

    ``compares``: the key names the project's comparison of the papers' methods under protocols none of
    them ran, so no paper's claim is checked on its runs (each method meets its own baseline instead).
    ``published``: the CSV of its printed numbers (see :mod:`noisydml.report.published`), if it prints
    any. ``noise_bound``: its experiments' noise-rate figures draw Le & Odobez's bound on the noise rate
    the triplet loss tolerates (Eq. 24), which a figure of any other sweep draws only when asked
    (``noisydml-report --eta``).
    """

    key: str
    title: str
    order: int = 100
    claims: tuple[Claim, ...] = ()
    cites: tuple[Cite, ...] = ()
    axes: dict[str, Axis] = field(default_factory=dict)
    diagnostics: tuple[Diagnostic, ...] = ()
    published: Path | None = None
    compares: bool = False
    noise_bound: bool = False


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
