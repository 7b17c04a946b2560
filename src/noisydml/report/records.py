"""The report's records, the words its modules share: a run and a group of runs, a paper and what it
declares (its claims, the figures it publishes, the values its method logs), and what a claim's check finds.

They import nothing of the report but its statistics, so that every module above can name them: the
papers' registry (:mod:`noisydml.report.papers`) holds claims that the verdicts
(:mod:`noisydml.report.claims.verdicts`) judge, and each reads the runs that :mod:`noisydml.report.collect`
reads, without one importing the other in a circle.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from noisydml.report.statistics import INCONCLUSIVE, Paired, combine

COMPLETE, FAILED, MISSING = "complete", "failed", "missing"
# A run that ran to its end but is no result of its config (recorded debug, unselected, stopped, diverged).
NO_RESULT = "no result"


@dataclass
class Run:
    """One job of an experiment, whether it finished, failed, ran to its end as no result or never started.

    ``overrides`` maps each command-line key of the job (``noise.rate``, ``miner``, ``+x``) to its
    parsed value. ``config`` is the resolved config of a complete run, the unresolved
    ``.hydra/config.yaml`` of a failed one, and for a missing job the sweep's base config from
    ``multirun.yaml`` (good for the name and the data set, not for the job's own choices). ``error``
    says why a failed run did not finish, where its ``results.json`` says, and why a no-result run is none.
    """

    path: Path | None
    status: str
    overrides: dict[str, Any]
    config: dict = field(default_factory=dict)
    choices: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    sweep: Path | None = None
    error: str = ""
    # results.json's noise summary (num_classes trained on, realised rates) of a complete run.
    noise: dict[str, Any] = field(default_factory=dict)

    @property
    def seed(self) -> Any:
        return self.overrides.get("seed", self.config.get("seed"))

    @property
    def has_config(self) -> bool:
        """Whether ``config`` is the job's own (complete, failed or no result), not the sweep's base
        config."""
        return self.status != MISSING

    def value(self, key: str) -> Any:
        """The value of a dotted config key for this job: its override, else its config, else None.

        ``noise.rate`` of a clean run (``noise=none``) is 0, so clean runs sit at p = 0 on noise axes.
        """
        if key in self.overrides:
            return self.overrides[key]
        if self.has_config:
            found = lookup(self.config, key)
            if found is not None:
                return found
            if key == "noise.rate":
                return noise_rate(self.config)
        return None

    def choice(self, group: str) -> Any:
        """The option of a config group (``loss``, ``miner``, ``noise``): Hydra's record, else the
        override."""
        if group in self.choices:
            return self.choices[group]
        return self.overrides.get(group)

    @property
    def topline(self) -> bool:
        """Le & Odobez's topline: no flipped labels, a (1 - p) fraction of the clean training set."""
        if self.has_config:
            target = str(lookup(self.config, "noise._target_") or "")
            if target:
                return target.endswith("ToplineNoise")
        return self.choice("noise") == "topline"


def lookup(config: dict, key: str) -> Any:
    """``config["a"]["b"]`` for ``key="a.b"``, or None where a part is absent."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def noise_rate(config: dict) -> Any:
    """The sample label-noise rate of a config: ``noise.rate``; the per-class vector of class-conditional
    noise (a tuple); 0 for clean labels; None when unknown."""
    noise = config.get("noise") or {}
    if "rate" in noise:
        return noise["rate"]
    if "rates" in noise:
        return tuple(noise["rates"])
    if str(noise.get("_target_", "")).endswith("NoNoise"):
        return 0.0
    return None


# A file name is built of up to three slugs and a few words, and a file system takes 255 bytes.
SLUG_MAX = 64


def slug(text: str) -> str:
    """``text`` as a part of a file name; a long one (a row labelled by many overrides) keeps its start and a
    hash of the whole, so that it stays apart from the others."""
    name = re.sub(r"[^A-Za-z0-9.@+-]+", "_", text).strip("_")
    if len(name) <= SLUG_MAX:
        return name
    return f"{name[: SLUG_MAX - 11]}_{hashlib.sha1(name.encode()).hexdigest()[:10]}"


@dataclass
class Group:
    """Runs of one experiment (``report.figure``, else ``name``) on one data set."""

    figure: str
    dataset: str
    runs: list[Run]

    @property
    def paper(self) -> str:
        """The paper key of ``report.figure = <paper>/<what>``."""
        return self.figure.split("/")[0]

    @property
    def title(self) -> str:
        return f"{self.figure} [{self.dataset}]"

    @property
    def experiment(self) -> str | None:
        """The ``experiment=`` option every run of the group recorded (results.json's choices), or None:
        a sweep of the command line's own choices is no paper's experiment, whatever it resembles."""
        recorded = {str(r.choice("experiment")) if r.choice("experiment") else None for r in self.runs}
        return recorded.pop() if len(recorded) == 1 else None

    @property
    def slug(self) -> str:
        return slug(f"{self.figure}_{self.dataset}")


@dataclass(frozen=True)
class Departure:
    """A way the experiments ``on`` (``report.figure``) depart from the paper that could decide the claim's
    verdict there: a stand-in, a mechanism that does not act, a rate not run. The README marks the claim's
    cell where such an experiment decides it, and the claim's detail says ``reason``, which follows the
    verdict in a sentence ("contradicted on an analogue where ..."). ``evaluates``: False where the
    analogue cannot show the claim at all, so the verdict there reads ``not evaluated: <reason>``.
    ``applies``: of the committed rows of the claim in one such experiment (``claims.csv``'s), whether the
    departure is true of them (a rate the runs have since run lifts it); always, unless given."""

    on: tuple[str, ...]
    reason: str
    evaluates: bool = True
    applies: Callable[[list[dict]], bool] | None = None


@dataclass(frozen=True)
class Claim:
    """A claim: our reading of it (``text``), the rule that checks it, what runs it needs, and the
    paper's own sentence (``quote``, exact; excerpts of one passage joined by `` [...] ``). ``extension``
    says of a comparison in a group why it lies beyond what the paper states (another data set, another
    backbone, a rate where the paper's own table has the claim fail), or ``""`` when the paper states it
    there. ``about``: the experiments (``report.figure``) the quoted passage is about, where the claim is
    judged; empty, every experiment that runs its methods. A sweep of no paper's experiment (a user's own)
    is judged by every claim (``claims.verdicts.judged_on``). ``rests_on``: the departures of its
    experiments that could decide its verdict there, which the README marks (:class:`Departure`)."""

    id: str
    paper: str
    text: str
    rule: str
    needs: str
    check: Callable[[Group], Outcome | None]
    quote: str = ""
    extension: Callable[[Group, Comparison], str] | None = None
    about: tuple[str, ...] = ()
    rests_on: tuple[Departure, ...] = ()


@dataclass(frozen=True)
class Comparison:
    """One paired comparison a claim makes: ``a - b`` by seed, ``a`` the side the paper says is larger
    (for a claim of equality, the verdict is ``equivalence``'s)."""

    what: str
    metric: str
    result: Paired
    verdict: str
    text: str
    # The two halves of the seeds, each judged alone (``statistics.halves``): (result, verdict) each.
    halves: tuple[tuple[Paired, str], tuple[Paired, str]] | None = None
    # The value the comparison's interval must clear to contradict the claim: 0, or a margin.
    against: float = 0.0
    # The column the comparison was made at (a noise rate, a lambda), for ``Claim.extension``.
    column: Any = None
    # What the side it is compared with stands in for (``BLMNN``): such a comparison decides nothing.
    stand_in: str = ""

    def p_contradicts(self, half: int | None = None) -> float:
        """The two-sided p of the test that can contradict the claim, on all seeds or on one half."""
        result = self.result if half is None or self.halves is None else self.halves[half][0]
        if self.against == 0:
            return result.p_value
        return result.p_against(self.against)

    def raw(self, half: int | None = None) -> str:
        """The verdict of the 95% interval alone, on all seeds or on one half."""
        if half is None:
            return self.verdict
        return self.halves[half][1] if self.halves is not None else INCONCLUSIVE


@dataclass(frozen=True)
class Outcome:
    """What a claim's check found: ``status`` is for a claim with no comparison (why it was not
    evaluated); ``rule`` makes the claim's verdict from its comparisons' verdicts (``combine`` unless the
    check knows better, e.g. a claim that cannot hold without a run it lacks)."""

    status: str
    detail: str
    comparisons: tuple[Comparison, ...] = ()
    rule: Callable[[list[str]], str] = combine


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
    (``noisydml-report --eta``). ``subtitle`` (the paper's own title, after ``title`` in its docs page's
    heading), ``about`` (what it is about, in a line) and ``reproduced`` (what of it the experiments
    reproduce) are the docs' words for it: its page, its place in the navigation and its row of the home
    page's table of papers are drawn from these records, so a paper's docs need no other file edited.
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
    subtitle: str = ""
    about: str = ""
    reproduced: str = ""
