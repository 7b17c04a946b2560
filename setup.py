"""The configs ship inside the package: ``conf/`` stays at the top of the repository, where users edit it,
and a built wheel carries it as ``noisydml/conf`` (``noisydml.CONFIG_DIR`` finds either). Everything else
is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CONF = Path(__file__).parent / "conf"


class BuildPyWithConfigs(build_py):
    """``build_py`` that also copies ``conf/`` into the built package (not ``conf/local/``, a user's own
    paths, git-ignored)."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            target = Path(self.build_lib) / "noisydml" / "conf"
            shutil.copytree(
                CONF, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("local", "__pycache__")
            )


setup(cmdclass={"build_py": BuildPyWithConfigs})
