"""scripts/package/seed_torch.py, which gives `make check-wheel`'s fresh venv an installed torch by hard
links: it must bring every distribution the named ones require, through the extras they are required
with (torch asks for ``cuda-toolkit[cufile,...]``, whose libraries torch cannot import without), and
nothing an extra not asked for would add."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "package" / "seed_torch.py"


def _distribution(site: Path, name: str, requires: list[str], files: dict[str, str]) -> None:
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\n"
        f"Name: {name}\n"
        "Version: 1.0\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    )
    for relative, text in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_text(text)
    record = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD", "../../../bin/console-script"]
    (info / "RECORD").write_text("".join(f"{entry},,\n" for entry in record))


def _seed(source: Path, target: Path, *names: str) -> subprocess.CompletedProcess:
    """The script as check_wheel.sh runs it, with ``source`` first on the path (the names are the
    test's own, so nothing installed here answers for them)."""
    environment = {**os.environ, "PYTHONPATH": str(source)}
    command = [sys.executable, str(SCRIPT), str(target), *names]
    return subprocess.run(command, capture_output=True, text=True, env=environment)


def test_the_closure_follows_extras_links_the_files_and_leaves_out_what_is_not_asked_for(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    target.mkdir()
    _distribution(
        source,
        "seedtest-top",
        ["seedtest-toolkit[lib]", 'seedtest-optional; extra == "unused"'],
        {"top/__init__.py": "x = 1\n"},
    )
    _distribution(
        source,
        "seedtest-toolkit",
        ['seedtest-libpkg; extra == "lib"', 'seedtest-other; extra == "never"'],
        {"toolkit.py": ""},
    )
    _distribution(source, "seedtest-libpkg", [], {"vendor/lib/libthing.so.0": "binary"})
    _distribution(source, "seedtest-other", [], {"other.py": ""})
    _distribution(source, "seedtest-optional", [], {"optional.py": ""})

    done = _seed(source, target, "seedtest-top")

    assert done.returncode == 0, done.stderr
    assert (target / "vendor/lib/libthing.so.0").read_text() == "binary"  # through toolkit[lib]
    assert (target / "seedtest_libpkg-1.0.dist-info/RECORD").is_file()  # pip sees it installed
    assert (target / "top/__init__.py").stat().st_ino == (source / "top/__init__.py").stat().st_ino
    assert not (target / "other.py").exists() and not (target / "optional.py").exists()
    assert not (tmp_path / "bin").exists()  # a console script names the source's interpreter


def test_a_requirement_missing_from_the_source_is_named(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    target.mkdir()
    _distribution(source, "seedtest-top", ["seedtest-absent"], {"top.py": ""})

    done = _seed(source, target, "seedtest-top")

    assert done.returncode == 1
    assert "seedtest-absent is not installed" in done.stderr
