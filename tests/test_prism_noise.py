"""PRISM's noise protocols (Liu et al., CVPR 2021): symmetric noise is ``uniform``, small-cluster noise,
and published label lists imported with ``noise=from_file``, on generated layouts."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate

from layouts import make_cars_class_folders, make_cub
from noisydml import CONFIG_DIR
from noisydml.data.base import DatasetLayoutError
from noisydml.noise import SmallClusterNoise, UniformNoise


def datamodule(*overrides: str):
    """The composed config's data module with its data set and noise, set up (noisy labels drawn)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "data.val_fraction=0",
                "data.P=2",
                "data.K=2",
                "data.small_classes=replace",
                *overrides,
            ],
        )
    GlobalHydra.instance().clear()
    module = instantiate(cfg.data, _partial_=True)(
        dataset=instantiate(cfg.dataset), noise=instantiate(cfg.noise)
    )
    module.setup("fit")
    return module


# --------------------------------------------------------------------------------------------- symmetric


def test_uniform_is_prisms_symmetric_noise_independent_flips_to_other_classes():
    labels = np.repeat(np.arange(50), 20)
    noisy = instantiate_option("uniform", rate=0.5).apply(labels)
    flipped = noisy.observed != noisy.true
    assert not np.any(noisy.observed[flipped] == noisy.true[flipped])
    per_class = np.bincount(noisy.true, weights=flipped)
    # Independent flips: per-class counts scatter (binomial, sd ~2.2), unlike `exact`'s fixed 10 per class.
    assert per_class.std() > 1.0
    assert abs(flipped.mean() - 0.5) < 0.05


def instantiate_option(option: str, **values):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"noise={option}", *(f"noise.{k}={v}" for k, v in values.items())])
    GlobalHydra.instance().clear()
    model = instantiate(cfg.noise)
    assert isinstance(model, UniformNoise)
    return model


# ----------------------------------------------------------------------------------------- small cluster


def uneven_classes() -> np.ndarray:
    rng = np.random.default_rng(3)
    return np.repeat(np.arange(100, 120), rng.integers(1, 12, size=20))


@pytest.mark.parametrize("rate, dissolved", [(0.25, 5), (0.5, 10)])
def test_small_cluster_dissolves_the_fraction_of_classes_into_surviving_ones(rate, dissolved):
    labels = uneven_classes()
    noise = SmallClusterNoise(rate=rate, seed=0)
    noisy = noise.apply(labels)
    np.testing.assert_array_equal(noisy.true, labels)
    gone = np.array(noise.report["dissolved_classes"])
    assert len(gone) == dissolved
    surviving = np.setdiff1d(labels, gone)
    moved = np.isin(labels, gone)
    # Every image of a dissolved class lands in a surviving class; the others keep their labels.
    assert np.isin(noisy.observed[moved], surviving).all()
    np.testing.assert_array_equal(noisy.observed[~moved], labels[~moved])
    assert set(np.unique(noisy.observed)) == set(surviving)
    # At most ceil(n/2) clusters per dissolved class, so at most that many destinations.
    clusters = 0
    for c in gone:
        n = int((labels == c).sum())
        assert len(np.unique(noisy.observed[labels == c])) <= (n + 1) // 2
        clusters += (n + 1) // 2
    assert noise.report["num_clusters"] == clusters
    again = SmallClusterNoise(rate=rate, seed=0).apply(labels)
    np.testing.assert_array_equal(again.observed, noisy.observed)
    other = SmallClusterNoise(rate=rate, seed=1).apply(labels)
    assert np.any(other.observed != noisy.observed)


def test_small_cluster_kmeans_keeps_look_alike_images_together():
    # Two classes of 8 images, each four tight, far-apart pairs: k-means with 4 centroids finds the pairs,
    # so both images of a pair join the same surviving class; 8 other classes survive.
    labels = np.repeat(np.arange(10), 8)
    centres = np.random.default_rng(0).normal(scale=100.0, size=(40, 16))
    features = centres[np.arange(80) // 2] + np.random.default_rng(1).normal(scale=0.01, size=(80, 16))
    noise = SmallClusterNoise(rate=0.2, seed=0, clusters="kmeans", backbone=object())
    noisy = noise.apply(labels, features)
    for c in noise.report["dissolved_classes"]:
        pairs = noisy.observed[labels == c].reshape(4, 2)
        np.testing.assert_array_equal(pairs[:, 0], pairs[:, 1])
    assert noise.report["num_clusters"] == 8


def test_small_cluster_kmeans_embeds_the_training_set_with_the_runs_backbone():
    module = datamodule("noise=small_cluster_kmeans", "noise.rate=0.3")
    noisy, report = module.noisy, module.noise_summary()["details"]
    assert len(report["dissolved_classes"]) == 3
    moved = np.isin(noisy.true, report["dissolved_classes"])
    assert not np.isin(noisy.observed[moved], report["dissolved_classes"]).any()
    assert module.noise.backbone is not None


def test_small_cluster_refuses_kmeans_without_a_backbone_and_leaving_no_class():
    with pytest.raises(
        ValueError, match="^backbone=null, but clusters=kmeans clusters a backbone's features"
    ):
        SmallClusterNoise(rate=0.25, seed=0, clusters="kmeans")
    with pytest.raises(ValueError, match=r"noise.rate=0.9 dissolves 2 of the 2 .* leaves none"):
        SmallClusterNoise(rate=0.9, seed=0).apply(np.repeat([0, 1], 4))


# ------------------------------------------------------------------------------------------- from_file


def write_list(path, rows):
    path.write_text("".join(f"{p},{label}\n" for p, label in rows))


def prism_list(folder, tmp_path):
    """A list as PRISM wrote them: absolute paths of their machine, 1-based ids, a test class (101), a
    file that is not in the data set; one training image left out. Returns it and the training paths."""
    rows = [line.split() for line in (folder / "images.txt").read_text().splitlines()]
    labels = dict(line.split() for line in (folder / "image_class_labels.txt").read_text().splitlines())
    train = [(relpath, int(labels[i])) for i, relpath in rows if int(labels[i]) < 100]
    foreign = [(f"/data/CUB_200_2011/images/{relpath}", label) for relpath, label in train]
    noisy = list(foreign[:-1])
    noisy[0] = (noisy[0][0], 2 if noisy[0][1] != 2 else 1)  # a flipped label
    noisy[1] = (noisy[1][0], 101)  # a test class's id
    noisy.append(("/data/CUB_200_2011/images/999.Gone/Gone_0001.jpg", 3))  # a dead file
    listed = tmp_path / "lists" / "CUB_0.2noised_train.csv"
    listed.parent.mkdir()
    write_list(listed, noisy)
    clean = [row for k, row in enumerate(foreign[:-1]) if k not in (0, 1)]
    write_list(tmp_path / "lists" / "CUB_0.2noised_cleaned_train.csv", clean)
    return listed, train


def test_from_file_imports_a_prism_list_with_counts_and_true_labels(tmp_path):
    folder = make_cub(tmp_path, classes=6, per_class=6)
    listed, train = prism_list(folder, tmp_path)
    module = datamodule(
        "dataset=cub", f"paths.data_dir={tmp_path}", "noise=from_file", f"noise.path={listed}"
    )
    report = module.noise_summary()["details"]
    assert report["entries"] == len(train)  # all training images but one, and a dead file
    assert report["matched"] == len(train) - 1
    assert report["missing_files"] == 1
    assert report["training_images_not_listed"] == 1
    assert report["outside_labels"] == {"101": 1}
    assert report["true_from_cleaned_list"] == len(train) - 3
    noisy = module.noisy
    assert len(noisy.indices) == len(train) - 1
    assert (noisy.observed == 101).sum() == 1
    assert (noisy.observed != noisy.true).sum() == 2
    # Observed labels are remapped 0..C-1 for the losses: 101 is a fourth class beside 1, 2, 3.
    assert module.num_train_classes == 4
    module.write_labels(tmp_path / "labels.csv", tmp_path / "u.csv", tmp_path / "v.csv", tmp_path / "f.csv")
    with (tmp_path / "labels.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(train) - 1
    assert sum(row["true"] != row["observed"] for row in rows) == 2
    json.dumps(module.noise_summary())


def test_from_file_drops_labels_outside_the_training_classes_when_asked(tmp_path):
    folder = make_cub(tmp_path, classes=6, per_class=6)
    listed, train = prism_list(folder, tmp_path)
    module = datamodule(
        "dataset=cub",
        f"paths.data_dir={tmp_path}",
        "noise=from_file",
        f"noise.path={listed}",
        "noise.outside=drop",
    )
    assert len(module.noisy.indices) == len(train) - 2
    assert 101 not in module.noisy.observed
    assert module.num_train_classes == 3


def test_from_file_refuses_a_list_that_does_not_match_the_data_set(tmp_path):
    make_cub(tmp_path, classes=6, per_class=6)
    listed = tmp_path / "SOP_0.1noised_train.csv"
    write_list(listed, [(f"/data/Stanford_Online_Products/bicycle_final/{k}.JPG", 1) for k in range(9)])
    with pytest.raises(ValueError, match=r"only 0 of its 9 entries .* below noise.min_matched=0.9"):
        datamodule("dataset=cub", f"paths.data_dir={tmp_path}", "noise=from_file", f"noise.path={listed}")


def test_from_file_matches_prisms_cars_list_to_the_class_folder_layout(tmp_path):
    # PRISM's CARS lists name /data/cars196/images/<class name>/<file>, labels in the folders' sorted order
    # ("AM General Hummer SUV 2000" is 1), not car_ims/ of the release: dataset.class_folders=images reads
    # that layout, numbered the same way, so every entry matches and labels agree where none flipped.
    folder = make_cars_class_folders(tmp_path)
    train = sorted(folder.glob("images/*/*.jpg"))
    names = sorted({path.parent.name for path in train})
    label = {name: k for k, name in enumerate(names, 1)}
    rows = [(f"/data/cars196/{path.relative_to(folder)}", label[path.parent.name]) for path in train]
    rows = [row for row in rows if row[1] <= 2]
    rows[0] = (rows[0][0], 3 - rows[0][1])  # one flipped label
    listed = tmp_path / "CARS_0.1noised_train.csv"
    write_list(listed, rows)
    module = datamodule(
        "dataset=cars196",
        f"paths.data_dir={tmp_path}",
        "dataset.class_folders=images",
        "dataset.train_classes=2",
        "noise=from_file",
        f"noise.path={listed}",
    )
    assert names[:2] == ["AM General Hummer SUV 2000", "Acura RL Sedan 2012"]
    report = module.noise_summary()["details"]
    assert report["entries"] == report["matched"] == len(rows) == 6
    assert report["missing_files"] == report["training_images_not_listed"] == 0
    noisy = module.noisy
    assert (noisy.observed != noisy.true).sum() == 1


def test_cars196_class_folders_without_the_folder_shows_the_layout(tmp_path):
    (tmp_path / "cars196").mkdir()
    with pytest.raises(DatasetLayoutError, match="images/"):
        datamodule("dataset=cars196", f"paths.data_dir={tmp_path}", "dataset.class_folders=images")
