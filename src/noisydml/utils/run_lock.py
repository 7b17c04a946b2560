"""One run folder, one process: the OS's advisory lock (``flock``) on ``<run dir>/.lock``.

A second process given a live run's folder (the same command started twice, a sweep re-run while the first
still runs, two seeds sent to one ``hydra.run.dir``) is refused in one line naming the process that holds
it; two would interleave the CSV, open two W&B runs and overwrite each other's ``results.json``. The kernel
releases the lock when its holder dies, however it dies (SIGKILL, out of memory), so a killed run never
keeps its folder locked: ``noisydml resume=<run dir>`` takes it over at once.

While the lock is held nothing else writes in the folder, so the temporary files an atomic write killed
halfway left behind (``.last.ckpt.<random>.tmp``) are removed then.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from noisydml.utils.errors import BadInput
from noisydml.utils.run_directory import RunDir

# W&B's own folder is W&B's to clean; every other temporary file of a run is an atomic write's.
NOT_OURS = ("wandb",)


@contextmanager
def run_lock(run: RunDir) -> Iterator[None]:
    """Hold ``run``'s lock for the block, or refuse with the holder's pid and host when another process
    holds it. The lock file is removed on release, so a finished run's folder holds none."""
    run.path.mkdir(parents=True, exist_ok=True)
    fd = _acquire(run)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()} {' '.join(sys.argv)}\n".encode())
        remove_partial_writes(run)
        yield
    finally:
        run.lock.unlink(missing_ok=True)
        os.close(fd)


def _acquire(run: RunDir) -> int:
    while True:
        fd = os.open(run.lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise BadInput(
                f"{run.path} is in use by another noisydml process ({holder}); two processes in one run "
                "folder overwrite each other's results: wait for it to end (or stop it), or run this one "
                "in another folder (hydra.run.dir=... or hydra.sweep.dir=...)"
            ) from None
        # The holder before us may have removed the file between our open and our lock: ours would then
        # be a lock on a file no one else sees; take the one at the path instead.
        try:
            if os.fstat(fd).st_ino == os.stat(run.lock).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    if not text:
        return "it has not yet said which"
    pid, host, *command = text.split(" ")
    return f"pid {pid} on {host}: {' '.join(command)}"


def remove_partial_writes(run: RunDir) -> list[Path]:
    """Remove the temporary files of atomic writes (``.<name>.<random>.tmp``) a killed process left in the
    run's folder; return them."""
    removed = []
    for folder, subfolders, files in os.walk(run.path):
        subfolders[:] = [s for s in subfolders if s not in NOT_OURS]
        for name in files:
            if name.startswith(".") and name.endswith(".tmp"):
                path = Path(folder) / name
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed
