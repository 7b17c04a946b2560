"""``noisydml``: the Hydra command line. Light on imports, so ``--help`` and ``--cfg job`` answer at once:
torch and Lightning load only when a run starts (:mod:`noisydml.run.train`).

``noisydml resume=<run dir>`` continues a run by its directory: its own overrides (from
``.hydra/overrides.yaml``) in that directory, from its last checkpoint; overrides given beside it are
applied after the stored ones (``resume_from=previous``, ``resume=never`` to start it over).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import hydra
import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from noisydml import CONFIG_DIR
from noisydml.numerics import apply_numerics
from noisydml.run import sweep_progress
from noisydml.run.checks.arguments import check_arguments, check_search_arguments, check_search_direction
from noisydml.utils import resolvers  # noqa: F401  (registers the config's resolvers)
from noisydml.utils.errors import BadInput, DiskFull
from noisydml.utils.metric_names import selected
from noisydml.utils.quiet import silence_known_noise
from noisydml.utils.run_directory import RunDir

# How to continue a run, not what it computes: never carried over from a run's stored overrides.
RESUME_KEYS = ("resume", "resume_from")


def resume_arguments(argv: list[str]) -> list[str]:
    """``argv`` with ``resume=<run dir>`` replaced by that run's overrides and ``hydra.run.dir=<run dir>``;
    ``argv`` itself when it names no directory (``resume=auto`` / ``never`` are config values)."""
    given = [a for a in argv if a.startswith("resume=") and a.split("=", 1)[1] not in ("auto", "never")]
    if not given:
        return argv
    run_dir = Path(given[-1].split("=", 1)[1]).expanduser()
    stored = RunDir(run_dir).overrides
    if not stored.is_file():
        sys.exit(
            f"resume={run_dir}: no run directory there ({stored} not found); give the directory a run "
            "printed, e.g. outputs/runs/default/<time>, or resume=auto / resume=never"
        )
    if (search := search_of(run_dir)) is not None:
        sys.exit(
            f"resume={run_dir}: the folder is a trial of the search in {search}, which chose its values "
            "from the trials it saw: continued alone, its score would never reach the study; run the search "
            "again (its command, with -m) for a study that sees every trial"
        )
    rest = [a for a in argv if a not in given]
    if moved := [a for a in rest if a.lstrip("+").startswith(("hydra.run.dir=", "hydra.sweep.dir="))]:
        sys.exit(
            f"resume={run_dir} continues that run in its own folder, so {moved[0]} would not be read; drop "
            f"{moved[0].split('=', 1)[0]} (a new run of its config in another folder: its overrides without "
            "resume=, with hydra.run.dir=...)"
        )
    return [*stored_overrides(run_dir), *rest, f"hydra.run.dir={quoted(run_dir)}"]


def search_of(run_dir: Path) -> str | None:
    """The sweep folder of the search (a sweeper with a ``direction``: Optuna's) whose trial ``run_dir``
    is, as its Hydra record says; None for a single run or a job of a grid."""
    record = RunDir(run_dir).hydra_config
    hydra = (yaml.safe_load(record.read_text()) or {}).get("hydra", {}) if record.is_file() else {}
    sweeper = hydra.get("sweeper") or {}
    if hydra.get("mode") != "MULTIRUN" or "direction" not in sweeper:
        return None
    return str((hydra.get("sweep") or {}).get("dir") or run_dir.parent)


def stored_overrides(run_dir: Path) -> list[str]:
    """The overrides a run was started with (``.hydra/overrides.yaml``), less how to continue it."""
    stored = yaml.safe_load(RunDir(run_dir).overrides.read_text()) or []
    return [o for o in stored if o.split("=", 1)[0] not in RESUME_KEYS]


def quoted(path: Path) -> str:
    """A path as a quoted override value: a sweep job's directory is named by its overrides (commas,
    equals signs)."""
    text = str(path).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="config")
def run_hydra(cfg: DictConfig) -> float | None:
    """Hydra's main on ``sys.argv`` (called without arguments): compose, then one run or a sweep of them."""
    # Before the trainer's imports: faiss logs as it loads.
    silence_known_noise()
    try:
        check_search_direction(cfg)
        # Before torch loads: it picks its kernels as it does.
        apply_numerics(cfg.get("numerics", "native"))
        from noisydml.run.train import train

        metrics = train(cfg)
    except (BadInput, DiskFull) as error:
        # A single run's refusal is its one line (the traceback is in the run's error.log): Hydra would add
        # its HYDRA_FULL_ERROR hint. A sweep's job is named in the sweep's summary, so Hydra says it there.
        if HydraConfig.get().mode == RunMode.RUN and not os.environ.get("HYDRA_FULL_ERROR"):
            sys.exit(str(error))
        raise
    # A sweeper (Optuna) maximises the selected epoch's score, which selection maximised.
    return metrics.get(selected(cfg.get("optimized_metric") or ""))


# What only prints (help, the config, Hydra's information): cut short by a reader (| head), it ends as
# Unix tools do, without a traceback. A run keeps Python's default, so a closed pipe never kills it.
PRINTING = ("--help", "-h", "--hydra-help", "--info", "-i", "--cfg", "-c", "--shell-completion", "-sc")


def main() -> None:
    """The ``noisydml`` command."""
    if any(a in PRINTING for a in sys.argv[1:]):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    arguments = resume_arguments(sys.argv[1:])
    if scored := [
        a for a in arguments if a.startswith("ckpt_path=") and a.split("=", 1)[1] not in ("", "null")
    ]:
        # Built from the defaults and any key given, an evaluation would record keys it never read.
        sys.exit(
            f"{scored[-1]} scores a checkpoint without training; evaluate it with noisydml-eval "
            f"{scored[-1]}, which builds the network with its run's overrides and takes only what an "
            "evaluation reads"
        )
    try:
        # A search's values first: a bad one is refused as such, with or without -m.
        check_search_arguments(arguments)
        check_arguments(arguments)
    except BadInput as error:
        sys.exit(str(error))
    sys.argv[1:] = arguments
    run_until_stopped(arguments)


def run_until_stopped(arguments: list[str]) -> None:
    """Hydra's main; a sweep stopped before its end (Ctrl-C, a signal, a failed job) says which jobs
    finished, which did not, and the one command that continues it."""
    try:
        run_hydra()
    except (KeyboardInterrupt, SystemExit) as stop:
        ended = isinstance(stop, SystemExit) and stop.code in (0, None)
        if not ended and (done := sweep_progress.summary(arguments)) is not None:
            print(f"\n{done}", file=sys.stderr, flush=True)
        raise
