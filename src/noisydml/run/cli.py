"""``noisydml``: the Hydra command line. Light on imports, so ``--help`` and ``--cfg job`` answer at once:
torch and Lightning load only when a run starts (:mod:`noisydml.run.train`).

``noisydml resume=<run dir>`` continues a run by its directory: its own overrides (from
``.hydra/overrides.yaml``) in that directory, from its last checkpoint; overrides given beside it are
applied after the stored ones (``resume_from=previous``, ``resume=never`` to start it over).
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import hydra
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException, OverrideParseException
from omegaconf import DictConfig

from hydra_plugins.noisydml_sweeper.noisydml_sweeper import sweep_values
from noisydml import CONFIG_DIR
from noisydml.run import sweep_progress
from noisydml.run.checks.folders import check_folder_argument
from noisydml.run.numerics import apply_numerics
from noisydml.utils import resolvers  # noqa: F401  (registers the config's resolvers)
from noisydml.utils.checks import check_writable
from noisydml.utils.errors import BadInput
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
    rest = [a for a in argv if a not in given]
    return [*stored_overrides(run_dir), *rest, f"hydra.run.dir={quoted(run_dir)}"]


def stored_overrides(run_dir: Path) -> list[str]:
    """The overrides a run was started with (``.hydra/overrides.yaml``), less how to continue it."""
    stored = yaml.safe_load(RunDir(run_dir).overrides.read_text()) or []
    return [o for o in stored if o.split("=", 1)[0] not in RESUME_KEYS]


def quoted(path: Path) -> str:
    """A path as a quoted override value: a sweep job's directory is named by its overrides (commas,
    equals signs)."""
    text = str(path).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


# The longest file name most file systems take: name= is a folder of the run's path.
NAME_MAX = 255


def check_arguments(argv: list[str]) -> None:
    """What Hydra would refuse with a traceback or a list, or accept and fail on later, refused in one line
    before it starts: an override it cannot parse, an unknown group option (with the closest one), a
    ``name=`` too long for a folder, a run or sweep folder that cannot be written."""
    parser = OverridesParser.create()
    # The longest "key=value" of each override a sweep job's folder is named by (conf/hydra/default.yaml).
    job_name_parts = []
    excluded = _sweep_folder_excludes()
    for argument in (a for a in argv if "=" in a and not a.startswith("-")):
        try:
            (override,) = parser.parse_overrides([argument])
        except OverrideParseException as error:
            reason = str(error).splitlines()[0]
            key, value = argument.split("=", 1)
            raise BadInput(
                f"{argument} cannot be read ({reason}); quote a value with spaces, brackets or non-ASCII "
                f"characters for Hydra, e.g. \"{key}='{value}'\""
            ) from None
        key = override.key_or_group
        try:
            values = (
                sweep_values(override)
                if override.is_sweep_override()
                else [override.get_value_element_as_str()]
            )
        except BadInput:
            raise
        except HydraException:
            # An interval (an Optuna search space) has no values to list; its sweeper checks it.
            continue
        named = values
        if isinstance(override.value(), list):
            # Several options of one group at once (logger=[csv,wandb,mlflow]): each must be one.
            values = [str(v) for v in override.value()]
        if (CONFIG_DIR / key).is_dir() and not key.startswith("hydra") and not override.is_delete():
            for value in values:
                _check_option(key, value)
        if key == "name" and any(len(v.encode()) > NAME_MAX for v in values):
            raise BadInput(
                f"name={values[0][:40]}... is longer than the {NAME_MAX} bytes a folder name may have (runs "
                "go in outputs/runs/<name>/); use a shorter name="
            )
        if key in ("hydra.run.dir", "hydra.sweep.dir") and not override.is_sweep_override():
            check_writable(Path(values[0]).expanduser(), key, f"{key}=...", keep=False)
            # The value itself, unquoted ('a,b=c' names a sweep job's folder).
            check_folder_argument(key, Path(str(override.value())).expanduser())
        if not key.startswith("hydra") and key not in excluded:
            prefix = argument[: len(argument) - len(argument.lstrip("+~"))]
            job_name_parts.append(max(len(f"{prefix}{key}={v}".encode()) for v in named or [""]))
    _check_job_folder_name(argv, job_name_parts)


def _sweep_folder_excludes() -> list[str]:
    """The overrides that do not name a sweep job's folder, as conf/hydra/default.yaml lists them."""
    hydra_config = yaml.safe_load((CONFIG_DIR / "hydra" / "default.yaml").read_text())
    return hydra_config["job"]["config"]["override_dirname"]["exclude_keys"]


def _check_job_folder_name(argv: list[str], parts: list[int]) -> None:
    """In a sweep each job's folder is named by its overrides: refuse a sweep whose longest job folder name
    no file system takes, before any job runs (it failed with a traceback as the first job started)."""
    sweep = any(a in ("-m", "--multirun") for a in argv)
    named_otherwise = any(a.startswith("hydra.sweep.subdir=") for a in argv)
    longest = sum(parts) + max(len(parts) - 1, 0)
    if sweep and not named_otherwise and longest > NAME_MAX:
        raise BadInput(
            f"a sweep job's folder is named by its overrides, and the longest would be {longest} bytes, more "
            f"than the {NAME_MAX} a folder name may have; name the job folders by number with "
            "'hydra.sweep.subdir=${hydra.job.num}', or shorten the overrides"
        )


def _check_option(group: str, option: str) -> None:
    if option == "null" or (CONFIG_DIR / group / f"{option}.yaml").is_file():
        return
    options = sorted(
        str(p.relative_to(CONFIG_DIR / group).with_suffix("")) for p in (CONFIG_DIR / group).rglob("*.yaml")
    )
    close = difflib.get_close_matches(option, options, n=1, cutoff=0.5)
    hint = f"; did you mean {group}={close[0]}?" if close else ""
    shown = ", ".join(options) if len(options) <= 20 else f"the {len(options)} files of conf/{group}/"
    raise BadInput(f"{group}={option} is not an option{hint} (options: {shown})")


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="config")
def _run(cfg: DictConfig) -> float | None:
    # Before the trainer's imports: faiss logs as it loads.
    silence_known_noise()
    # Before torch loads: it picks its kernels as it does.
    apply_numerics(cfg.get("numerics", "native"))
    from noisydml.run.train import train

    metrics = train(cfg)
    # A sweeper (Optuna) maximises the selected epoch's score, which selection maximised.
    return metrics.get(selected(cfg.get("optimized_metric") or ""))


def run_hydra() -> None:
    """Hydra's main on ``sys.argv``: compose, then one run or a sweep of them."""
    _run()


def main() -> None:
    """The ``noisydml`` command."""
    arguments = resume_arguments(sys.argv[1:])
    try:
        check_arguments(arguments)
        sweep_progress.check_search_arguments(arguments)
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
