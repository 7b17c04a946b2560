"""What a run leaves in its directory, as a lab-mate and a log reader on a shared cluster see it."""

from __future__ import annotations

import csv
import json
import os
import shlex
import stat
from pathlib import Path

import pytest

from noisydml.report.cli import write_report
from noisydml.run.train import train
from noisydml.utils.atomic import write_json
from noisydml.utils.run_directory import RunDir
from test_bad_input import NaNAfter


@pytest.fixture
def umask():
    """Set the process umask for one test, then restore it."""
    previous = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_atomic_writes_get_the_mode_the_umask_gives(tmp_path, umask, mask):
    umask(mask)
    write_json(tmp_path / "results.json", {"a": 1})
    assert mode(tmp_path / "results.json") == 0o666 & ~mask


def test_a_runs_files_are_group_readable_with_lf_line_ends_and_its_log_has_a_line_per_epoch(
    compose_config, umask, capsys
):
    umask(0o002)
    cfg = compose_config("trainer.max_epochs=2", "trainer.enable_progress_bar=null")
    train(cfg)
    run_dir = Path(cfg.paths.output_dir)
    for name in ("results.json", "labels.csv", "checkpoints/last.ckpt"):
        assert mode(run_dir / name) == 0o664, name
    assert b"\r" not in (run_dir / "labels.csv").read_bytes()
    out = capsys.readouterr()
    # Not a terminal: no progress bar, one line per epoch.
    assert "epoch 1/2: train/loss=" in out.out and "epoch 2/2: train/loss=" in out.out
    assert "it/s" not in out.out + out.err


def test_a_finished_run_records_its_status_group_choices_and_report_labels(compose_config):
    cfg = compose_config("method=le2019/triplet_random_semihard")
    train(cfg)
    results = json.loads((Path(cfg.paths.output_dir) / "results.json").read_text())
    assert results["status"] == "finished"
    assert {
        g: results["choices"][g] for g in ("dataset", "backbone", "loss", "miner", "noise", "method")
    } == {
        "dataset": "digits",
        "backbone": "mlp",
        "loss": "triplet",
        "miner": "random_semihard",
        "noise": "uniform",
        "method": "le2019/triplet_random_semihard",
    }
    assert results["report"]["method"] == cfg.report.method


def test_a_failed_run_records_why_and_the_report_says_it(compose_config, tmp_path):
    NaNAfter.calls = 0
    cfg = compose_config(
        "loss._target_=test_bad_input.NaNAfter", "trainer.max_epochs=3", "data.batches_per_epoch=2"
    )
    with pytest.raises(FloatingPointError):
        train(cfg)
    run_dir = Path(cfg.paths.output_dir)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "failed" and results["error_type"] == "Diverged"
    assert results["error"].startswith("loss NaNAfter is nan at epoch 3, step 4")
    assert "Traceback" in (run_dir / results["traceback"]).read_text()

    report = write_report([run_dir], tmp_path / "reports", name="r")
    text = (report.directory / "report.md").read_text()
    assert f"## Failed runs\n\n- `{run_dir}`: failed: loss NaNAfter is nan at epoch 3, step 4" in text
    with (report.directory / "jobs.csv").open(newline="") as f:
        (row,) = csv.DictReader(f)
    assert row["status"] == "failed" and row["error"].startswith("failed: loss NaNAfter is nan")


def test_a_record_cut_short_or_not_a_mapping_is_damaged_and_finished_needs_metrics(tmp_path):
    """Issue 37, rule 6: what the report and the skip of a done run read in results.json."""
    from noisydml.utils.run_directory import RunDir

    run = RunDir(tmp_path)
    assert run.damage() is None and run.read_results() is None  # none yet: not damaged, missing
    whole = json.dumps({"status": "finished", "metrics": {"test/recall@1": 0.5}})
    run.results.write_text(whole[:20])
    assert run.damage().startswith("is cut short or not JSON (") and run.read_results() is None
    run.results.write_text("[]")
    assert run.damage() == "holds [], not a run's record (a mapping with a status)"
    assert run.read_results() is None
    run.results.write_text(json.dumps({"status": "finished", "metrics": {}}))
    assert run.damage() is None and run.finished_results() is None
    run.results.write_text(whole)
    assert run.finished_results() == json.loads(whole)


def test_the_command_that_continues_a_run_pastes_into_a_shell(tmp_path):
    # Printed when a run starts, stops or is refused: a folder name with spaces (a job named by its
    # overrides, a user's folder) stays one argument.
    run = RunDir(tmp_path / "run ü 1")
    assert run.resume_command("resume=never") == f"noisydml 'resume={tmp_path}/run ü 1' resume=never"
    assert shlex.split(run.resume_command())[1] == f"resume={tmp_path}/run ü 1"
    assert RunDir(tmp_path / "plain").resume_command() == f"noisydml resume={tmp_path}/plain"
