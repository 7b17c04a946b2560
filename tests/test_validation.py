"""The validation split held out of the training split, and model selection on it, never on the test split."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from hydra.utils import instantiate

import layouts
from noisydml.data import MetricDataModule
from noisydml.run.train import train


def data_module(cfg) -> MetricDataModule:
    """The run's data module, set up as ``train`` sets it up (noise drawn, validation held out)."""
    datamodule = instantiate(cfg.data, _partial_=True)(
        dataset=instantiate(cfg.dataset), noise=instantiate(cfg.noise)
    )
    datamodule.setup("fit")
    return datamodule


def features_rows(tmp_path: Path, **layout) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A generated features.npz (every row a distinct random vector) and the overrides that train on it."""
    layouts.make_features(tmp_path / "data", dim=8, **layout)
    with np.load(tmp_path / "data" / "features" / "features.npz") as npz:
        features, split = npz["features"].astype(np.float32), npz["split"]
    overrides = ["dataset=features", f"paths.data_dir={tmp_path / 'data'}", "data.P=2", "data.K=2"]
    return overrides, features, split


def rows_of(dataset, features: np.ndarray) -> np.ndarray:
    """The .npz row of every item of ``dataset``, found by its feature vector."""
    items = np.stack([dataset[i][0].numpy() for i in range(len(dataset))])
    return np.array([np.flatnonzero((features == item).all(axis=1))[0] for item in items])


@pytest.mark.parametrize(
    ("layout", "kind"),
    [
        ({"classes": 40, "per_class": 4}, "class_disjoint"),
        ({"classes": 6, "per_class": 12, "test_per_class": 2}, "stratified"),
    ],
)
def test_validation_items_come_from_the_training_split_never_the_test_split(
    compose_config, tmp_path, layout, kind
):
    overrides, features, split = features_rows(tmp_path, **layout)
    datamodule = data_module(compose_config(*overrides, "data.val_fraction=0.1", "noise.rate=0.3"))
    assert datamodule.resolved_val_split == kind

    val_rows = rows_of(datamodule.val_set, features)
    train_rows = rows_of(datamodule.train_set, features)
    test_rows = rows_of(datamodule.splits.test, features)
    assert set(split[val_rows]) == {"train"}
    assert not set(val_rows) & set(test_rows) and not set(val_rows) & set(train_rows)
    # The held-out and the trained-on samples are the whole training split.
    assert sorted([*val_rows, *train_rows]) == sorted(np.flatnonzero(split == "train"))

    val_classes = set(datamodule.val_set.noisy.observed)
    trained_classes = set(datamodule.noisy.observed)
    if kind == "class_disjoint":
        # 2 of the 20 training classes, never trained on, none of them a test class.
        assert len(val_classes) == 2
        assert not val_classes & trained_classes
        assert not val_classes & set(datamodule.splits.test.labels)
        assert datamodule.validation_summary()["classes"] == sorted(val_classes)
    else:
        # 10% of each class's 10 training items.
        assert len(datamodule.val_set) == 6 and val_classes == trained_classes


@pytest.mark.parametrize("split", ["same_classes", "disjoint"])
def test_training_part_keeps_the_noisy_labels_it_has_without_a_validation_split(compose_config, split):
    """The noise is drawn on the whole training split before the hold-out: the same seed gives every
    training sample the same observed label with or without a validation split, held-out ones included."""
    overrides = [f"dataset.split={split}", "noise.rate=0.4", "seed=5", "data.P=3"]
    if split == "disjoint":
        overrides.append("data.val_fraction=0.4")  # 2 of the 5 training digits
    without = data_module(compose_config(*overrides, "data.val_fraction=0"))
    with_val = data_module(compose_config(*overrides))
    observed = dict(zip(without.noisy.indices.tolist(), without.noisy.observed.tolist(), strict=True))

    assert without.val_set is None
    trained, held = with_val.noisy, with_val.val_set.noisy
    assert {i: observed[i] for i in trained.indices.tolist()} == dict(
        zip(trained.indices.tolist(), trained.observed.tolist(), strict=True)
    )
    assert {i: observed[i] for i in held.indices.tolist()} == dict(
        zip(held.indices.tolist(), held.observed.tolist(), strict=True)
    )
    # As noisy as the rest: the held-out samples carry their share of the flipped labels.
    assert np.mean(held.observed != held.true) > 0.2
    # Scored by the labels a user has: the observed ones.
    assert [with_val.val_set[i][1] for i in range(len(held.indices))] == held.observed.tolist()


def test_validation_split_is_seeded_and_saved_with_the_run(compose_config):
    first = data_module(compose_config("seed=1"))
    again = data_module(compose_config("seed=1"))
    other = data_module(compose_config("seed=2"))
    assert np.array_equal(first.val_set.noisy.indices, again.val_set.noisy.indices)
    assert not np.array_equal(first.val_set.noisy.indices, other.val_set.noisy.indices)

    cfg = compose_config("seed=1")
    train(cfg)
    run_dir = Path(cfg.paths.output_dir)
    with open(run_dir / "validation.csv") as f:
        saved = [int(row["index"]) for row in csv.DictReader(f)]
    assert saved == first.val_set.noisy.indices.tolist()
    validation = json.loads((run_dir / "results.json").read_text())["validation"]
    assert validation["split"] == "stratified" and validation["labels"] == "observed"
    assert validation["num_samples"] == len(saved)


def test_no_validation_split_tests_the_last_epoch_as_before(compose_config):
    cfg = compose_config("data.val_fraction=0")
    metrics = train(cfg)
    run_dir = Path(cfg.paths.output_dir)
    assert all(name.startswith("test/") for name in metrics)
    assert not (run_dir / "validation.csv").exists()
    results = json.loads((run_dir / "results.json").read_text())
    assert results["selection"] is None and results["validation"] is None
    assert not (run_dir / "checkpoints" / "best.ckpt").exists()


def logged_validations(run_dir: Path) -> dict[int, dict[str, float]]:
    """csv/metrics.csv's validation rows by epoch."""
    with open(run_dir / "csv" / "metrics.csv") as f:
        rows = [row for row in csv.DictReader(f) if row.get("val/recall@1")]
    return {int(row["epoch"]): {k: float(v) for k, v in row.items() if v and "/" in k} for row in rows}


@pytest.mark.slow
def test_selection_on_val_restores_the_selected_epoch_for_the_test_split(compose_config):
    """A learning rate too high for the model makes its first epoch its best, so the selected epoch is not
    the last; the test split scored with the restored checkpoint must then equal the test split scored at
    that epoch during training (data.test_at_validation), not the last epoch's."""
    cfg = compose_config(
        "trainer.max_epochs=4",
        "trainer.check_val_every_n_epoch=1",
        "data.test_at_validation=true",
        "optimizer.lr=0.05",
    )
    metrics = train(cfg)
    run_dir = Path(cfg.paths.output_dir)
    logged = logged_validations(run_dir)
    selection = json.loads((run_dir / "results.json").read_text())["selection"]

    assert sorted(logged) == [0, 1, 2, 3]
    best = max(logged, key=lambda epoch: (logged[epoch]["val/recall@1"], -epoch))
    assert selection["epoch"] == best and selection["last_epoch"] == 3
    assert best != 3, "the construction needs a run whose last epoch is not its best"
    assert metrics["selected_val/recall@1"] == pytest.approx(logged[best]["val/recall@1"])
    for name in ("recall@1", "map@r", "nmi"):
        assert metrics[f"test/{name}"] == pytest.approx(logged[best][f"test_epoch/{name}"], abs=1e-6)
        assert metrics[f"test_last/{name}"] == pytest.approx(logged[3][f"test_epoch/{name}"], abs=1e-6)
    assert metrics["test/recall@1"] != metrics["test_last/recall@1"]
    # What selecting on the test split would have reported, beside ours.
    best_test = max(logged, key=lambda epoch: (logged[epoch]["test_epoch/recall@1"], -epoch))
    assert selection["test_best_epoch"] == best_test
    assert metrics["test_best_epoch/recall@1"] == pytest.approx(logged[best_test]["test_epoch/recall@1"])


@pytest.mark.slow
def test_early_stopping_watches_a_validation_metric(compose_config):
    early_stop = (
        "callbacks.early_stop={_target_: pytorch_lightning.callbacks.EarlyStopping, "
        "monitor: val/recall@1, mode: max, patience: 1}"
    )
    cfg = compose_config(
        "trainer.max_epochs=8", "trainer.check_val_every_n_epoch=1", "optimizer.lr=0.05", early_stop
    )
    train(cfg)
    # A learning rate too high for the model: it stops one validation after the first that does not improve.
    epochs = sorted(logged_validations(Path(cfg.paths.output_dir)))
    assert len(epochs) < 8

    with pytest.raises(ValueError, match=r"EarlyStopping monitors val/recall@1.*data.val_fraction=0"):
        train(compose_config("data.val_fraction=0", early_stop, run="none"))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.val_fraction=1"], r"data.val_fraction=1 is outside \[0, 1\)"),
        (["data.val_split=random"], r"data.val_split='random' is not one of"),
        (
            ["dataset.split=disjoint", "data.val_fraction=0.1"],
            r"holds out 0 of the 5 training classes; a class-disjoint validation split needs at least 2",
        ),
    ],
)
def test_bad_validation_options_stop_before_training(compose_config, overrides, message):
    with pytest.raises(ValueError, match=message):
        train(compose_config(*overrides))


def test_the_last_epoch_is_always_validated_and_epoch_lines_show_only_validations_that_ran(
    compose_config, capsys
):
    """Validation every 3 epochs of 5: epochs 3 and 5 (the last) are validated, and only their lines show
    val/ values; with max_epochs below the interval the run would otherwise never validate."""
    cfg = compose_config(
        "trainer.max_epochs=5", "data.batches_per_epoch=2", "trainer.check_val_every_n_epoch=3"
    )
    train(cfg)
    with (Path(cfg.paths.output_dir) / "csv" / "metrics.csv").open(newline="") as f:
        validated = [int(row["epoch"]) for row in csv.DictReader(f) if row.get("val/recall@1")]
    assert validated == [2, 4]
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch ")]
    assert [("val/recall@1=" in line) for line in lines] == [False, False, True, False, True]

    short = compose_config("trainer.max_epochs=2", "data.batches_per_epoch=2", run="short")
    train(short)
    selection = json.loads((Path(short.paths.output_dir) / "results.json").read_text())["selection"]
    assert selection["epoch"] == selection["last_epoch"] == 1


def test_metrics_csv_ends_its_lines_with_lf(compose_config):
    cfg = compose_config("trainer.max_epochs=2", "data.batches_per_epoch=2")
    train(cfg)
    text = (Path(cfg.paths.output_dir) / "csv" / "metrics.csv").read_bytes()
    assert b"\r" not in text and text.count(b"\n") > 4
