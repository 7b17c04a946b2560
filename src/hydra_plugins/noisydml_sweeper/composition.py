"""A sweep's job configs composed once per set of config-group choices.

Hydra composes every job of a sweep from its files: it builds the defaults list from the job's group
choices (``method=le2019/triplet``, ``noise=uniform``), merges the configs it names, and then applies
the job's other overrides (``seed=3``, ``noise.rate=0.5``, ``+data.extra=1``) to the result, in order
(``ConfigLoaderImpl._load_configuration_impl``). The first two steps depend on the group choices alone,
and they are most of a composition's cost, which Hydra pays once per job (a tenth of a small digits job:
``scripts/bench/README.md``).

:class:`ComposedOnce` wraps a sweep's config loader so that jobs with the same group choices share those
steps: the configs merged for a set of choices are kept, and each job gets a copy with its own overrides
applied by Hydra's own code, in Hydra's order, with the records Hydra writes (``hydra.overrides.task``,
``hydra.job.override_dirname``) written from the job's overrides. A job that overrides a ``hydra.`` key
(which may change where configs are searched) is composed by Hydra whole, as is everything outside a
sweep's jobs. A value override whose key the config lacks (a typo without ``+``) is refused in one line
naming the keys there, where Hydra prints its exception over five lines; a single run's command line is
checked so before Hydra starts (``noisydml.run.checks.arguments``). ``tests/test_composition.py`` composes
sweeps both ways and finds the same configs.
"""

from __future__ import annotations

import copy
import difflib
import re
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra.core.config_loader import ConfigLoader
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import ConfigCompositionException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from noisydml.utils.errors import BadInput

# Hydra's refusal of a value override whose key the config lacks (its _apply_overrides_to_config).
NO_KEY = re.compile(r"Could not override '([^']+)'|Could not delete from config\. '([^']+)' does not exist")


class ComposedOnce(ConfigLoader):
    """A config loader that composes a sweep's job from the merged configs of its group choices, kept per
    set of choices (module docstring); every other call goes to the loader it wraps."""

    def __init__(self, loader: ConfigLoader) -> None:
        self.loader = loader
        self._merged: dict[tuple, DictConfig] = {}
        self._repositories: dict[tuple, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        # A launcher that pickles its context (submitit, joblib) sends the loader, not what it kept.
        return {**self.__dict__, "_merged": {}, "_repositories": {}}

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        # Unresolved, as Hydra reads them: hydra.sweep.subdir=${hydra.job.num} is a string here.
        hydra_overrides = OmegaConf.to_container(master_config.hydra.overrides.hydra)
        cfg = self.compose(master_config.hydra.job.config_name, hydra_overrides, sweep_overrides)
        if cfg is None:
            return self.loader.load_sweep_config(master_config, sweep_overrides)
        OmegaConf.copy_cache(from_config=master_config, to_config=cfg)
        return cfg

    def compose(
        self, config_name: str | None, hydra_overrides: list[str], overrides: list[str]
    ) -> DictConfig | None:
        """The config of a run with these ``overrides`` (``hydra_overrides`` the sweep's own), as Hydra
        composes it (module docstring); a value override whose key the config lacks is refused in one line
        naming the keys it has (:func:`no_such_key`). None where Hydra composes it whole: a job that
        overrides a ``hydra.`` key, or a loader of another kind."""
        parsed = OverridesParser.create().parse_overrides(list(overrides))
        if not isinstance(self.loader, ConfigLoaderImpl) or any(
            override.is_hydra_override() or override.is_sweep_override() for override in parsed
        ):
            return None
        chosen = [
            self.is_group(config_name, hydra_overrides, o.key_or_group) and not isinstance(o.value(), dict)
            for o in parsed
        ]
        choices = [o for o, choice in zip(parsed, chosen, strict=True) if choice]
        values = [o for o, choice in zip(parsed, chosen, strict=True) if not choice]
        given = [*hydra_overrides, *(str(o.input_line) for o in choices)]
        key = (config_name, *given)
        if key not in self._merged:
            self._merged[key] = self.loader.load_configuration(config_name, given, run_mode=RunMode.RUN)
        cfg = copy.deepcopy(self._merged[key])
        for override in values:
            try:
                ConfigLoaderImpl._apply_overrides_to_config([override], cfg)
            except ConfigCompositionException as error:
                if (bad := no_such_key(error, override, cfg)) is None:
                    raise
                raise bad from None
        _record_overrides(cfg, parsed)
        return cfg

    def is_group(self, config_name: str | None, hydra_overrides: list[str], name: str) -> bool:
        """Whether ``name`` is a config group where a run with these ``hydra_overrides`` is composed (the
        search path they and the primary config set), as Hydra's defaults list tells a group choice from a
        value (``defaults_list.Overrides``): a folder of configs, or of folders of them (``method``)."""
        where = (config_name, *hydra_overrides)
        if where not in self._repositories:
            _, self._repositories[where] = self.loader._parse_overrides_and_create_caching_repo(
                config_name, hydra_overrides
            )
        return self._repositories[where].group_exists(name)

    def load_configuration(self, *args: Any, **kwargs: Any) -> DictConfig:
        return self.loader.load_configuration(*args, **kwargs)

    def get_search_path(self):
        return self.loader.get_search_path()

    def get_sources(self):
        return self.loader.get_sources()

    def list_groups(self, parent_name: str) -> list[str]:
        return self.loader.list_groups(parent_name)

    def get_group_options(self, *args: Any, **kwargs: Any) -> list[str]:
        return self.loader.get_group_options(*args, **kwargs)

    def compute_defaults_list(self, *args: Any, **kwargs: Any):
        return self.loader.compute_defaults_list(*args, **kwargs)


def no_such_key(error: ConfigCompositionException, override: Override, cfg: DictConfig) -> BadInput | None:
    """Hydra's refusal of ``override`` (``error``: its key is not in ``cfg``, and it has no ``+``) in one
    line: the section that lacks the key, its keys and the closest, and how to add a key of one's own."""
    found = NO_KEY.match(str(error))
    if found is None:
        return None
    key = found.group(1) or found.group(2)
    parts = key.split(".")
    depth = 0
    node: Any = cfg
    while depth < len(parts) - 1 and isinstance(node, DictConfig) and parts[depth] in node:
        node = node._get_node(parts[depth])
        depth += 1
    section = ".".join(parts[:depth])
    # The root's hydra node is Hydra's, set with hydra.<key>=..., never a typo's target.
    known = [str(k) for k in node if depth or k != "hydra"] if isinstance(node, DictConfig) else []
    close = difflib.get_close_matches(parts[depth], known, n=1, cutoff=0.6)
    near = ".".join([*parts[:depth], close[0], *parts[depth + 1 :]]) if close else None
    where = f"{section} has no key {parts[depth]}" if section else f"the config has no key {parts[depth]}"
    choice = cfg.hydra.runtime.choices.get(parts[0]) if depth else None
    option = f" ({parts[0]}={choice})" if choice else ""
    shown = ", ".join(k for k in known if not k.startswith("_")) or "none"
    if override.is_delete():
        hint = f"; did you mean ~{near}?" if near else ""
        return BadInput(
            f"{override.input_line}: {where}{option}, so there is nothing to delete{hint} (its keys: {shown})"
        )
    hint = f"; did you mean {near}={override.get_value_element_as_str()}?" if near else ""
    add = f"a key of your own is added with +{key}=..."
    target = node.get("_target_") if isinstance(node, DictConfig) and depth == len(parts) - 1 else None
    if isinstance(target, str) and not _takes(target, parts[depth]):
        if near:
            return BadInput(f"{override.input_line}: {where}{option}{hint} (its keys: {shown})")
        add = (
            f"{target.rsplit('.', 1)[-1]} takes no {parts[depth]}, so +{key} would be refused too; choose "
            f"{'an option of ' + parts[0] + '= that has it' if choice else 'a class that takes it'}"
        )
    return BadInput(f"{override.input_line}: {where}{option}{hint} (its keys: {shown}); {add}")


def _takes(target: str, name: str) -> bool:
    """Whether the class ``target`` takes the keyword ``name`` (True when that cannot be told): only then
    does adding it with ``+`` build. Imported only on this refusal's path."""
    from noisydml.run.checks.classes import accepted_parameters
    from noisydml.run.checks.walk import import_target

    try:
        accepted = accepted_parameters(import_target(target))
    except Exception:
        return True
    return accepted is None or name in accepted


def _record_overrides(cfg: DictConfig, overrides: list[Override]) -> None:
    """``hydra.overrides.task`` and ``hydra.job.override_dirname`` as Hydra writes them for these
    overrides (none of them a ``hydra.`` one)."""
    naming = cfg.hydra.job.config.override_dirname
    with open_dict(cfg.hydra):
        cfg.hydra.overrides.task = [str(o.input_line) for o in overrides]
        cfg.hydra.job.override_dirname = get_overrides_dirname(
            overrides=overrides,
            kv_sep=naming.kv_sep,
            item_sep=naming.item_sep,
            exclude_keys=naming.exclude_keys,
        )
