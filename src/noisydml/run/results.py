"""What a run's ``results.json`` holds beside its metrics (versions), and the table printed at the end. The
files themselves are named by :mod:`noisydml.utils.run_directory`."""

from __future__ import annotations

import functools
import importlib.metadata
import math
import platform
import subprocess
from pathlib import Path

PACKAGES = (
    "noisydml",
    "torch",
    "torchvision",
    "pytorch-lightning",
    "pytorch-metric-learning",
    "faiss-cpu",
    "faiss-gpu",
    "hydra-core",
    "optuna",
    "numpy",
    "scikit-learn",
    "wandb",
)


def versions() -> dict[str, str]:
    """Versions of the packages that decide a run's numbers, Python's, and the git commit."""
    return dict(_versions())


@functools.cache
def _versions() -> dict[str, str]:
    # Once a process: its modules are loaded once, so a later job of a sweep runs the same code (a package
    # upgraded or a commit made meanwhile is not what it runs), and each reading costs a git process.
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    found["git_commit"] = _git_commit()
    return found


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def format_metrics(metrics: dict[str, float]) -> str:
    """A table of the metrics, in the order they were computed: a header and a line of values, each line
    labelled by its split (``test``, ``test_train``) where several were scored."""
    splits: dict[str, dict[str, float]] = {}
    for key, value in metrics.items():
        split, _, name = key.rpartition("/")
        splits.setdefault(split, {})[name] = value
    names = list(next(iter(splits.values()), {}))
    if any(list(scores) != names for scores in splits.values()):
        tables = (
            f"{s}/\n" + format_metrics({f"{s}/{n}": v for n, v in m.items()}) for s, m in splits.items()
        )
        return "\n\n".join(tables)
    label = max(len(split) for split in splits) + 2 if len(splits) > 1 else 0
    widths = [max(len(n), 6) for n in names]
    lines = [" " * label + "  ".join(n.rjust(w) for n, w in zip(names, widths, strict=True))]
    for split, scores in splits.items():
        values = "  ".join(
            ("nan" if math.isnan(v) else f"{v:.4f}").rjust(w)
            for v, w in zip(scores.values(), widths, strict=True)
        )
        lines.append((split.ljust(label) if label else "") + values)
    return "\n".join(lines)


def format_selection(selection: dict | None) -> str | None:
    """The line saying which epoch the test split was scored with, counted from 1 as the epoch lines are
    (results.json and the CSV keep Lightning's 0-based epoch); None when nothing was selected."""
    if not selection or "epoch" not in selection:
        return None
    epochs = f"epoch {selection['epoch'] + 1}/{selection['last_epoch'] + 1}"
    return f"tested {epochs}, selected by {selection['metric']} (the last epoch's: test_last/...)"
