"""What a run leaves in its directory, as a lab-mate and a log reader on a shared cluster see it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from noisydml.atomic import write_json
from noisydml.train import train


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
