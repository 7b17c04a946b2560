"""A run writes only into its own folder: never into, below or over another run's, by any path key, and
never above its own.

Two checks. :func:`check_run_folder`, before anything is written: the run directory lies inside no other
run's folder (``hydra.run.dir=<a finished run>/checkpoints``, a run the report would never see) and holds
no other run below it. :func:`check_output_folders`, in pre-flight: every folder a callback, logger or the
trainer writes (a key named ``dirpath``, ``save_dir``, ``*_dir``) lies in the run directory, where resume
and the report look for it; a checkpoint folder pointed at another run's would overwrite its
``best.ckpt``, the weights its results were tested with.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from noisydml.utils.errors import BadInput
from noisydml.utils.run_directory import RunDir

# The sections of the config whose nodes write files: callbacks, loggers, the trainer (a profiler).
WRITING_SECTIONS = ("callbacks", "logger", "trainer")
# How deep below a run directory another run is looked for: a sweep's jobs are one level down, a
# name/time run folder two, outputs/ three.
DEPTH = 4


def is_run(path: Path) -> bool:
    """``path`` holds a run: its record (``results.json``) or Hydra's (``.hydra/overrides.yaml``)."""
    run = RunDir(path)
    return run.results.is_file() or run.overrides.is_file()


def check_run_folder(run: RunDir) -> None:
    """Refuse a run directory inside another run's folder, or holding another run below it; the empty
    folder Hydra made for it there is removed, so the other run is left as it was found."""
    path = run.path.resolve()
    outer = next((parent for parent in path.parents if is_run(parent)), None)
    inner = None if outer is not None else _run_below(path)
    if outer is None and inner is None:
        return
    _remove_if_empty(path)
    if outer is not None:
        raise BadInput(
            f"hydra.run.dir={run.path} is inside the run folder {outer}, whose files it would mix with and "
            "where the report never sees it; choose a folder outside every run, or drop hydra.run.dir for "
            "a new outputs/runs/<name>/<time>"
        )
    raise BadInput(
        f"hydra.run.dir={run.path} holds the run {inner} below it, which this run would write over; choose "
        "a new folder, or drop hydra.run.dir for a new outputs/runs/<name>/<time>"
    )


def check_folder_argument(key: str, folder: Path) -> None:
    """``hydra.run.dir`` / ``hydra.sweep.dir`` on the command line, before Hydra writes into it (a sweep's
    multirun.yaml): inside no other run's folder. A sweep folder may hold runs, its own jobs (a sweep run
    again skips those that finished); a run folder may not."""
    path = folder.resolve()
    outer = next((parent for parent in path.parents if is_run(parent)), None)
    if outer is not None:
        raise BadInput(
            f"{key}={folder} is inside the run folder {outer}, whose files it would mix with and where the "
            f"report never sees it; choose a folder outside every run, or drop {key}"
        )
    if key == "hydra.run.dir" and not is_run(path) and (inner := _run_below(path)) is not None:
        raise BadInput(
            f"{key}={folder} holds the run {inner} below it, which this run would write over; choose a new "
            f"folder, or drop {key}"
        )


def check_output_folders(resolved: dict, run_dir: Path) -> None:
    """Every folder the run's callbacks, loggers and trainer write lies in its run directory."""
    root = run_dir.resolve()
    for key, value in _output_folders(resolved):
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


def _output_folders(resolved: dict) -> Iterator[tuple[str, str]]:
    """``(key, folder)`` of every folder-valued key (``dirpath``, ``save_dir``, ``default_root_dir``)
    of the sections that write."""

    def walk(node: Any, path: str) -> Iterator[tuple[str, str]]:
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            name = f"{path}.{key}"
            if isinstance(value, str) and str(key).endswith(("dir", "dirpath")):
                yield name, value
            else:
                yield from walk(value, name)

    for section in WRITING_SECTIONS:
        yield from walk(resolved.get(section), section)


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


def _remove_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()
