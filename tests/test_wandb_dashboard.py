"""W&B runs organised for its dashboard, read back from the offline run files two real sweeps write."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sweeps import checkout_env
from wandb_records import logged_config, records

TINY = [
    "trainer.max_epochs=2",
    "data.batches_per_epoch=2",
    "trainer.enable_progress_bar=false",
    "cpu_threads=1",
]


def _sweep(folder: Path, *overrides: str) -> list[Path]:
    env = {**checkout_env(), "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    command = [
        sys.executable,
        "-c",
        "from noisydml.run.cli import main; main()",
        "-m",
        "logger=default",
        *TINY,
    ]
    done = subprocess.run(
        [*command, *overrides, f"hydra.sweep.dir={folder}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return sorted(folder.glob("*/wandb/offline-run-*/run-*.wandb"))


def _run_record(path: Path):
    (run,) = [r.run for r in records(path) if r.WhichOneof("record_type") == "run"][:1]
    return run


def _summary(path: Path) -> dict:
    summary = {}
    for record in records(path):
        if record.WhichOneof("record_type") == "summary":
            summary.update(
                {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.summary.update}
            )
    return summary


def _step_metrics(path: Path) -> dict[str, str]:
    """Each metric's step metric as define_metric declared it (globs included)."""
    return {
        r.metric.name or r.metric.glob_name: r.metric.step_metric
        for r in records(path)
        if r.WhichOneof("record_type") == "metric"
    }


@pytest.mark.slow
def test_two_sweeps_land_in_two_groups_with_readable_names_flat_choices_and_a_summary(tmp_path):
    first = _sweep(tmp_path / "first", "miner=random_semihard,fixed_semihard")
    second = _sweep(tmp_path / "second", "noise.rate=0,0.4")
    assert len(first) == 2 and len(second) == 2

    groups = {path: _run_record(path).run_group for path in first + second}
    assert {groups[p] for p in first} == {"default/first"}
    assert {groups[p] for p in second} == {"default/second"}

    names = sorted(_run_record(path).display_name for path in first)
    assert names == [f"{' '.join(TINY[:2])} miner={m}" for m in ("fixed_semihard", "random_semihard")]
    assert {_run_record(path).job_type for path in first + second} == {"train"}

    for path in second:
        config = logged_config(path)
        results = json.loads((path.parents[2] / "results.json").read_text())
        flat = {
            k: config[k]
            for k in ("dataset", "backbone", "loss", "miner", "noise", "noise_rate", "method", "seed")
        }
        assert flat == {
            "dataset": "digits",
            "backbone": "mlp",
            "loss": "triplet",
            "miner": "random_semihard",
            "noise": "uniform",
            "noise_rate": results["config"]["noise"]["rate"],
            "method": "Triplet + random semi-hard",
            "seed": 0,
        }
        # The whole resolved config is still there, below the choices.
        assert config["cfg"]["miner"]["_target_"] == "noisydml.miners.RandomSemihardMiner"

        summary = _summary(path)
        assert summary["status"] == "finished"
        assert summary["selected_epoch"] == results["selection"]["epoch"] + 1
        assert summary["realized_noise_rate"] == pytest.approx(results["noise"]["realized_rate"])
        assert 0 < summary["wall_time_s"] < 600
        assert summary["test/recall@1"] == pytest.approx(results["metrics"]["test/recall@1"])

        axes = _step_metrics(path)
        assert axes["val/*"] == "epoch"
        assert "epoch" in axes


def _report(sweep: Path, out: Path, *options: str) -> Path:
    env = {**checkout_env(), "WANDB_MODE": "offline"}
    command = [sys.executable, "-c", "from noisydml.report.cli import main; main()", str(sweep)]
    done = subprocess.run(
        [*command, "--out", str(out), *options], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out / sweep.name


@pytest.mark.slow
def test_the_report_of_a_sweep_is_an_artifact_of_a_report_run_in_the_sweeps_group(tmp_path):
    jobs = _sweep(tmp_path / "sweep", "noise.rate=0,0.4")
    (group,) = {_run_record(path).run_group for path in jobs}
    (project,) = {_run_record(path).project for path in jobs}

    report = _report(tmp_path / "sweep", tmp_path / "reports")
    (run_file,) = report.glob("wandb/offline-run-*/run-*.wandb")
    run = _run_record(run_file)
    assert (run.project, run.run_group, run.job_type) == (project, group, "report")
    (artifact,) = [r.artifact for r in records(run_file) if r.WhichOneof("record_type") == "artifact"]
    assert (artifact.type, artifact.name) == ("report", "report-sweep")
    logged = sorted(entry.path for entry in artifact.manifest.contents)
    written = sorted(
        str(p.relative_to(report)) for p in report.rglob("*") if p.is_file() and "wandb" not in p.parts
    )
    assert logged == written
    assert {"report.md", "runs.csv", "jobs.csv", "cells.csv"} <= set(logged)
    assert any(path.startswith("figures/") and path.endswith(".png") for path in logged)

    unlogged = _report(tmp_path / "sweep", tmp_path / "unlogged", "--no-wandb")
    assert (unlogged / "report.md").is_file() and not (unlogged / "wandb").exists()
