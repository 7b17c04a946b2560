"""Faults never cost results: checkpoints, resume after SIGTERM, finished jobs skipped, not overwritten."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pytorch_lightning.utilities.exceptions import SIGTERMException

from noisydml.run.train import train
from noisydml.utils.errors import BadInput
from wandb_records import records

# Two epochs of five batches; the fault lands in the middle of the second epoch.
RUN = ["trainer.max_epochs=2", "data.batches_per_epoch=5", "trainer.check_val_every_n_epoch=1"]
KILL = [
    "+callbacks.fault._target_=noisydml.testing.faults.KillAt",
    "+callbacks.fault.step=7",
    "+callbacks.fault.signal=SIGTERM",
]


@pytest.mark.slow
def test_a_run_stopped_by_sigterm_resumes_to_the_same_metrics(compose_config, tmp_path):
    uninterrupted = train(compose_config(*RUN, run="uninterrupted"))

    interrupted = compose_config(*RUN, *KILL)
    run_dir = Path(interrupted.paths.output_dir)
    with pytest.raises(SIGTERMException):
        train(interrupted)
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    assert json.loads((run_dir / "results.json").read_text())["status"] == "interrupted"

    resumed = compose_config(*RUN)
    assert resumed.paths.output_dir == str(run_dir)
    assert (run_dir / "checkpoints" / "previous.ckpt").is_file()
    assert train(resumed) == uninterrupted
    # Finished: the fallback for a damaged last.ckpt is gone, what was trained and tested stays.
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    logged = (run_dir / "csv" / "metrics.csv").read_text()
    assert "test/recall@1" in logged
    assert json.loads((run_dir / "results.json").read_text())["status"] == "finished"


@pytest.mark.slow
def test_a_corrupt_checkpoint_is_named_with_the_fix_and_the_previous_one_resumes(compose_config):
    uninterrupted = train(compose_config(*RUN, run="uninterrupted"))
    interrupted = compose_config(*RUN, *KILL)
    with pytest.raises(SIGTERMException):
        train(interrupted)
    last = Path(interrupted.paths.output_dir) / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:1000])  # a copy cut short

    fixes = r"resume=.* resume_from=previous; or start this run over: noisydml resume=.* resume=never"
    with pytest.raises(BadInput, match=rf"{last} cannot be read, it is truncated or corrupt .*{fixes}"):
        train(compose_config(*RUN))
    # The checkpoint of the end of the first epoch: the run continues from there to the same metrics.
    assert train(compose_config(*RUN, "resume_from=previous")) == uninterrupted


def test_a_finished_run_is_skipped_and_never_overwritten(compose_config, capsys):
    cfg = compose_config()
    first = train(cfg)
    results = Path(cfg.paths.output_dir) / "results.json"
    written = results.read_text()

    assert train(compose_config()) == first
    assert "already complete; skipping" in capsys.readouterr().out
    assert results.read_text() == written

    with pytest.raises(FileExistsError, match=r"different config \(differs in: noise.rate\)"):
        train(compose_config("noise.rate=0.4"))
    assert json.loads(results.read_text())["config"]["noise"]["rate"] == 0.2

    # A run finished before the project gained an option (its results lack the key) is still skipped.
    stored = json.loads(written)
    del stored["config"]["metrics"]["map_full"]
    results.write_text(json.dumps(stored))
    assert train(compose_config()) == first


NOISYDML = str(Path(sys.executable).with_name("noisydml"))
# Every step logged, so the CSV shows a lost or a repeated step; W&B offline, as a user's run.
CLI_RUN = [*RUN, "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false", "cpu_threads=1"]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"WANDB_MODE": "offline", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run([NOISYDML, *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def metrics_rows(run_dir: Path) -> list[dict]:
    with (run_dir / "csv" / "metrics.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def wandb_run_ids(run_dir: Path) -> set[str]:
    return {path.name.rsplit("-", 1)[-1] for path in (run_dir / "wandb").glob("offline-run-*")}


@pytest.mark.slow
def test_a_killed_run_prints_the_command_that_continues_it_and_its_history_is_whole(tmp_path):
    """SIGTERM in the second epoch; the printed command finishes the run with the metrics, the CSV rows
    and the W&B run of an uninterrupted one."""
    whole = tmp_path / "uninterrupted"
    assert cli(*CLI_RUN, f"hydra.run.dir={whole}", cwd=tmp_path).returncode == 0
    run_dir = tmp_path / "killed"
    killed = cli(*CLI_RUN, *KILL, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert json.loads((run_dir / "results.json").read_text())["status"] == "interrupted"
    command = re.search(r"continue it with:\n\s+(noisydml .*)", killed.stderr).group(1)
    assert command == f"noisydml resume={run_dir}"

    resumed = cli(*command.split()[1:], cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from" in resumed.stdout
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "finished"
    assert results["metrics"] == json.loads((whole / "results.json").read_text())["metrics"]
    # Every step once, in order, with the values of the uninterrupted run.
    assert metrics_rows(run_dir) == metrics_rows(whole)
    assert len(wandb_run_ids(run_dir)) == 1 and len(list((run_dir / "wandb").glob("offline-run-*"))) == 2
    steps = [
        int(item.value_json)
        for path in (run_dir / "wandb").glob("offline-run-*/run-*.wandb")
        for record in records(path)
        if record.WhichOneof("record_type") == "history"
        for item in record.history.item
        if (item.key or "/".join(item.nested_key)) == "trainer/global_step"
    ]
    assert sorted(set(steps)) == sorted({int(row["step"]) for row in metrics_rows(whole)})
