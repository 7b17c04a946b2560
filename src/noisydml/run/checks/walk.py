"""The one walk of a composed config every check uses: the nodes that build an object, the entries of a
section of them, a key's value as typed, and a value as a user would type it back."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_object
from omegaconf import DictConfig, ListConfig, OmegaConf

ABSENT = object()


def target_nodes(node: Any, path: str = "") -> Iterator[tuple[str, DictConfig]]:
    """``(dotted key, node)`` of every node below ``node`` that builds an object (a string ``_target_``),
    outer nodes first. Hydra's own settings (``hydra``) and null nodes are not walked; a node given by
    an interpolation is the node it points to's, walked there."""
    if not isinstance(node, DictConfig) or node._is_none() or path == "hydra":
        return
    if isinstance(raw(node, "_target_"), str):
        yield path, node
    for key in node:
        yield from target_nodes(node._get_node(key), f"{path}.{key}" if path else str(key))


def builds(node: Any) -> bool:
    """Whether ``node`` is a config node that names the class it builds (a ``_target_``)."""
    return isinstance(node, DictConfig) and "_target_" in node


def entries(cfg: DictConfig, section: str) -> list[tuple[str, Any]]:
    """``(key, node)`` of each entry of a section of objects, null ones included: a mapping's
    (``callbacks.select``) or a list's (``trainer.plugins[0]``)."""
    found = OmegaConf.select(cfg, section, default=None) or {}
    if isinstance(found, ListConfig):
        return [(f"{section}[{i}]", node) for i, node in enumerate(found)]
    return [(f"{section}.{name}", node) for name, node in found.items()]


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted key, value)`` of every leaf of a plain container (a config as ``to_container`` gives it)
    below ``path``: ``path`` itself for a value or an empty mapping, nothing for :data:`ABSENT`."""
    if value is ABSENT:
        return
    if isinstance(value, dict) and value:
        for name, item in value.items():
            yield from leaves(item, f"{path}.{name}" if path else str(name))
    else:
        yield path, value


def raw(cfg: Any, key: str, default: Any = ABSENT) -> Any:
    """The value at the dotted ``key`` as written (an interpolation as its text, a node as a plain dict or
    list), ``default`` where there is none."""
    node = cfg
    for part in key.split("."):
        if not isinstance(node, DictConfig) or node._is_none() or part not in node:
            return default
        node = node._get_node(part)
    if isinstance(node, (DictConfig, ListConfig)):
        return None if node._is_none() else OmegaConf.to_container(node, resolve=False)
    return node._value()


def group_choices() -> dict[str, str]:
    """The option chosen in each config group (``loss: triplet``, ``method: le2019/...``); none when the
    config was composed without Hydra's runtime record."""
    if not HydraConfig.initialized():
        return {}
    choices = HydraConfig.get().runtime.choices
    return {group: option for group, option in choices.items() if group.split("/")[0] != "hydra"}


def given_overrides() -> list[str]:
    """This run's command-line overrides (Hydra's ``overrides.task``, a sweep job's own values too) as
    typed: an interpolation given as a value (``noise.backbone=${backbone}``) stays its text."""
    if not HydraConfig.initialized():
        return []
    return [str(o) for o in OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)]


def given_keys() -> set[str]:
    """The keys and groups given for this run on the command line, without their ``+`` or ``~``; none
    outside a Hydra run."""
    return {o.split("=", 1)[0].lstrip("+~") for o in given_overrides()}


def given_nodes() -> dict[str, dict]:
    """The nodes given whole, with their class, for this run on the command line
    (``loss.distance={_target_: ...}``), by key; Hydra merges such a node into the config's."""
    nodes = [o for o in given_overrides() if "_target_" in o and "{" in o and not o.startswith("~")]
    if not nodes:
        return {}
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(nodes)
    return {
        o.get_key_element(): o.value()
        for o in parsed
        if isinstance(o.value(), dict) and "_target_" in o.value()
    }


def shown(value: Any) -> str:
    """A value as a user types it on the command line: ``[0.9,0.999]``, ``{a: 1}``, ``null``."""
    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value, resolve=False)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {shown(item)}" for key, item in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return f"[{','.join(shown(item) for item in value)}]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


@functools.cache
def import_target(path: str) -> Any:
    """The object a ``_target_`` path names, imported once a process; None where it does not import in
    this environment."""
    try:
        return get_object(path)
    except Exception:
        return None
