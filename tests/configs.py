"""The project's configs for unit tests: one group option instantiated on its own, or a node of the
composed config, and the losses that several test files build from them."""

from __future__ import annotations

import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from omegaconf import OmegaConf

from noisydml import CONFIG_DIR
from noisydml.losses import ClassBetaMarginLoss
from training_sets import of_classes


def options(group: str) -> list[str]:
    """The options of ``conf/<group>/``, as a user names them (``le2019/triplet`` for a file in a folder)."""
    return sorted(
        str(p.relative_to(CONFIG_DIR / group).with_suffix("")) for p in (CONFIG_DIR / group).rglob("*.yaml")
    )


def load(group: str, name: str, *overrides: str):
    """``conf/<group>/<name>.yaml`` with ``key=value`` overrides, instantiated."""
    cfg = OmegaConf.merge(
        OmegaConf.create({"node": OmegaConf.load(CONFIG_DIR / group / f"{name}.yaml")}),
        OmegaConf.from_dotlist([f"node.{o}" for o in overrides]),
    )
    return instantiate(cfg.node)


def compose_node(group: str, *overrides: str):
    """``cfg.<group>`` of the real composed config, instantiated (for configs with a defaults list)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    GlobalHydra.instance().clear()
    return instantiate(cfg[group])


def margin_with_betas(*betas: float) -> ClassBetaMarginLoss:
    loss = load("loss", "margin")
    loss.setup(of_classes(len(betas)))
    with torch.no_grad():
        loss.beta.copy_(torch.tensor(betas))
    return loss
