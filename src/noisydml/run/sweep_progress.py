"""A line per job of a sweep as it ends, and what a sweep stopped partway (Ctrl-C, SIGTERM, a failed job)
has done, with the one command that continues it; both Hydra callbacks (``conf/hydra/default.yaml``).

Hydra's basic launcher reports only the first failure, after every job ran: :class:`JobSummary` reads each
job's ``results.json`` as it ends and says it finished, or why it failed and where its traceback is.
:class:`SweepProgress` notes the sweep's jobs as it starts, with the sweeper's own expansion of the
overrides (:meth:`NoisydmlSweeper.expand`, Hydra's basic sweep), and each job as it starts; the ``noisydml``
command prints :func:`summary` when the sweep ends before its last job did. The command is the one given,
in the sweep's folder (``hydra.sweep.dir``): its finished jobs are skipped (their folders hold their
results), an interrupted one continues from its checkpoint, the rest run. Without ``hydra.sweep.dir`` the
same command would start a new, timestamped folder and run everything again.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.noisydml_sweeper.noisydml_sweeper import PRODUCT_SWEEPERS, NoisydmlSweeper
from noisydml.utils.run_directory import FAILED, FINISHED, LEGACY_FINISHED, RunDir

BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


@dataclass
class Sweep:
    """The sweep in progress in this process: its folder, its jobs' overrides (None where the sweeper
    chooses them as it goes, as Optuna does) and the folder of each job started."""

    folder: Path
    jobs: list[list[str]] | None
    started: dict[int, Path] = field(default_factory=dict)


_sweep: Sweep | None = None
# A job started and neither finished nor failed was stopped partway (its results.json says so, or
# "running" after a kill outright).
STATES = {FINISHED: "finished", LEGACY_FINISHED: "finished", FAILED: "failed"}


class SweepProgress(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        global _sweep
        if config.hydra.launcher.get("_target_") != BASIC_LAUNCHER:
            # Jobs launched in other processes (submitit, joblib) start out of this one's sight.
            return
        _sweep = Sweep(Path(str(config.hydra.sweep.dir)), _jobs(config))

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if _sweep is not None and HydraConfig.initialized():
            hydra = HydraConfig.get()
            _sweep.started[int(hydra.job.num)] = Path(hydra.runtime.output_dir)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        global _sweep
        _sweep = None


class JobSummary(Callback):
    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        hydra = HydraConfig.get()
        if hydra.mode != RunMode.MULTIRUN:
            return
        run = RunDir(hydra.runtime.output_dir)
        results = run.read_results() or {}
        job = f"job {hydra.job.num} ({' '.join(job_return.overrides) or 'no overrides'})"
        if results.get("status") in (FINISHED, LEGACY_FINISHED):
            print(f"{job}: finished", flush=True)
            return
        error = str(results.get("error") or "no results.json written").splitlines()[0]
        where = f"; traceback in {run.traceback}" if run.traceback.is_file() else ""
        print(f"{job}: {results.get('status', 'failed')}: {error}{where}", flush=True)


def _jobs(config: DictConfig) -> list[list[str]] | None:
    """Each job's overrides, as the basic sweeper expands them; None for another sweeper."""
    sweeper = config.hydra.sweeper
    if sweeper.get("_target_") not in PRODUCT_SWEEPERS:
        return None
    task = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
    try:
        return NoisydmlSweeper.expand_sweeper(sweeper, task)
    except Exception:
        # A sweep the sweeper itself refuses (it says why); nothing to list.
        return None


def summary(argv: list[str]) -> str | None:
    """The jobs of the sweep this process stopped partway, by state, and the command that continues it
    (``argv``: the command's arguments); None when no sweep is under way, or when its sweeper refused it
    before writing its folder (it said why)."""
    if _sweep is None or not _sweep.folder.is_dir():
        return None
    count = len(_sweep.jobs) if _sweep.jobs is not None else max(_sweep.started, default=-1) + 1
    states: dict[str, list[str]] = {"finished": [], "failed": [], "interrupted": [], "never started": []}
    folders: set[Path] = set()
    for num in range(count):
        name = f"job {num}" + (f" ({' '.join(_sweep.jobs[num])})" if _sweep.jobs is not None else "")
        if num not in _sweep.started:
            states["never started"].append(name)
            continue
        folder = Path(_sweep.started[num]).resolve()
        status = (RunDir(folder).read_results() or {}).get("status")
        # A job whose folder an earlier job took (hydra.sweep.subdir=${seed} in a sweep of rates) was
        # refused there: the record is the earlier job's.
        state = "failed" if folder in folders else STATES.get(status, "interrupted")
        folders.add(folder)
        states[state].append(name)
    if _sweep.jobs is None:
        states["never started"].append("those the sweeper had yet to choose")
    lines = [f"the sweep in {_sweep.folder.resolve()} stopped before its end:"]
    lines += [f"  {state}: {', '.join(jobs)}" for state, jobs in states.items() if jobs]
    lines += ["continue it (finished jobs are skipped, an interrupted one resumes) with:"]
    lines += [f"  {continue_command(argv, _sweep.folder)}"]
    return "\n".join(lines)


def continue_command(argv: list[str], folder: Path) -> str:
    """``noisydml`` with ``argv``, in the sweep's folder ``folder``."""
    kept = [a for a in argv if not a.startswith("hydra.sweep.dir=")]
    path = str(folder.resolve())
    if not re.fullmatch(r"[\w/.+-]+", path):
        # Hydra's grammar reads a quoted value as it is.
        path = "'" + path.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return shlex.join(["noisydml", *kept, f"hydra.sweep.dir={path}"])
