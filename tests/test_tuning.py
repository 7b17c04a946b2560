"""scripts/reproduce.py tunes an experiment's declared values with Optuna on the validation split, then
runs the sweep with the values chosen."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "noise.rate=0.2",
    "seed=0",
    # One epoch, which the study's trials validate (a run's last epoch always does); the final sweep of the
    # experiment holds out no validation split.
    "trainer.max_epochs=1",
    "data.batches_per_epoch=3",
    # Shortened: another run than the experiment's, under labels of its own; its jobs' folders numbered, as
    # the labels make the chosen values' folder names too long for a file system.
    "name=tiny",
    "report.figure=tests/tiny",
    "hydra.sweep.subdir=${hydra.job.num}",
]


@pytest.mark.slow
def test_study_of_three_trials_chooses_the_best_validation_value_and_the_sweep_uses_it(tmp_path):
    experiment = "digits/zhang2023_noise"
    # Overrides after an option, as a user types them (argparse alone takes them only straight after the
    # experiment).
    command = [sys.executable, str(ROOT / "scripts" / "reproduce.py"), experiment]
    command += ["--out", "outputs/reproduce"]
    command += ["method=zhang2023/bspml", "tune.trials=3", *TINY]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # A trial is continued by its search run again: resume=<trial> is refused.
    assert "(a trial of a search: if it stops, run the search's command again)" in done.stdout

    # BSPML's lambda_inf is drawn from an interval, so the three trials are three different runs. Job
    # folders nest where an override holds a "/" (method=zhang2023/bspml).
    study = tmp_path / "outputs" / "tuning" / experiment / "zhang2023/bspml"
    trials = [json.loads(p.read_text()) for p in study.rglob("results.json")]
    assert len(trials) == 3
    # The experiment's numerics hold in every trial of the one process the study runs in.
    assert {trial["numerics"]["mode"] for trial in trials} == {"avx2"}
    scores = {
        trial["config"]["loss"]["age_max"]: trial["metrics"]["selected_val/recall@1"] for trial in trials
    }
    assert all(1 <= value <= 5 for value in scores)
    found = yaml.safe_load((study / "optimization_results.yaml").read_text())
    best = found["best_params"]["loss.age_max"]
    # The chosen value is a trial's, with the best score of the three (trials may tie after one epoch).
    assert scores[best] == max(scores.values()) == pytest.approx(found["best_value"])

    sweep = tmp_path / "outputs" / "reproduce" / experiment
    tuning = json.loads((sweep / "tuning.json").read_text())
    assert tuning["trials"] == 3 and tuning["metric"] == "val/recall@1"
    assert tuning["methods"]["zhang2023/bspml"]["chosen"] == {"loss.age_max": best}
    # Only BSPML runs in this sweep, so RDML's declared study is not run.
    assert list(tuning["methods"]) == ["zhang2023/bspml"]

    (final,) = [json.loads(p.read_text()) for p in sweep.rglob("results.json")]
    assert final["config"]["loss"]["age_max"] == best and final["config"]["loss"]["mu"] == best
    report = (tmp_path / "outputs" / "reports" / "digits_zhang2023_noise" / "report.md").read_text()
    assert "## Tuning" in report and f"`loss.age_max={best}`" in report
