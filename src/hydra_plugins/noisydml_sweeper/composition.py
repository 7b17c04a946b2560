"""A sweep's job configs composed once per set of config-group choices.

Hydra composes every job of a sweep from its files: it builds the defaults list from the job's group
choices (``method=le2019/triplet``, ``noise=uniform``), merges the configs it names, and then applies
the job's other overrides (``seed=3``, ``noise.rate=0.5``, ``+data.extra=1``) to the result, in order
(``ConfigLoaderImpl._load_configuration_impl``). The first two steps depend on the group choices alone,
and they are most of a composition's cost: about 0.12 s of a digits job's 1.5 s, paid once per job.

:class:`ComposedOnce` wraps a sweep's config loader so that jobs with the same group choices share those
steps: the configs merged for a set of choices are kept, and each job gets a copy with its own overrides
applied by Hydra's own code, in Hydra's order, with the records Hydra writes (``hydra.overrides.task``,
``hydra.job.override_dirname``) written from the job's overrides. A job that overrides a ``hydra.`` key
(which may change where configs are searched) is composed by Hydra whole, as is everything outside a
sweep's jobs. ``tests/test_sweeper.py`` composes sweeps both ways and finds the same configs.
"""

from __future__ import annotations

import copy
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra.core.config_loader import ConfigLoader
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf, open_dict


class ComposedOnce(ConfigLoader):
    """A config loader that composes a sweep's job from the merged configs of its group choices, kept per
    set of choices (module docstring); every other call goes to the loader it wraps."""

    def __init__(self, loader: ConfigLoader) -> None:
        self.loader = loader
        self._merged: dict[tuple[str, ...], DictConfig] = {}
        self._repository: Any = None

    def __getstate__(self) -> dict[str, Any]:
        # A launcher that pickles its context (submitit, joblib) sends the loader, not what it kept.
        return {**self.__dict__, "_merged": {}, "_repository": None}

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        parsed = OverridesParser.create().parse_overrides(list(sweep_overrides))
        if not isinstance(self.loader, ConfigLoaderImpl) or any(
            override.is_hydra_override() or override.is_sweep_override() for override in parsed
        ):
            return self.loader.load_sweep_config(master_config, sweep_overrides)
        repository = self._repository_of(master_config)
        choices = [
            o for o in parsed if repository.group_exists(o.key_or_group) and not isinstance(o.value(), dict)
        ]
        values = [o for o in parsed if not any(o is choice for choice in choices)]
        key = tuple(str(o.input_line) for o in choices)
        if key not in self._merged:
            self._merged[key] = self.loader.load_sweep_config(master_config, list(key))
        cfg = copy.deepcopy(self._merged[key])
        ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
        _record_overrides(cfg, parsed)
        OmegaConf.copy_cache(from_config=master_config, to_config=cfg)
        return cfg

    def _repository_of(self, master_config: DictConfig) -> Any:
        """The config repository a job of this sweep is composed from (its search path: the primary
        config's and the command line's ``hydra.searchpath``), in which Hydra's defaults list tells a
        group choice from a value (``defaults_list.Overrides``)."""
        if self._repository is None:
            # Unresolved, as Hydra reads them: hydra.sweep.subdir=${hydra.job.num} is a string here.
            hydra_overrides = OmegaConf.to_container(master_config.hydra.overrides.hydra)
            _, self._repository = self.loader._parse_overrides_and_create_caching_repo(
                master_config.hydra.job.config_name, hydra_overrides
            )
        return self._repository

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
