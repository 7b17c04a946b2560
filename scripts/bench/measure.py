"""What every benchmark here shares: wall time, peak memory, the machine it ran on, and the table it prints.

The machines these run on are often shared, so absolute times drift from run to run; what a benchmark
reports is the RATIO of each contender to an anchor measured side by side in the same process, repeats
interleaved (A B C A B C ...) and the best of each kept, so a burst of load hits all of them alike.
"""

from __future__ import annotations

import datetime
import os
import platform
import resource
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class PeakMemory:
    """Peak resident memory added by the code inside ``with``, in MiB (``.added_mib``).

    Linux resets a process's high-water mark (VmHWM) when "5" is written to ``/proc/self/clear_refs``,
    so each block gets its own peak even after an earlier, bigger one. Without that (not Linux, or a
    kernel that refuses), the process-wide ``ru_maxrss`` is used and ``.exact`` is False: the figure is
    then only an upper bound for blocks that follow a bigger one.
    """

    def __init__(self) -> None:
        self.added_mib = float("nan")
        self.exact = False
        self._start_kib = 0

    def __enter__(self) -> PeakMemory:
        try:
            _CLEAR_REFS.write_text("5")
            self.exact = _status_kib("VmHWM") is not None
        except OSError:
            self.exact = False
        rss = _status_kib("VmRSS")
        self._start_kib = rss if rss is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return self

    def __exit__(self, *exc: object) -> None:
        peak = _status_kib("VmHWM") if self.exact else None
        if peak is None:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.added_mib = (peak - self._start_kib) / 1024


def best_of(functions: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """The fastest wall time of each function over ``repeats`` rounds, the functions interleaved."""
    best = {name: float("inf") for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            started = time.perf_counter()
            function()
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def per_call(
    functions: dict[str, Callable[[], Any]],
    rounds: int,
    min_seconds: float,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Seconds per call of each function: each round calls it back to back for at least ``min_seconds``
    (the count fixed by a first timed call), rounds interleave the functions, the best round counts.

    ``clock=time.process_time`` counts the CPU seconds of this process instead of wall seconds: on a
    machine shared with other jobs, a single-threaded computation's CPU time hardly depends on the load.
    """
    counts = {}
    for name, function in functions.items():
        started = clock()
        function()  # also the warm-up: first-call allocations and lazy imports stay out of the figures
        counts[name] = max(1, int(min_seconds / max(clock() - started, 1e-6)))
    best = {name: float("inf") for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            started = clock()
            for _ in range(counts[name]):
                function()
            best[name] = min(best[name], (clock() - started) / counts[name])
    return best


def machine() -> str:
    """One line naming the date, the CPU, the cores this process may use, the load and the library threads."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    memory = ""
    if hasattr(os, "sysconf") and "SC_PHYS_PAGES" in os.sysconf_names:
        memory = f", {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB"
    import torch

    return (
        f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; {model}, {cores} cores{memory}; "
        f"load average {load}; torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"python {platform.python_version()}"
    )


def format_seconds(seconds: float) -> str:
    if seconds != seconds:  # NaN: not measured
        return "-"
    if seconds >= 10:
        return f"{seconds:.1f} s"
    if seconds >= 0.1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.2f} ms"


def print_table(header: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> None:
    """A Markdown table, so it can be pasted into scripts/bench/README.md as printed."""
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(str(h)), *(len(row[i]) for row in cells)) for i, h in enumerate(header)]
    if title:
        print(f"\n{title}\n")
    print("| " + " | ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("| " + " | ".join("-" * w for w in widths) + " |")
    for row in cells:
        print("| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |")
    print(flush=True)
