"""Shared fixtures: real Hydra composition of the project's own conf/ folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

import layouts
import sweeps
from noisydml import CONFIG_DIR

# Small and fast: one short epoch on digits, CSV logging only.
TINY = [
    "trainer.max_epochs=1",
    "data.batches_per_epoch=3",
    "trainer.log_every_n_steps=1",
    "logger=csv",
    "trainer.enable_progress_bar=false",
]


@pytest.fixture
def compose_config(tmp_path: Path) -> Callable[..., DictConfig]:
    """Compose ``conf/config.yaml`` with overrides, as ``noisydml`` would, writing to tmp_path/<run>."""

    def _compose(*overrides: str, tiny: bool = True, run: str = "run") -> DictConfig:
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(
                "config",
                overrides=[*(TINY if tiny else []), *overrides],
                return_hydra_config=True,
            )
        # The ${hydra:...} interpolations (W&B tags) resolve against this, as in a real run.
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            cfg.paths.output_dir = str(tmp_path / run)
            del cfg["hydra"]
        return cfg

    yield _compose
    GlobalHydra.instance().clear()


@pytest.fixture
def compose_choices():
    """Compose like compose_config, returning the config and its group choices as a run sees them."""
    from noisydml.run.checks.walk import group_choices

    def _compose(*overrides: str):
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose("config", overrides=list(overrides), return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        return cfg, group_choices()

    yield _compose
    GlobalHydra.instance().clear()


@pytest.fixture(scope="session")
def small_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sweep of issue 27 (tests/sweeps.py), run once for every test that reads it."""
    return sweeps.run_sweep(tmp_path_factory.mktemp("small_sweep") / "sweep")


@pytest.fixture
def tiny_cub(tmp_path: Path) -> list[str]:
    """A generated CUB folder of 4 classes x 3 images and the overrides that train on it (layouts.cub_run)."""
    return layouts.cub_run(tmp_path / "data")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
