"""The seeds each reproduction's experiment registered before its confirmatory run (``report.seeds``, and
``report.pilot``, the seeds whose outcomes sized them), read from the experiment files, so that a committed
verdict on other seeds (a pilot, or seeds chosen after an outcome was seen) is marked, not read as the
confirmatory one.

The files are read as written, a parent experiment's keys (``defaults: - /experiment/<parent>``) under the
child's, without Hydra's composition: the README is drawn without composing twenty configs."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from noisydml import CONFIG_DIR
from noisydml.report.records import Departure


@dataclass(frozen=True)
class Registration:
    """An experiment's registered seeds (``report.seeds``), the pilot that sized them (``report.pilot``,
    empty when none was declared) and the seeds its sweep runs (``hydra.sweeper.params`` and ``grids``)."""

    experiment: str
    seeds: tuple[int, ...]
    pilot: tuple[int, ...]
    swept: tuple[int, ...]


def _read(path: Path) -> dict:
    """The experiment file's keys, over its parent experiment's (one level of ``defaults`` at a time)."""
    own = yaml.safe_load(path.read_text()) or {}
    merged: dict = {}
    for entry in own.get("defaults") or ():
        if isinstance(entry, str) and entry.startswith("/experiment/"):
            merged = _merge(merged, _read(CONFIG_DIR / f"{entry.removeprefix('/')}.yaml"))
    return _merge(merged, {k: v for k, v in own.items() if k != "defaults"})


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = (
            _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


def _seeds(value) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(int(s) for s in value.split(","))
    if isinstance(value, int):
        return (value,)
    return tuple(int(s) for s in value)


@functools.lru_cache(maxsize=2)
def registrations(root: Path = CONFIG_DIR) -> dict[str, Registration]:
    """Every experiment that registers its seeds, by the figure it reports under (``report.figure``)."""
    found = {}
    for path in sorted((root / "experiment").rglob("*.yaml")):
        config = _read(path)
        report = config.get("report") or {}
        if report.get("seeds") is None or not report.get("figure"):
            continue
        sweeper = (config.get("hydra") or {}).get("sweeper") or {}
        # The params' seeds, and each grid's (a comparison's focused methods and the rest at fewer seeds).
        sweeps = [sweeper.get("params") or {}, *(sweeper.get("grids") or {}).values()]
        swept = sorted({s for sweep in sweeps for s in _seeds((sweep or {}).get("seed"))})
        experiment = path.relative_to(root / "experiment").with_suffix("").as_posix()
        found[str(report["figure"])] = Registration(
            experiment, _seeds(report["seeds"]), _seeds(report.get("pilot")), tuple(swept)
        )
    return found


def exploratory(figure: str, seeds) -> bool:
    """Whether a comparison of the experiment reported as ``figure``, on ``seeds`` (those both its methods
    ran), is exploratory: the experiment registers seeds and these are not all of them (a method swept at
    fewer seeds, its pilot's, or a run missing). An experiment that registers none has nothing to mark."""
    registration = registrations().get(figure)
    return registration is not None and {int(float(s)) for s in seeds} != set(registration.seeds)


def ran(rows: list[dict]) -> set[int]:
    """The seeds a committed claims.csv's rows ran on (its ``seeds`` column, ``"0.0 1.0 ..."``)."""
    return {int(float(s)) for row in rows for s in (row.get("seeds") or "").split()}


def unregistered(figure: str, seeds: set[int]) -> Departure | None:
    """A departure when ``seeds`` are not exactly the registered seeds of the experiment reported as
    ``figure``: at its pilot, or at seeds no file registered. None when they are, or it registers none."""
    registration = registrations().get(figure)
    if registration is None or not seeds or seeds == set(registration.seeds):
        return None
    where = f"report.seeds of conf/experiment/{registration.experiment}.yaml: {_span(registration.seeds)}"
    kind = "its pilot's" if seeds <= set(registration.pilot) else "other"
    return Departure(
        (figure,),
        f"on {kind} seeds ({_span(sorted(seeds))}), not the ones registered for its confirmatory run "
        f"({where}): exploratory",
    )


def apart(rows: list[dict], cell: Callable[[list[dict]], str]) -> str:
    """``cell`` of a committed comparisons.csv's confirmatory rows, then, after ``exploratory:``, of those it
    marks exploratory (off the registered seeds), so that no exploratory verdict reads as a confirmatory
    one (the README's cells)."""
    exploratory = [r for r in rows if r.get("exploratory") == "yes"]
    confirmatory = [r for r in rows if r.get("exploratory") != "yes"]
    if not exploratory:
        return cell(confirmatory)
    text = f"exploratory: {cell(exploratory)}"
    return f"{cell(confirmatory)}; {text}" if confirmatory else text


def _span(seeds) -> str:
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))
