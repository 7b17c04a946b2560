"""A run writes only into its own folder: never into, below or over another run's, by any path key, and
never above its own; a checkpoint folder pointed at another run's would overwrite its ``best.ckpt``, the
weights its results were tested with. Checked before anything is written (:func:`check_run_folder`,
:func:`check_run_directory`), in pre-flight (:func:`check_paths`) and of the built writers
(:func:`check_writers`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from functools import reduce
from pathlib import Path
from typing import Any

from noisydml.run.checks.walk import ABSENT, leaves
from noisydml.utils.checks import check_writable
from noisydml.utils.errors import BadInput
from noisydml.utils.run_directory import RunDir, is_run, run_holding

# The sections of the config whose nodes write files: callbacks, loggers, the trainer (a profiler).
WRITING_SECTIONS = ("callbacks", "logger", "trainer")
# How deep below a run directory another run is looked for: a sweep's jobs are one level down, a
# name/time run folder two, outputs/ three.
DEPTH = 4
# A sweep's own files: Hydra's record, written as the sweep starts, the values scripts/reproduce.py tuned
# for it, written before (the report reads both), and a search's result (Optuna's sweeper).
SWEEP_FILES = ("multirun.yaml", "tuning.json", "optimization_results.yaml")


def check_run_folder(run: RunDir, sweep: Path | None = None) -> None:
    """The run directory, as :func:`check_folder_argument` checks it, and a sweep job's inside its sweep's
    folder (``hydra.sweep.subdir=../..`` would put it elsewhere); the empty folder Hydra made for a refused
    one is removed, so the other run is left as it was found. Then it can be created and written."""
    try:
        check_folder_argument("hydra.run.dir", run.path)
        if sweep is not None and sweep.resolve() not in run.path.resolve().parents:
            raise BadInput(
                f"hydra.sweep.subdir puts this job in {run.path}, outside its sweep's folder {sweep}, where "
                "the report and the sweep's summary never see it; name job folders below it, e.g. "
                "hydra.sweep.subdir=${hydra.job.num}"
            )
    except BadInput:
        with contextlib.suppress(OSError):
            run.path.resolve().rmdir()
        raise
    check_writable(run.path, "paths.output_dir", "hydra.run.dir=... (or hydra.sweep.dir=...)")


def check_folder_argument(key: str, folder: Path) -> None:
    """``hydra.run.dir`` / ``hydra.sweep.dir``, before anything is written into it (a sweep's
    multirun.yaml): inside no other run's folder, and a run's holding no run below it. A sweep folder may
    hold runs, its own jobs (a sweep run again skips those that finished). A folder that holds files but is
    no run's (no sweep's) is refused too: ``hydra.run.dir=.`` would write a run among a project's files."""
    path = folder.resolve()
    outer = run_holding(path.parent)
    run = key == "hydra.run.dir"
    new = f"drop {key} for a new outputs/{'runs' if run else 'sweeps'}/<name>/<time>"
    if outer is not None:
        raise BadInput(
            f"{key}={folder} is inside the run folder {outer}, whose files it would mix with and where the "
            f"report never sees it; choose a folder outside every run, or {new}"
        )
    if not run and is_run(path):
        raise BadInput(
            f"{key}={folder} is a run's folder, which a sweep's files and jobs would mix with; choose a "
            f"folder outside every run, or {new}"
        )
    if run and (inner := _run_below(path)) is not None:
        raise BadInput(
            f"{key}={folder} holds the run {inner} below it, which this run would write over; choose a new "
            f"folder, or {new}"
        )
    if path.is_dir() and not is_run(path) and (entries := sorted(p.name for p in path.iterdir())):
        # A folder of something else (``.``, ``~``, a project's): the run's files would land among its own.
        own, what = (RunDir(path).own_names(), "run") if run else (set(SWEEP_FILES), "sweep")
        # A search's folder (Optuna's) has no multirun.yaml: its trials' folders say whose it is.
        jobs = not run and any(is_run(path / entry) for entry in entries)
        if not own.intersection(entries) and not jobs:
            shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
            raise BadInput(
                f"{key}={folder} is no {what}'s folder but holds {shown}, among which this {what}'s files "
                f"would be written; choose a new or empty folder, or {new}"
            )


def check_paths(resolved: dict, run_dir: Path) -> None:
    """Over the resolved config: every folder the run's callbacks, loggers and trainer write (a ``dir`` or
    ``dirpath`` key) can be written (probed, leaving the disk as it was) and lies in its run directory; a
    folder runs share (``cache_dir``: the instance-dependent noise's classifier outputs) lies in no run's
    folder, whose files it would mix with, and one not there yet (a cache, a download's ``root``) can be
    created, naming the data folder that holds it; the checkpoint an evaluation reads (``ckpt_path``) is a
    file."""
    folders = [
        (key, value)
        for section in WRITING_SECTIONS
        for key, value in leaves(resolved.get(section, ABSENT), section)
        if isinstance(value, str) and key.rsplit(".", 1)[-1].endswith(("dir", "dirpath"))
    ]
    for key, value in folders:
        check_writable(Path(value).expanduser(), key, f"{key}=...", keep=False)
    root = run_dir.resolve()
    for key, value in folders:
        folder = Path(value).expanduser()
        folder = (folder if folder.is_absolute() else Path.cwd() / folder).resolve()
        if folder != root and root not in folder.parents:
            where = "above" if folder in root.parents else "outside"
            raise BadInput(
                f"{key}={value} is {where} the run's folder {run_dir}: every folder a run writes lies in "
                "its own (another run's checkpoints would be overwritten; resume and the report look "
                f"there); use {key}=${{paths.output_dir}}/<folder>, or move the whole run with "
                "hydra.run.dir=..."
            )
    for key, value in leaves(resolved):
        if key.rsplit(".", 1)[-1] != "cache_dir" or not value or key.startswith("hydra."):
            continue
        folder = Path(str(value)).expanduser().resolve()
        if (outer := run_holding(folder)) is not None:
            raise BadInput(
                f"{key}={value} is inside the run folder {outer}, which it would write into; give a folder "
                f"runs share outside every run, e.g. {key}=${{paths.data_dir}}/cache"
            )
    # The folders a run writes below the data folder, runs share and a later one reads: a cache, and the
    # root a data set is downloaded into (``download: true``).
    values = dict(leaves(resolved))
    shared = [
        (key, value)
        for key, value in values.items()
        if (key.rsplit(".", 1)[-1] == "cache_dir" and not key.startswith("hydra."))
        or (key.endswith(".root") and values.get(f"{key[: -len('root')]}download") is True)
    ]
    for key, value in shared:
        if value and not Path(str(value)).expanduser().is_dir():
            # Nothing is there yet, so the run writes it (a folder that exists may be read from alone).
            check_writable(Path(str(value)).expanduser(), key, _cache_fix(key, value, resolved), keep=False)
    # The weights an evaluation scores: read after the data, so a path to nothing is refused first.
    if checkpoint := resolved.get("ckpt_path"):
        check_checkpoint(checkpoint)


def _cache_fix(key: str, value: Any, resolved: dict) -> str:
    """How to give the folder at ``key`` (a cache, a download) a writable place: the key itself, or the data
    folder that holds it, named by what set it (``NOISYDML_DATA_DIR``, or ``paths.data_dir``)."""
    data_dir = (resolved.get("paths") or {}).get("data_dir")
    if not data_dir:
        return f"{key}=..."
    data = Path(str(data_dir)).expanduser().resolve()
    if not Path(str(value)).expanduser().resolve().is_relative_to(data):
        return f"{key}=..."
    from_environment = os.environ.get("NOISYDML_DATA_DIR") == str(data_dir)
    setting = "NOISYDML_DATA_DIR" if from_environment else "paths.data_dir"
    return f"{key}=..., or point {setting} (now {data_dir}, which holds it) at a writable one"


def check_checkpoint(value: Any) -> Path:
    """``ckpt_path``, the weights an evaluation scores, is a file."""
    if not (checkpoint := Path(str(value)).expanduser()).is_file():
        raise BadInput(f"ckpt_path={value} is not a file; give a checkpoint a run wrote (checkpoints/*.ckpt)")
    return checkpoint


def check_writers(writers: dict[str, tuple[Any, Any]], run_dir: Path) -> None:
    """Every path a built logger or callback (by its config key, with its config node) will write lies in
    the run's folder, whatever key made it (a CSV logger's ``name`` or ``version``, a checkpoint's
    ``filename``): asked of the writer; the refusal names the node's keys that lead out."""
    root = run_dir.resolve()
    for key, (writer, node) in writers.items():
        for path in _written(writer):
            if root != path and root not in path.parents:
                out = [str(name) for name, value in node.items() if _leads_out(value, root)]
                writes = f"{key} ({type(writer).__name__})"
                if out:
                    given = ", ".join(f"{key}.{name}={node[name]}" for name in out)
                    writes, fix = (
                        f"{given} makes {writes} write",
                        " and ".join(f"{key}.{name}" for name in out),
                    )
                else:
                    writes, fix = f"{writes} would write", f"{key} a name or filename"
                raise BadInput(
                    f"{writes} {path}, outside the run's folder {run_dir}: every file a run writes lies in "
                    f"its own; give {fix} without '..' or a leading '/'"
                )


def _leads_out(value: Any, root: Path) -> bool:
    """A writer's setting that names a path out of the run's folder ``root``."""
    if not isinstance(value, str):
        return False
    path = Path(value).expanduser()
    return ".." in path.parts or (
        path.is_absolute() and path.resolve() != root and root not in path.resolve().parents
    )


def _written(writer: Any) -> Iterator[Path]:
    """The paths a writer says it writes: a Lightning logger's ``log_dir``, a callback's
    ``dirpath``/``filename``."""
    for folder, name in ((getattr(writer, "log_dir", None), ""), (getattr(writer, "dirpath", None), None)):
        if folder:
            name = getattr(writer, "filename", None) or "" if name is None else name
            yield (Path(str(folder)).expanduser() / name).resolve()


def _run_below(path: Path) -> Path | None:
    if not path.is_dir():
        return None
    for folder, subfolders, _ in os.walk(path):
        here = Path(folder)
        depth = len(here.relative_to(path).parts)
        if depth and is_run(here):
            return here
        if depth >= DEPTH:
            subfolders.clear()
    return None


# Keys that change how a run is watched or where files live, not what it computes.
NOT_IDENTITY = (
    "resume",
    "resume_from",
    "logger",
    "paths",
    "trainer.enable_progress_bar",
    "trainer.plugins",
    # A clock: a run it stopped continues with more time.
    "trainer.max_time",
    "callbacks",
)


def config_differences(old: dict, new: dict) -> list[str]:
    """Dotted keys whose values differ between two resolved configs, ignoring ``NOT_IDENTITY``; a value
    on one side where the other has a mapping (``scheduler: null`` against a scheduler) differs at its key.

    A key that only one of them has is an option added to (or removed from) the project since the
    older run, whose default keeps the old behaviour: not a difference, so a sweep re-run after an
    update still skips the jobs it finished. A run from before ``numerics`` existed computed natively. A
    path into the run's folder is compared from the folder (:func:`_in_run`)."""
    a, b = (_in_run(dict(leaves(config)), config) for config in ({"numerics": "native", **old}, new))
    below = {
        key
        for x, y in ((a, b), (b, a))
        for key in x.keys() - y.keys()
        if x[key] != {} and any(other.startswith(f"{key}.") for other in y)
    }
    differences = below | {key for key in a.keys() & b.keys() if a[key] != b[key]}
    ignored = tuple(f"{key}." for key in NOT_IDENTITY)
    kept = (key for key in differences if key not in NOT_IDENTITY and not key.startswith(ignored))
    return sorted(kept, key=lambda key: key.split("."))


def _in_run(values: dict, config: dict) -> dict:
    """``values`` with a path into the run's own folder written from it (``trainer.default_root_dir``): a
    run folder copied or moved elsewhere holds the same run."""
    root = str((config.get("paths") or {}).get("output_dir") or "").rstrip("/")
    if not root:
        return values
    return {
        key: f"<run>{value[len(root) :]}"
        if isinstance(value, str) and (value == root or value.startswith(f"{root}/"))
        else value
        for key, value in values.items()
    }


def check_run_directory(run: RunDir, resolved: dict, resume: str) -> dict | None:
    """The run directory holds no other run: return the results of a finished run of this very config
    (to skip), None when the run may start here. Refused, before anything is written into it: a finished
    run of another config, and a checkpoint of another config that ``resume=auto`` would continue."""
    recorded = run.read_results()
    if recorded is None or not isinstance(recorded.get("config"), dict):
        return None
    differences = config_differences(recorded["config"], resolved)
    finished = run.finished_results() is not None
    if not differences:
        return recorded if finished else None
    changed = ", ".join(_change(recorded["config"], resolved, key) for key in differences[:6])
    more = f" and {len(differences) - 6} more" if len(differences) > 6 else ""
    if finished:
        raise BadInput(
            f"{run.path} holds a finished run of another config ({changed}{more}), which is left as it is; "
            f"run this config in another folder, e.g. hydra.run.dir={run.path}-2"
        )
    if resume == "auto" and run.has_checkpoint():
        raise BadInput(
            f"{run.path} holds a checkpoint of another config ({changed}{more}), which would continue as if "
            f"it were this one; continue that run unchanged with: {run.resume_command()}, start it over "
            "with resume=never, or choose another directory with hydra.run.dir=..."
        )
    return None


def _change(old: dict, new: dict, key: str) -> str:
    there, here = (
        reduce(lambda c, part: c.get(part) if isinstance(c, dict) else None, key.split("."), config)
        for config in (old, new)
    )
    return f"{key}: {there} there, {here} here"
