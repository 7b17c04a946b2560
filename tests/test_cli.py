"""The command line answers at once: --help and --cfg job load no torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

NOISYDML = str(Path(sys.executable).with_name("noisydml"))


def test_the_command_line_module_imports_neither_torch_nor_lightning():
    probe = "import sys, noisydml.run.cli; print(sorted({m.split('.')[0] for m in sys.modules}))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "'torch'" not in loaded and "'pytorch_lightning'" not in loaded


def test_cfg_job_prints_the_composed_config(tmp_path):
    command = [NOISYDML, "--cfg", "job", "noise.rate=0.4"]
    out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "rate: 0.4" in out.stdout


def test_help_names_the_command_and_ends_quietly_when_its_reader_stops(tmp_path):
    # noisydml --help | head -1 printed Hydra's BrokenPipeError traceback; Hydra named the job ("train").
    reader = subprocess.Popen(
        [NOISYDML, "--help"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    first = reader.stdout.readline().decode()
    reader.stdout.close()
    error = reader.stderr.read().decode()
    reader.wait(timeout=120)
    assert first.startswith("noisydml: ")
    assert "Traceback" not in error and "BrokenPipeError" not in error, error


@pytest.mark.slow
def test_a_user_error_is_one_line_without_a_traceback_which_goes_to_the_runs_error_log(tmp_path):
    run_dir = tmp_path / "run"
    out = subprocess.run(
        [NOISYDML, "optimizer.lr=-1", "logger=csv", f"hydra.run.dir={run_dir}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1
    assert "optimizer.lr=-1 must be > 0; e.g. optimizer.lr=1e-3" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" in (run_dir / "error.log").read_text()

    full = subprocess.run(
        [NOISYDML, "optimizer.lr=-1", "logger=csv", f"hydra.run.dir={tmp_path / 'full'}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HYDRA_FULL_ERROR": "1"},
    )
    assert "Traceback" in full.stderr and "optimizer.lr=-1 must be > 0" in full.stderr


def test_a_refusal_before_the_run_starts_is_one_line_too(tmp_path):
    # The numerics mode is applied before torch loads, ahead of the run's checks.
    out = subprocess.run(
        [NOISYDML, "numerics=foo", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "numerics=foo is not an option; use one of: native, strict, avx2"
    ]


def test_resume_of_a_folder_that_holds_no_run_says_so(tmp_path):
    out = subprocess.run([NOISYDML, f"resume={tmp_path}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert f"resume={tmp_path}: no run directory there" in out.stderr


def test_a_checkpoint_to_score_is_sent_to_noisydml_eval(tmp_path):
    # Built from the defaults and the keys beside it, the evaluation recorded keys it never read.
    checkpoint = tmp_path / "best.ckpt"
    out = subprocess.run(
        [NOISYDML, f"ckpt_path={checkpoint}", "noise.rate=0.45"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"ckpt_path={checkpoint} scores a checkpoint without training; evaluate it with noisydml-eval "
        f"ckpt_path={checkpoint}, which builds the network with its run's overrides and takes only what an "
        "evaluation reads"
    ]


def test_resume_with_another_folder_is_refused_not_dropped(tmp_path):
    # resume=<dir> continues the run in its folder: a folder given beside it was silently replaced.
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("[]\n")
    other = tmp_path / "other"
    arguments = [NOISYDML, f"resume={run}", f"hydra.run.dir={other}"]
    out = subprocess.run(arguments, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and not other.exists()
    assert out.stderr.strip().splitlines() == [
        f"resume={run} continues that run in its own folder, so hydra.run.dir={other} would not be read; "
        "drop hydra.run.dir (a new run of its config in another folder: its overrides without resume=, with "
        "hydra.run.dir=...)"
    ]


@pytest.mark.slow
def test_a_sweep_says_which_jobs_failed_and_why(tmp_path):
    sweep = tmp_path / "sweep"
    # A job that fails while it trains (bad input, its data's included, is refused before any job runs:
    # test_bad_input).
    fault = "+callbacks.fault={_target_:noisydml.testing.faults.RaiseAt,step:1,job:1}"
    command = [NOISYDML, "-m", "seed=0,1", fault, "logger=csv", f"hydra.sweep.dir={sweep}"]
    out = subprocess.run(
        [*command, "trainer.max_epochs=1"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 1
    assert "job 0 (seed=0 " in out.stdout and "trainer.max_epochs=1): finished" in out.stdout
    assert "trainer.max_epochs=1): failed: RuntimeError: injected fault at step 1" in out.stdout
    assert "error.log" in out.stdout
