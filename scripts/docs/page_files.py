"""Write the files a docs page shows into a folder, as a reader following it would: each fenced Python or
YAML block that names its file in a comment of its first two lines (a config's first line is its
``# @package``), at that path.

    python scripts/docs/page_files.py docs/board.md FOLDER

``tests/test_board.py`` and ``scripts/package/check_wheel.sh`` run docs/board.md's method this way.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def blocks(page: Path) -> list[tuple[str, str]]:
    """``(language, text)`` of each fenced block of ``page``."""
    return re.findall(r"```(\w+)\n(.*?)```", Path(page).read_text(), flags=re.S)


def write_files(page: Path, folder: Path) -> list[Path]:
    """Write each file ``page`` shows under ``folder``; the paths written."""
    written = []
    for language, text in blocks(page):
        lines = text.splitlines()[:2]
        named = [line for line in lines if line.startswith("# ") and line.endswith((".py", ".yaml"))]
        if language in ("python", "yaml") and named:
            path = Path(folder) / named[0].removeprefix("# ")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
    return written


if __name__ == "__main__":
    for path in write_files(Path(sys.argv[1]), Path(sys.argv[2])):
        print(path)
