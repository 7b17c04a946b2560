"""CARS-98N read from PRISM's download layout plus the Cars196 test split, on a generated layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate

from layouts import class_colour, make_cars98n
from noisydml import CONFIG_DIR
from noisydml.data.base import DatasetLayoutError
from noisydml.data.transforms import IMAGENET_MEAN, IMAGENET_STD


def compose_config(*overrides: str):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "config", overrides=["dataset=cars98n", "dataset.image_size=32", "dataset.resize=36", *overrides]
        )
    GlobalHydra.instance().clear()
    return cfg


def test_cars98n_labels_folders_alphabetically_and_tests_on_cars196_classes_99_up(tmp_path: Path):
    make_cars98n(tmp_path)
    splits = instantiate(compose_config(f"paths.data_dir={tmp_path}").dataset).splits()
    assert splits.train.verify() == 1  # the error page saved as .jpg
    # Folders 0, 1, 10, 2 are classes 1, 2, 3, 4 (the .gif is not an image of the layout).
    assert np.unique(splits.train.labels, return_counts=True)[1].tolist() == [3, 3, 3, 3]
    assert [Path(p).parent.name for p in splits.train.paths[::3]] == ["0", "1", "10", "2"]
    mean, std = torch.tensor(IMAGENET_MEAN), torch.tensor(IMAGENET_STD)
    for index in range(len(splits.train)):
        image, label, _ = splits.train[index]
        colour = ((image.mean(dim=(1, 2)) * std + mean) * 255).numpy()
        np.testing.assert_allclose(colour, class_colour(label), atol=4)
    assert np.unique(splits.test.labels).tolist() == [99, 100]


def test_cars98n_runs_with_prisms_own_list(tmp_path: Path):
    # CARSN_train.csv names /data/cars_noise/img_v3/<folder>/<file>,<label>: it matches this layout.
    folder = make_cars98n(tmp_path)
    images = sorted((folder / "img_v3").glob("*/0*.jpg"))
    labels = {name: label for label, name in enumerate(sorted({p.parent.name for p in images}), 1)}
    listed = tmp_path / "CARSN_train.csv"
    listed.write_text(
        "".join(f"/data/cars_noise/img_v3/{p.parent.name}/{p.name},{labels[p.parent.name]}\n" for p in images)
    )
    cfg = compose_config(
        f"paths.data_dir={tmp_path}",
        "noise=from_file",
        f"noise.path={listed}",
        "data.P=2",
        "data.K=2",
        "data.val_fraction=0",
    )
    module = instantiate(cfg.data, _partial_=True)(
        dataset=instantiate(cfg.dataset), noise=instantiate(cfg.noise)
    )
    module.setup("fit")
    assert module.noise_summary()["details"]["matched"] == 12
    assert (module.noisy.observed == module.noisy.true).all()


def test_cars98n_without_its_download_names_the_layout_and_the_key(tmp_path: Path):
    dataset = instantiate(compose_config(f"paths.data_dir={tmp_path}").dataset)
    with pytest.raises(DatasetLayoutError, match=r"(?s)img_v3/ not found under dataset.root=.*download.py"):
        dataset.splits()
