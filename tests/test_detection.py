"""The report's noise-detection curves, from real PRISM runs on the digits."""

from __future__ import annotations

import matplotlib.image

from noisydml.report.cli import write_report
from noisydml.report.collect import collect
from noisydml.report.detection import epoch_series
from noisydml.train import train


def test_prism_runs_give_a_detection_curve_per_epoch_in_the_report(compose_config, tmp_path):
    for seed in (0, 1):
        cfg = compose_config(
            "method=prism/prism", "noise.rate=0.4", f"seed={seed}", "trainer.max_epochs=2", run=f"seed{seed}"
        )
        train(cfg)
    runs = collect([tmp_path])
    assert len(runs) == 2
    series = epoch_series(runs[0])
    # Every epoch's AUC, precision and recall, each a fraction.
    for metric in ("train/prism_auc", "train/prism_precision", "train/prism_recall"):
        assert sorted(series[metric]) == [0, 1]
        assert all(0.0 <= value <= 1.0 for value in series[metric].values())
    report = write_report([tmp_path], tmp_path / "out", name="detection")
    drawn = [path for path, _ in report.figures if "prism_auc" in path.name]
    assert len(drawn) == 1 and matplotlib.image.imread(drawn[0]).shape[0] > 100
    assert "ROC AUC of PRISM's score" in (report.directory / "report.md").read_text()
