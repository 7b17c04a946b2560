"""The configs ship inside the package: ``conf/`` stays at the top of the repository, where users edit it,
and a built wheel carries it as ``noisydml/conf`` (``noisydml.CONFIG_DIR`` finds either). So do the
reproductions' committed runs, ``results/<reproduction>/runs.csv`` and ``stamp.json``, as
``noisydml/results`` (``noisydml.RESULTS_DIR``): the board ``noisydml-report --against`` sets a new method
beside. Everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CONF = Path(__file__).parent / "conf"
RESULTS = Path(__file__).parent / "results"
# What a board is: its runs and their stamp (the verdicts are drawn from them, the tables from those).
BOARD_FILES = ("runs.csv", "runs.csv.gz", "stamp.json")


class BuildPyWithConfigs(build_py):
    """``build_py`` that also copies ``conf/`` into the built package (not ``conf/local/``, a user's own
    paths, git-ignored), and each reproduction's board from ``results/``."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            target = Path(self.build_lib) / "noisydml" / "conf"
            shutil.copytree(
                CONF, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("local", "__pycache__")
            )
            # The README (what a board's columns are) makes the folder the package's, with boards or none.
            results = Path(self.build_lib) / "noisydml" / "results"
            results.mkdir(parents=True, exist_ok=True)
            shutil.copy2(RESULTS / "README.md", results / "README.md")
            for board in sorted(p.parent for p in RESULTS.glob("*/runs.csv*")):
                kept = results / board.name
                kept.mkdir(parents=True, exist_ok=True)
                for name in BOARD_FILES:
                    if (board / name).is_file():
                        shutil.copy2(board / name, kept / name)


setup(cmdclass={"build_py": BuildPyWithConfigs})
