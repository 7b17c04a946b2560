"""What a run's method is called, the same in a report's table, on a dashboard and in the run's checks.

A published method is a file of the ``method`` config group: the groups it chooses (its defaults'
``override /loss: triplet`` lines) and its ``report.method`` label. The files are read where Hydra finds
them, the package's ``conf/`` and every folder a run added to the search path (``hydra.searchpath``,
``--config-dir``), so a user's own method is a method like the package's. A run that chooses a method's
groups without ``method=`` goes by that method's name where nothing else tells them apart:
``loss=triplet miner=fixed_semihard`` is "Triplet + fixed semi-hard", as
``method=le2019/triplet_fixed_semihard`` is.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from noisydml import CONFIG_DIR

# A config source as Hydra records it (``hydra.runtime.config_sources``): its schema and its path.
Source = tuple[str, str]
PACKAGE_SOURCES: tuple[Source, ...] = (("file", str(CONFIG_DIR)),)
# What a method's file may hold beside its groups and still be nothing but those groups, labelled.
_LABEL_ONLY = {"defaults", "report"}


def sources_of(hydra_sources: Iterable[Mapping[str, Any]]) -> tuple[Source, ...]:
    """The folders of ``hydra.runtime.config_sources`` that hold config files (``file`` and ``pkg``), the
    package's ``conf/`` first."""
    found = [(str(s["schema"]), str(s["path"])) for s in hydra_sources if s.get("schema") in ("file", "pkg")]
    return (*PACKAGE_SOURCES, *(s for s in found if s not in PACKAGE_SOURCES))


def _folder(source: Source) -> Path | None:
    schema, path = source
    if schema == "file":
        return Path(path)
    try:
        package, _, sub = path.partition("/")
        return Path(str(resources.files(package).joinpath(sub)))
    except (ModuleNotFoundError, TypeError):
        return None


def _read(method: str, sources: tuple[Source, ...]) -> dict:
    """The file of ``method=<method>`` in the first of ``sources`` that holds it, as Hydra looks for it."""
    for source in sources:
        folder = _folder(source)
        path = folder / "method" / f"{method}.yaml" if folder else None
        if path is not None and path.is_file():
            return yaml.safe_load(path.read_text()) or {}
    return {}


def _groups(document: dict) -> dict[str, str]:
    groups = {}
    for entry in document.get("defaults") or []:
        for key, option in entry.items() if isinstance(entry, dict) else ():
            groups[key.removeprefix("override").strip().lstrip("/")] = str(option)
    return groups


def methods(sources: tuple[Source, ...] = PACKAGE_SOURCES) -> list[str]:
    """Every ``method=`` option in ``sources`` (``le2019/triplet_random_semihard``)."""
    folders = [folder / "method" for source in sources if (folder := _folder(source)) is not None]
    found = (str(p.relative_to(f).with_suffix("")) for f in folders if f.is_dir() for p in f.rglob("*.yaml"))
    return sorted(set(found))


def method_groups(method: str, sources: tuple[Source, ...] = PACKAGE_SOURCES) -> dict[str, str]:
    """The groups ``method=<method>`` chooses, ``{"loss": "triplet", "miner": "fixed_semihard"}``, read
    from ``sources``; empty when there is no such method."""
    return _groups(_read(method, sources))


def method_file(method: str, sources: tuple[Source, ...] = PACKAGE_SOURCES) -> dict:
    """What ``method=<method>``'s file sets beside its groups (its ``defaults``), as written."""
    return {key: value for key, value in _read(method, sources).items() if key != "defaults"}


@functools.cache
def _labelled() -> tuple[tuple[dict[str, str], str], ...]:
    """``(groups, label)`` of each package method whose file chooses groups and labels them, and sets
    nothing else: a run of the same groups is that method (one that also sets a key, e.g. Levi et al.'s
    triplet on the squared distance, is not)."""
    found = []
    for path in sorted((CONFIG_DIR / "method").rglob("*.yaml")):
        document = yaml.safe_load(path.read_text()) or {}
        label = (document.get("report") or {}).get("method")
        defaults = document.get("defaults") or []
        chosen = _groups(document)
        only_groups = all(isinstance(entry, dict) for entry in defaults) and set(document) <= _LABEL_ONLY
        if label and chosen and only_groups:
            found.append((chosen, str(label)))
    return tuple(found)


def published_label(choices: Mapping[str, Any]) -> str | None:
    """The report label of the published method whose groups are all among a run's ``choices``, the one
    that chooses the most of them where several do; None when none does, or when methods of different
    labels choose the same groups (``loss=multi_similarity miner=multi_similarity`` is Levi et al.'s
    "Multi-similarity" and Zhang et al.'s "MS")."""
    matches = [
        (len(chosen), label)
        for chosen, label in _labelled()
        if all(str(choices.get(group)) == option for group, option in chosen.items())
    ]
    if not matches:
        return None
    most = max(size for size, _ in matches)
    labels = {label for size, label in matches if size == most}
    return labels.pop() if len(labels) == 1 else None


def method_label(config: Mapping, choices: Mapping[str, str | None]) -> str:
    """The report's label for a published method (``report.method``), else ``method=``'s option, else the
    label of the published method whose groups the run chose (``published_label``), else
    ``<loss> + <miner>``: the name a run's method goes by in a table."""
    report = config.get("report") or {}
    if report.get("method"):
        return str(report["method"])
    if choices.get("method"):
        return str(choices["method"])
    return published_label(choices) or f"{choices.get('loss')} + {choices.get('miner')}"
