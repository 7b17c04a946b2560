"""Atomic file writes: a reader (or a crash) never sees half a results file.

The file keeps the mode an ordinary ``open()`` would give it (0666 less the user's umask), so a
lab-mate on a shared cluster can read a run's results and checkpoints: ``tempfile.mkstemp`` alone
creates it 0600.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_write(
    path: str | Path, mode: str = "w", keep_previous: Path | None = None, durable: bool = True
) -> Iterator[IO]:
    """Write to a temporary file in the same folder, fsync it, then rename it over ``path``; the file it
    replaces is renamed to ``keep_previous`` first when given.

    The rename alone keeps a killed process from leaving half a file; the fsync also keeps a machine that
    crashes from doing so. ``durable=False`` skips it for a file rewritten many times a run (a checkpoint
    each epoch, the metrics history): on a busy disk an fsync costs tens of milliseconds, as much as an
    epoch of a small job, and such a file damaged by a crash is caught where it is read (a checkpoint
    refused at resume, with ``resume_from=previous`` and ``resume=never`` as the fixes)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode, newline="" if "b" not in mode else None) as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        if keep_previous is not None and path.exists():
            os.replace(path, keep_previous)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    # The umask can only be read by setting it; set it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json(path: str | Path, data: Any) -> None:
    with atomic_write(path) as f:
        json.dump(data, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
