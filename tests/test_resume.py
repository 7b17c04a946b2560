"""Faults never cost results: checkpoints, resume after SIGTERM, finished jobs skipped, not overwritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytorch_lightning.utilities.exceptions import SIGTERMException

from noisydml.train import train

# Two epochs of five batches; the fault lands in the middle of the second epoch.
RUN = ["trainer.max_epochs=2", "data.batches_per_epoch=5", "trainer.check_val_every_n_epoch=1"]
KILL = [
    "+callbacks.fault._target_=noisydml.faults.KillAt",
    "+callbacks.fault.step=7",
    "+callbacks.fault.signal=SIGTERM",
]


def test_a_run_stopped_by_sigterm_resumes_to_the_same_metrics(compose_config, tmp_path):
    uninterrupted = train(compose_config(*RUN, run="uninterrupted"))

    interrupted = compose_config(*RUN, *KILL)
    run_dir = Path(interrupted.paths.output_dir)
    with pytest.raises(SIGTERMException):
        train(interrupted)
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    assert not (run_dir / "results.json").exists()

    resumed = compose_config(*RUN)
    assert resumed.paths.output_dir == str(run_dir)
    assert train(resumed) == uninterrupted
    logged = (run_dir / "csv" / "metrics.csv").read_text()
    assert "test/recall@1" in logged


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
    del stored["config"]["module"]["save_embeddings"]
    results.write_text(json.dumps(stored))
    assert train(compose_config()) == first
