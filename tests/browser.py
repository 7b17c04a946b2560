"""Debian's headless ``chromium`` as the tests drive it: its flags, and a page's DOM once its scripts ran.
A test that needs it skips where it is absent, saying how to install it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--window-size=1600,1400",
    # Lets the page's scripts fetch and render before the DOM is dumped.
    "--virtual-time-budget=30000",
]


def chromium() -> str:
    """The browser's path; the test is skipped where there is none."""
    found = shutil.which("chromium")
    if found is None:
        pytest.skip("no `chromium` on PATH: apt-get install -y chromium (.ci/run does)")
    return found


def dump_dom(url: str, timeout: float = 120, window: tuple[int, int] | None = None) -> str:
    """The page at ``url`` (``http://127.0.0.1:...`` or ``file://...``) as the browser's DOM, serialised; in a
    window of ``window`` (width, height) where given (a grid renders only the columns that fit)."""
    command = [chromium(), *_flags(window), "--dump-dom", url]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout).stdout


def screenshot(url: str, path: Path, timeout: float = 120, window: tuple[int, int] | None = None) -> None:
    """The page at ``url`` as a PNG at ``path``, in a window of ``window`` (width, height) where given."""
    command = [chromium(), *_flags(window), f"--screenshot={path}", url]
    subprocess.run(command, capture_output=True, timeout=timeout)


def _flags(window: tuple[int, int] | None) -> list[str]:
    if window is None:
        return CHROMIUM_FLAGS
    size = f"--window-size={window[0]},{window[1]}"
    return [size if flag.startswith("--window-size=") else flag for flag in CHROMIUM_FLAGS]
