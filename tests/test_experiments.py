"""Every experiment config composes and trains for two steps at a tiny scale, so no config rots."""

from __future__ import annotations

from pathlib import Path

import pytest

import layouts
from noisydml.train import CONFIG_PATH, train

EXPERIMENTS = sorted(
    str(p.relative_to(Path(CONFIG_PATH) / "experiment").with_suffix(""))
    for p in (Path(CONFIG_PATH) / "experiment").rglob("*.yaml")
)
# Tiny folders in each image layout, with enough classes for a 2 x 2 batch.
GENERATORS = {
    "cub": (layouts.make_cub, "CUB_200_2011"),
    "cars196": (layouts.make_cars, "cars196"),
    "sop": (layouts.make_sop, "Stanford_Online_Products"),
    "inshop": (layouts.make_inshop, "InShop"),
    "flowers102": (layouts.make_flowers, "flowers102"),
}
TINY_IMAGES = [
    "dataset.image_size=32",
    "dataset.resize=36",
    "backbone.trunk.pretrained=false",
    "module.recall_ks=[1,2]",
]


def test_there_are_experiments():
    assert "digits/le2019_noise" in EXPERIMENTS and "le2019/fig2_cub" in EXPERIMENTS


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_trains_two_steps(compose_config, tmp_path, experiment):
    cfg = compose_config(f"experiment={experiment}")
    overrides = [
        f"experiment={experiment}",
        "trainer.max_steps=2",
        "data.batches_per_epoch=2",
        "data.num_workers=0",
        "data.pin_memory=false",
    ]
    if (name := cfg.dataset.get("name")) in GENERATORS:
        make, _ = GENERATORS[name]
        make(tmp_path / "data", size=40)
        overrides += [f"paths.data_dir={tmp_path / 'data'}", "data.P=2", "data.K=2", *TINY_IMAGES]
    metrics = train(compose_config(*overrides))
    assert metrics and all(0.0 <= value <= 1.0 for value in metrics.values())
