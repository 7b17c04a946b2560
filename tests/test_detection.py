"""The report's noise-detection curves, from real PRISM runs and plain runs on the digits."""

from __future__ import annotations

import csv

import matplotlib.image
import pytest

from noisydml.report.cli import write_report
from noisydml.report.collect import KNN_EMBEDDING, collect
from noisydml.report.detection import METHOD_INPUTS, epoch_series
from noisydml.run.train import train
from noisydml.utils.errors import BadInput


@pytest.mark.slow
def test_prism_runs_give_a_detection_curve_per_epoch_in_the_report(compose_config, tmp_path):
    for seed in (0, 1):
        cfg = compose_config(
            "method=prism/prism", "noise.rate=0.4", f"seed={seed}", "trainer.max_epochs=2", run=f"seed{seed}"
        )
        train(cfg)
    # The plain run's per-sample loss beside it, the reference.
    train(compose_config("callbacks=loss_detection", "noise.rate=0.4", "trainer.max_epochs=2", run="plain"))
    runs = collect([tmp_path])
    assert len(runs) == 3
    series = epoch_series(next(run for run in runs if run.path.name == "seed0"))
    # Every epoch's AUC, precision and recall, each a fraction.
    for metric in ("train/prism_auc", "train/prism_precision", "train/prism_recall"):
        assert sorted(series[metric]) == [0, 1]
        assert all(0.0 <= value <= 1.0 for value in series[metric].values())
    report = write_report([tmp_path], tmp_path / "out", name="detection")
    drawn = [(path, caption) for path, caption in report.figures if "detection_auc" in path.name]
    ((path, caption),) = drawn
    assert matplotlib.image.imread(path).shape[0] > 100
    assert "ROC AUC at finding flipped labels, of PRISM's score, per-sample loss" in caption
    assert caption in (report.directory / "report.md").read_text()


def test_plain_run_logs_how_well_its_per_sample_loss_finds_the_flipped_labels(compose_config, tmp_path):
    # 40% of the digits' labels flipped at random: a flipped sample's positives are of another digit, so its
    # triplets cost more than a clean one's from the first epoch on.
    cfg = compose_config(
        "callbacks=loss_detection", "noise.rate=0.4", "trainer.max_epochs=2", "data.batches_per_epoch=6"
    )
    train(cfg)
    (run,) = collect([tmp_path])
    series = epoch_series(run)
    for metric in ("train/loss_auc", "train/loss_precision", "train/loss_recall"):
        assert sorted(series[metric]) == [0, 1]
    assert all(auc > 0.7 for auc in series["train/loss_auc"].values())
    # As many flagged as flipped: precision and recall are one number, far above the 40% of a random pick.
    assert series["train/loss_precision"] == series["train/loss_recall"]
    assert all(precision > 0.55 for precision in series["train/loss_precision"].values())
    # Without noise there is nothing to find: chosen for such a run, it is refused as logging nothing.
    with pytest.raises(
        BadInput, match=r"^callbacks.loss_detection scores how well the flipped labels are found"
    ):
        train(compose_config("callbacks=loss_detection", "noise.rate=0", run="clean"))


def test_noisy_dml_experiments_log_the_per_sample_loss_reference(compose_config):
    for experiment in ("digits", "mnist5k"):
        for noise in ("symmetric", "small_cluster"):
            cfg = compose_config(f"experiment=noisy_dml/{experiment}_{noise}", tiny=False)
            assert cfg.callbacks.loss_detection._target_ == "noisydml.callbacks.loss_detection.LossDetection"


@pytest.mark.slow
def test_a_comparisons_report_states_the_vote_on_the_inputs_per_setting_beside_each_methods_detectors(
    compose_config, tmp_path
):
    # Two methods of the noisy_dml comparison, two seeds each, on the same noisy labels per seed.
    for method in ("le2019/triplet_random_semihard", "prism/prism"):
        for seed in (0, 1):
            train(
                compose_config(
                    "experiment=noisy_dml/digits_symmetric",
                    f"method={method}",
                    "noise.rate=0.5",
                    f"seed={seed}",
                    "trainer.max_epochs=1",
                    # Shortened: another run than the experiment's, under labels of its own.
                    "name=comparison",
                    "report.figure=noisy_dml/comparison",
                    run=f"{method.replace('/', '_')}_{seed}",
                )
            )
    runs = collect([tmp_path])
    report = write_report([tmp_path], tmp_path / "out", name="comparison")
    with (report.directory / "detection.csv").open() as f:
        rows = list(csv.DictReader(f))
    inputs = [r for r in rows if r["method"] == METHOD_INPUTS]
    # The vote on the inputs once per setting, first, the mean of the seeds' own votes (the same for both
    # methods at a seed: one seed fixes the noisy labels).
    ((vote,),) = [inputs]
    assert rows[0] == vote and vote["noise_rate"] == "0.5" and vote["n_seeds"] == "2"
    by_seed = {}
    for run in runs:
        by_seed.setdefault(run.seed, set()).add(run.metrics["train/knn_start_auc"])
    assert all(len(values) == 1 for values in by_seed.values())
    expected = sum(values.pop() for values in by_seed.values()) / 2
    assert float(vote["auc"]) == pytest.approx(expected) and 0.5 < expected <= 1
    # Then each method's detectors: PRISM's own score, the per-sample loss, the vote on its embedding.
    scores = {(r["method"], r["score"]) for r in rows if r["method"] != METHOD_INPUTS}
    prism = {score for method, score in scores if method.startswith("PRISM")}
    assert prism == {"PRISM's score", KNN_EMBEDDING}
    assert {score for method, score in scores if not method.startswith("PRISM")} == {
        "per-sample loss",
        KNN_EMBEDDING,
    }
    # Each detector one row with its AUC, precision and recall.
    assert all(r["auc"] and r["precision"] and r["recall"] for r in rows) and len(rows) == 1 + 4
    text = (report.directory / "report.md").read_text()
    assert "## Finding the flipped labels" in text and f"| {METHOD_INPUTS} |" in text
    assert f"{float(vote['auc']):.3f}" in text
