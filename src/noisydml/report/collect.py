"""Read run directories into :class:`Run` records: finished, failed, or expected and never started.

A path given to the report is one of:

- a sweep directory (it holds ``multirun.yaml``): its jobs are every run directory below it, and the
  jobs it should hold are the cartesian product Hydra's basic sweeper draws from the sweep's overrides
  (``hydra.overrides.task``) and ``hydra.sweeper.params`` (one product per grid of its ``grids``); an
  expected job with no directory is *missing*;
- a run directory (it holds ``.hydra/`` or ``results.json``);
- any other folder: searched for both.

A folder ``noisydml-eval`` wrote (``status: evaluated``) holds a checkpoint's scores, not a run: it is no
job of a sweep and no row of a table; :func:`evaluations` names it, and the report says it left it out.

A run directory whose ``results.json`` says ``status: finished`` (``complete`` before that name) is
*complete*; one that says ``debug``, ``unselected``, ``stopped`` or ``diverged`` ran to its end but is *no
result* (its ``reason`` says why); any other is *failed*: its ``results.json`` says why (``error``: the
message of a failed run, or how an interrupted one stopped) when the run could write it,
and a directory without one is a crash that could not (SIGKILL, out of memory) or a run still going.
A job directory is matched to its expected job by its own ``.hydra/overrides.yaml``, compared value by
value (``False`` = ``false``, ``0.40`` = ``0.4``).

``embeddings.npz`` (optional, in a run directory) holds the run's test embeddings for the figures that
need them: ``embeddings`` (n x d floats), ``labels`` (n ints) and optionally ``paths`` (n strings, image
files, absolute or relative to the run directory) for a retrieval grid.
"""

from __future__ import annotations

import copy
import csv
import functools
import math
import os
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from noisydml import CONFIG_DIR
from noisydml.report import papers
from noisydml.report.records import COMPLETE, FAILED, MISSING, NO_RESULT, Diagnostic, Run, lookup
from noisydml.utils.metric_names import with_selected_names
from noisydml.utils.resolvers import run_name
from noisydml.utils.run_directory import (
    DEBUG,
    DIVERGED,
    EVALUATED,
    FINISHED,
    LEGACY_FINISHED,
    STOPPED,
    UNSELECTED,
    RunDir,
)

if TYPE_CHECKING:
    from hydra.core.override_parser.overrides_parser import OverridesParser

MULTIRUN_FILE = "multirun.yaml"
# The recorded statuses of a run that ran to its end but is no result of its config (an evaluations folder,
# EVALUATED, is no run at all: ``evaluations``): counted as NO_RESULT, not failed.
NOT_RESULTS = (DEBUG, UNSELECTED, STOPPED, DIVERGED)
# Logged once per epoch during training by every run that scores its per-sample loss
# (noisydml.callbacks.loss_detection): how well the highest losses find the flipped labels. The papers'
# methods log their own (Paper.diagnostics); the report reads the last value of each.
LOSS_DIAGNOSTICS = (
    Diagnostic("train/loss_auc", detection=("auc", "per-sample loss")),
    Diagnostic("train/loss_precision", detection=("precision", "highest losses, as many as flipped")),
    Diagnostic("train/loss_recall", detection=("recall", "highest losses, as many as flipped")),
)
# Logged at every validation by every run with the kNN label vote (noisydml.callbacks.knn_detection), the
# training-free reference: on the features the run starts from (the same for every method trained on the same
# noisy labels: REFERENCE_METRICS, drawn once per noise setting) and on each epoch's embedding (per method).
KNN_START, KNN_EMBEDDING = "kNN label vote, starting features", "kNN label vote, embedding"
KNN_DIAGNOSTICS = (
    Diagnostic("train/knn_start_auc", detection=("auc", KNN_START)),
    Diagnostic("train/knn_start_precision", detection=("precision", KNN_START)),
    Diagnostic("train/knn_start_recall", detection=("recall", KNN_START)),
    Diagnostic("train/knn_auc", detection=("auc", KNN_EMBEDDING)),
    Diagnostic("train/knn_precision", detection=("precision", KNN_EMBEDDING)),
    Diagnostic("train/knn_recall", detection=("recall", KNN_EMBEDDING)),
)
REFERENCE_METRICS = frozenset(d.metric for d in KNN_DIAGNOSTICS if d.detection[1] == KNN_START)


def canonical(value: Any) -> str:
    """A spelling of an override value that compares equal when the values are equal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(float(value)) if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{canonical(v)}" for k, v in sorted(value.items())) + "}"
    return str(value)


def parse_overrides(lines: list[str]) -> dict[str, Any]:
    """``["noise.rate=0.4", "miner=fixed_semihard"]`` -> ``{"noise.rate": 0.4, "miner": "fixed_semihard"}``,
    parsed with Hydra's own override grammar."""
    return dict(copy.deepcopy(_parse_override(str(line))) for line in lines)


@functools.lru_cache(maxsize=4096)
def _parse_override(line: str) -> tuple[str, Any]:
    # Hydra's grammar is slow (an ANTLR parse, some 25 ms a line) and a sweep's jobs repeat the same few
    # override lines; the callers get a copy, so that the cached value cannot be changed.
    (override,) = _parser().parse_overrides([line])
    return override.get_key_element(), override.value()


@functools.cache
def _parser() -> OverridesParser:
    # Building Hydra's grammar takes a while; a sweep has a job directory per override set.
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def expected_jobs(multirun: dict) -> list[dict[str, Any]] | None:
    """The jobs a sweep launches, each as its overrides, as Hydra's basic sweeper and the noisydml one draw
    them: the cartesian product of each key's values, the first key varying slowest; None when the sweep
    used another sweeper (whose jobs cannot be known in advance). Raises ``HydraException`` for a sweep
    they refuse (an interval)."""
    from hydra_plugins.noisydml_sweeper.noisydml_sweeper import PRODUCT_SWEEPERS, NoisydmlSweeper

    hydra_node = multirun.get("hydra") or {}
    sweeper = hydra_node.get("sweeper") or {}
    if str(sweeper.get("_target_", "")) not in PRODUCT_SWEEPERS:
        return None
    task = (hydra_node.get("overrides") or {}).get("task") or []
    jobs = NoisydmlSweeper.expand_sweeper(sweeper, task, _parser())
    return [parse_overrides(job) for job in jobs]


def signature(overrides: dict[str, Any], drop: tuple[str, ...] = ()) -> frozenset[tuple[str, str]]:
    """The overrides as a hashable set of canonical ``(key, value)`` pairs, without the keys in ``drop``."""
    return frozenset((k, canonical(v)) for k, v in overrides.items() if k not in drop)


def collect(paths: list[Path], evaluated: list[Path] | None = None) -> list[Run]:
    """Every run under ``paths``: complete, failed, and (for sweeps) missing jobs. A run reached twice
    (a sweep and one of its jobs both given) is read once. The folders ``noisydml-eval`` wrote are left
    out, and added to ``evaluated`` when it is given."""
    runs: list[Run] = []
    seen: set[Path] = set()
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist; give sweep directories or run directories")
        sweeps, records, scored = _discover(path)
        if evaluated is not None:
            evaluated += scored
        for sweep in sweeps:
            runs += _read_sweep(sweep, {d: r for d, r in records.items() if _is_under(d, sweep)}, seen)
        for run_dir, results in records.items():
            if run_dir.resolve() not in seen:
                seen.add(run_dir.resolve())
                runs.append(read_run(run_dir, results=results))
    return runs


def _discover(path: Path) -> tuple[list[Path], dict[Path, dict | None], list[Path]]:
    """Sweep directories, run directories with their ``results.json`` (None where there is none), and the
    folders of ``noisydml-eval``, at or below ``path``, in one walk that reads each record once; a run
    directory's own subfolders (checkpoints, csv, wandb) are not searched."""
    sweeps, records, scored = [], {}, []
    for root, dirs, files in os.walk(path):
        here = Path(root)
        if MULTIRUN_FILE in files:
            sweeps.append(here)
        if ".hydra" in dirs or RunDir(here).results.name in files:
            results = RunDir(here).read_results()
            if (results or {}).get("status") == EVALUATED:
                scored.append(here)
            else:
                records[here] = results
            dirs.clear()
        else:
            dirs.sort()
    return sweeps, records, scored


def _is_under(path: Path, parent: Path) -> bool:
    return path.resolve().is_relative_to(parent.resolve())


def _read_sweep(sweep: Path, records: dict[Path, dict | None], seen: set[Path]) -> list[Run]:
    multirun = _read_yaml(sweep / MULTIRUN_FILE)
    runs = []
    by_signature: dict[frozenset, Run] = {}
    for run_dir, results in records.items():
        if run_dir.resolve() in seen:
            continue
        seen.add(run_dir.resolve())
        run = read_run(run_dir, sweep=sweep, results=results)
        runs.append(run)
        by_signature.setdefault(signature(run.overrides), run)
    base = {k: v for k, v in multirun.items() if k != "hydra"}
    base_choices = (((multirun.get("hydra") or {}).get("runtime") or {}).get("choices")) or {}
    for job in _expected_or_warn(sweep, multirun):
        if signature(job) not in by_signature:
            config, choices = _never_run(base, base_choices, job)
            runs.append(Run(None, MISSING, job, with_choices(config, choices), choices, sweep=sweep))
    return runs


def _expected_or_warn(sweep: Path, multirun: dict) -> list[dict[str, Any]]:
    from hydra.errors import HydraException

    try:
        jobs = expected_jobs(multirun)
    except HydraException as error:
        warnings.warn(
            f"{sweep / MULTIRUN_FILE}: cannot expand its overrides ({error}); jobs that never "
            "started are not listed",
            stacklevel=3,
        )
        return []
    if jobs is None:
        warnings.warn(
            f"{sweep / MULTIRUN_FILE}: not Hydra's basic sweeper, so the jobs it would launch are "
            "unknown; jobs that never started are not listed",
            stacklevel=3,
        )
        return []
    return jobs


def _never_run(base: dict, base_choices: dict, job: dict[str, Any]) -> tuple[dict, dict[str, Any]]:
    """What can be known of a job that never ran: the sweep's base config and group options, with the
    job's own group overrides. A ``method`` override is composed (:func:`method_config`: its loss, miner
    and ``report.method``); without such a method its loss and miner stay unknown."""
    choices = {k: v for k, v in base_choices.items() if not k.startswith("hydra/")}
    choices.update({k: v for k, v in job.items() if k in choices})
    if "method" not in job or job["method"] == base_choices.get("method"):
        return base, choices
    choices.pop("loss", None)
    choices.pop("miner", None)
    groups, label = method_config(str(job["method"]))
    choices.update(groups)
    return {**base, "report": {**(base.get("report") or {}), "method": label}}, choices


# What an unresolved config (a sweep's multirun.yaml, a crashed run's .hydra/config.yaml) holds where a
# per-paper protocol derives a value from the experiment chosen: conf/protocol/*.yaml's name and figure.
_CHOICE = re.compile(r"\$\{hydra:runtime\.choices\.([\w/]+)\}")
_RUN_NAME = re.compile(r"\$\{noisydml\.run_name:([^${}]*)\}")


def with_choices(config: Any, choices: dict[str, Any]) -> Any:
    """``config`` with the group choices it interpolates filled in, as a run resolves them (``report.figure:
    ${hydra:runtime.choices.experiment}``, ``name: ${noisydml.run_name:...}``); other values unchanged."""
    if isinstance(config, dict):
        return {key: with_choices(value, choices) for key, value in config.items()}
    if isinstance(config, list):
        return [with_choices(value, choices) for value in config]
    if isinstance(config, str) and "${" in config:
        config = _CHOICE.sub(lambda m: str(choices.get(m.group(1), m.group(0))), config)
        return _RUN_NAME.sub(lambda m: run_name(m.group(1)), config)
    return config


def method_config(option: str) -> tuple[dict[str, str], str | None]:
    """The groups ``method=<option>`` sets (``loss: triplet``, ...) and its ``report.method``, composed
    from the project's conf/ folder with Hydra's compose API; nothing when there is no such method."""
    from hydra.errors import HydraException

    try:
        plain, chosen = _composed_choices(None), _composed_choices(option)
    except HydraException:
        return {}, None
    # Its loss and miner always (a method names both), and any other group it changes.
    groups = {
        group: value
        for group, value in chosen[0].items()
        if group in ("loss", "miner") or (group != "method" and plain[0].get(group) != value)
    }
    return groups, chosen[1].get("method")


def declared_baselines(run: Run) -> list[str]:
    """The ``method=`` options a run's method is compared with: its paper's (``report.baselines``: the run's
    own config, else, for runs written before the key existed, what the project's
    ``conf/method/<method>.yaml`` declares now), then the experiment's references (``report.references``,
    the training-free reference of the noisy_dml comparisons) but the method itself; empty for a run
    without a method or a method without a baseline."""
    declared = lookup(run.config, "report.baselines") if run.has_config else None
    if declared is None and run.choice("method"):
        from hydra.errors import HydraException

        try:
            declared = _composed_choices(str(run.choice("method")))[1].get("baselines")
        except HydraException:
            declared = None
    # The experiment's, so a missing job's sweep config holds them too.
    references = lookup(run.config, "report.references") or ()
    found = [str(option) for option in declared or ()]
    own = str(run.choice("method"))
    return found + [str(option) for option in references if str(option) not in (own, *found)]


@functools.cache
def _composed_choices(method: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The group choices and the ``report`` node of the project's config, with ``method=<method>``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()
    overrides = [f"method={method}"] if method else []
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    GlobalHydra.instance().clear()
    choices = {k: v for k, v in cfg.hydra.runtime.choices.items() if not k.startswith("hydra")}
    return choices, OmegaConf.to_container(cfg.report)


def read_run(run_dir: Path, sweep: Path | None = None, results: dict | None = None) -> Run:
    """One run directory: its status, overrides, config, group choices and its metrics (``results``: its
    ``results.json`` where already read). The choices come from ``results.json``; runs written before it
    recorded them, and runs that crashed without writing it, fall back to Hydra's record in
    ``.hydra/hydra.yaml``."""
    run = RunDir(run_dir)
    overrides = parse_overrides(_read_yaml(run.overrides) or []) if run.overrides.is_file() else {}
    results = results if results is not None else run.read_results() or {}
    choices = results.get("choices")
    if choices is None and run.hydra_config.is_file():
        choices = (((_read_yaml(run.hydra_config) or {}).get("hydra") or {}).get("runtime") or {}).get(
            "choices"
        )
    choices = dict(choices or {})
    tested = {
        k: float(v) for k, v in with_selected_names(results.get("metrics") or {}).items() if _is_number(v)
    }
    if results.get("status") in (FINISHED, LEGACY_FINISHED) and tested:
        metrics = {**tested, **last_logged(run_dir)}
        config = results.get("config") or {}
        noise = results.get("noise") or {}
        return Run(run.path, COMPLETE, overrides, config, choices, metrics, sweep, noise=noise)
    config = results.get("config") or with_choices(
        (_read_yaml(run.config) or {}) if run.config.is_file() else {}, choices
    )
    status = NO_RESULT if results.get("status") in NOT_RESULTS else FAILED
    return Run(run.path, status, overrides, config, choices, {}, sweep, error=failure(results, run))


def failure(results: dict, run: RunDir | None = None) -> str:
    """Why a run did not finish or is no result, in a line: its recorded status and error or reason, that its
    record is damaged or holds no metrics, or that it left no record."""
    if run is not None and (damage := run.damage()) is not None:
        return (
            f"damaged results.json: it {damage}; the run's end is unknown: continue it with "
            f"{run.resume_command()}, or delete the file to run it again"
        )
    if results.get("status") in (FINISHED, LEGACY_FINISHED):
        return (
            f"{results['status']} but results.json holds no test metrics, so it is not counted; run it again "
            "(delete its results.json)"
        )
    if not results:
        return "no results.json: killed before it could write one (SIGKILL, out of memory) or still running"
    # A run that ran to its end but is no result (debug, unselected) says why in ``reason``.
    status = results.get("status", "?")
    error = str(results.get("error") or results.get("reason") or "").strip()
    text = f"{status}: {error.splitlines()[0] if error else results.get('error_type', '')}"
    return f"{text} (resume: {results['resume']})" if results.get("resume") else text


def epoch_metrics() -> tuple[str, ...]:
    """The per-epoch diagnostics the report reads: the papers' methods', then the per-sample loss's and the
    kNN label vote's."""
    return tuple(d.metric for d in (*papers.diagnostics(), *LOSS_DIAGNOSTICS, *KNN_DIAGNOSTICS))


def last_logged(run_dir: Path, names: tuple[str, ...] | None = None) -> dict[str, float]:
    """The last value of each of ``names`` (unset: ``epoch_metrics()``) logged in ``csv/metrics.csv``
    (rows hold blanks where a step logged other metrics)."""
    path = RunDir(run_dir).metrics_csv
    if not path.is_file():
        return {}
    names = epoch_metrics() if names is None else names
    found: dict[str, float] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            for name in names:
                if _is_number(row.get(name)):
                    found[name] = float(row[name])
    return found


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or value is None or value == "":
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


# libyaml's loader where PyYAML was built with it: hydra.yaml is long and a sweep has many.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> Any:
    with path.open() as f:
        return yaml.load(f, Loader=_LOADER)
