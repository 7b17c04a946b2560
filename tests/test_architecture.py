"""The package's shape, as ARCHITECTURE.md draws it: a root that holds the package's face, packages layered
so that imports only point down, no circle of imports inside a package, no module past 600 lines, and a map
that names only what exists."""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "src" / "noisydml"

# Bottom to top; a package imports only packages of lower layers (and itself). "noisydml" is the root's face
# (__version__, CONFIG_DIR), which every layer may read.
LAYERS = (
    ("noisydml", "utils"),
    ("numerics",),
    ("metrics", "noise", "miners", "models"),
    ("core",),
    ("data", "losses"),
    ("callbacks", "loggers"),
    ("run", "report", "dashboard", "testing"),
)
LAYER = {package: level for level, packages in enumerate(LAYERS) for package in packages}
MAX_LINES = 600


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _package(module: Path) -> str:
    parts = module.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else "noisydml"


def _imported_packages(module: Path) -> set[str]:
    """The noisydml packages a module imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "noisydml":
                names = [f"noisydml.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "noisydml":
                found.add(parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else "noisydml")
    return found


def _module_name(module: Path, root: Path) -> str:
    parts = module.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports(module: Path, root: Path, names: set[str]) -> set[str]:
    """The modules of ``names`` that ``module`` imports: at its top, inside a function or under
    ``TYPE_CHECKING`` (an import a type checker follows is still an arrow), with the packages Python runs
    on the way (``a.b.c`` runs ``a/b/__init__.py`` first), but not the module's own packages, which
    Python has begun before it."""
    me = _module_name(module, root)
    package = me if module.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            for end in range(2, len(parts) + 1):
                name = ".".join(parts[:end])
                if name in names and name != me and not me.startswith(f"{name}."):
                    found.add(name)
    return found


def import_cycles(root: Path) -> list[list[str]]:
    """For each package under ``root`` (a package's folder), a circle of imports among its modules, if
    it has one: ``[a, b, ..., a]``, each importing the next."""
    modules = {_module_name(m, root): m for m in sorted(root.rglob("*.py"))}
    cycles = []
    for package in sorted(p for p in root.iterdir() if (p / "__init__.py").exists()):
        prefix = f"{_module_name(package / '__init__.py', root)}"
        inside = {name for name in modules if name == prefix or name.startswith(f"{prefix}.")}
        graph = {name: _module_imports(modules[name], root, inside) for name in inside}
        try:
            graphlib.TopologicalSorter(graph).prepare()
        except graphlib.CycleError as error:
            cycles.append(list(reversed(error.args[1])))
    return cycles


def test_no_package_imports_itself_in_a_circle():
    cycles = import_cycles(PACKAGE)
    assert not cycles, "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_checker_sees_a_circle_through_a_type_checking_import_and_a_package(tmp_path):
    """``pkg.reg`` imports ``pkg.sub.rec`` (so ``pkg/sub/__init__.py`` runs, which imports
    ``pkg.sub.low``), and ``low`` imports ``reg`` for a type only: a circle of three."""
    root = tmp_path / "top"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "reg.py").write_text("from top.pkg.sub.rec import Record\n")
    (root / "pkg" / "sub" / "__init__.py").write_text("from . import low\n")
    (root / "pkg" / "sub" / "rec.py").write_text("Record = int\n")
    (root / "pkg" / "sub" / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from top.pkg import reg\n"
    )
    (cycle,) = import_cycles(root)
    assert set(cycle) == {"top.pkg.reg", "top.pkg.sub", "top.pkg.sub.low"} and cycle[0] == cycle[-1]
    # A module that imports its own package is no circle: Python began the package first.
    (root / "pkg" / "sub" / "low.py").write_text("from top.pkg.sub import rec\n")
    assert import_cycles(root) == []


def test_every_package_has_a_layer():
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages | {"noisydml"} == set(LAYER)


def test_imports_only_point_down():
    upward = [
        f"{module.relative_to(PACKAGE)} ({_package(module)}, layer {LAYER[_package(module)]}) imports "
        f"{target} (layer {LAYER[target]})"
        for module in _modules()
        for target in _imported_packages(module)
        if target not in (_package(module), "noisydml") and LAYER[target] >= LAYER[_package(module)]
    ]
    assert not upward, "\n".join(upward)


def test_the_noise_package_imports_nothing_from_data():
    assert not any("data" in _imported_packages(m) for m in (PACKAGE / "noise").rglob("*.py"))


def test_only_the_commands_compose_a_config():
    """A config is composed only by the top layer (the commands, the report, the checks); every layer below
    is handed built objects or values, so a part works the same called from Python."""
    composing = [
        f"{module.relative_to(PACKAGE)} imports hydra's {alias.name}"
        for module in _modules()
        if LAYER[_package(module)] < LAYER["run"]
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "hydra"
        for alias in node.names
        if alias.name in ("compose", "initialize", "initialize_config_dir", "initialize_config_module")
    ]
    assert not composing, "\n".join(composing)


def test_the_root_holds_only_the_package_face():
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py"]


def test_no_module_is_longer_than_600_lines():
    long = {
        str(m.relative_to(PACKAGE)): n
        for m in _modules()
        if (n := len(m.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


def test_the_checker_sees_an_upward_import(tmp_path):
    """The layer check reads function-level imports too (a lazy import is still an arrow)."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from noisydml.run.train import train\n")
    assert _imported_packages(module) == {"run"}


def _architecture() -> str:
    return (ROOT / "ARCHITECTURE.md").read_text()


def test_architecture_md_draws_the_same_layers():
    table = {
        package: int(level)
        for level, packages in re.findall(r"^\| (\d) \| ([^|]+) \|", _architecture(), re.M)
        for package in re.findall(r"`(\w+)/`", packages)
    }
    assert {p: LAYER[p] for p in table} == table
    assert set(table) == set(LAYER) - {"noisydml"}


@pytest.mark.parametrize(
    "path", sorted(set(re.findall(r"`((?:src|conf|tests|scripts)/[\w/.-]+)`", _architecture())))
)
def test_every_path_architecture_md_names_exists(path):
    assert (ROOT / path.rstrip("/")).exists(), path
