"""The rules on the composed config that need nothing built, in order: the table of keys, every node
against its class, the parts whose constructors check their own values, the method and the run's
identity."""

from __future__ import annotations

from omegaconf import DictConfig

from noisydml.run.checks.classes import check_classes
from noisydml.run.checks.identity import check_identity, check_method
from noisydml.run.checks.keys import check_keys
from noisydml.run.checks.library import check_built


def check_config(cfg: DictConfig, choices: dict[str, str]) -> None:
    """Refuse the first bad key of the composed config, before anything is built."""
    check_keys(cfg)
    check_classes(cfg)
    check_built(cfg)
    check_method(choices)
    check_identity(cfg, choices)
