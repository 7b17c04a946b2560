"""Bad input fails before training, with the key, the value and the fix, and costs no results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra.errors import InstantiationException
from pytorch_metric_learning.losses import TripletMarginLoss

from layouts import make_cub
from noisydml.train import train


def assert_nothing_trained(cfg) -> None:
    """No checkpoint, and a results.json that records the failure."""
    run_dir = Path(cfg.paths.output_dir)
    assert not (run_dir / "checkpoints").exists()
    assert json.loads((run_dir / "results.json").read_text())["status"] == "failed"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["noise.rate=1.2"], r"noise.rate=1.2 is outside \[0, 1\)"),
        (["noise.rate=-0.1"], r"noise.rate=-0.1 is outside \[0, 1\)"),
        (["noise=class_conditional", "noise.rates=[0.1,0.2]"], r"noise.rates has 2 entries .* 10 classes"),
        (["data.P=11"], r"data.P=11 .* 10 training classes"),
        (["data.K=500"], r"data.K=500 is larger than every class"),
        (["backbone.embedding_size=0"], r"backbone.embedding_size=0 must be >= 1"),
        (["module.train_samples=0"], r"module.train_samples=0 must be >= 1"),
        (["dataset=cub", "paths.data_dir=/nonexistent"], r"cub: images.txt not found under dataset.root"),
    ],
)
def test_bad_values_fail_before_training(compose_config, overrides, message):
    cfg = compose_config(*overrides)
    # Hydra wraps a constructor's error in an InstantiationException that repeats its message.
    with pytest.raises((ValueError, FileNotFoundError, InstantiationException), match=message):
        train(cfg)
    assert_nothing_trained(cfg)


def test_a_layout_missing_a_file_names_it_and_the_layout(compose_config, tmp_path):
    root = make_cub(tmp_path / "data")
    (root / "image_class_labels.txt").unlink()
    cfg = compose_config("dataset=cub", f"paths.data_dir={tmp_path / 'data'}")
    with pytest.raises(FileNotFoundError, match=r"image_class_labels.txt not found[\s\S]*Expected layout"):
        train(cfg)
    assert_nothing_trained(cfg)


def test_an_unreadable_image_is_named_before_training(compose_config, tmp_path):
    root = make_cub(tmp_path / "data")
    broken = sorted((root / "images").rglob("*.jpg"))[0]
    broken.write_bytes(b"not a jpeg")
    cfg = compose_config("dataset=cub", f"paths.data_dir={tmp_path / 'data'}")
    with pytest.raises(OSError, match=rf"cannot read image {broken}.*dataset.skip_unreadable=true"):
        train(cfg)
    assert_nothing_trained(cfg)


class NaNAfter(TripletMarginLoss):
    """The triplet loss until step 2 of training, then NaN: a run that diverges."""

    calls = 0

    def forward(self, *args, **kwargs):
        NaNAfter.calls += 1
        loss = super().forward(*args, **kwargs)
        return loss * torch.nan if NaNAfter.calls > 4 else loss


@pytest.mark.slow
def test_a_nan_loss_stops_the_run_naming_the_step_and_keeps_the_last_checkpoint(compose_config):
    NaNAfter.calls = 0
    cfg = compose_config(
        "loss._target_=test_bad_input.NaNAfter", "trainer.max_epochs=3", "data.batches_per_epoch=2"
    )
    with pytest.raises(FloatingPointError, match=r"loss NaNAfter is nan at epoch 2, step 4"):
        train(cfg)
    checkpoint = Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt"
    assert torch.load(checkpoint, weights_only=True)["global_step"] == 4


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "message"),
    [("experiment=nope", "Could not find 'experiment/nope'"), ("loss=nope", "Could not find 'loss/nope'")],
)
def test_unknown_options_are_refused_by_the_cli(tmp_path, override, message):
    exe = Path(sys.executable).with_name("noisydml")
    out = subprocess.run([str(exe), override], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and message in out.stderr
    assert not (tmp_path / "outputs").exists() or not list((tmp_path / "outputs").rglob("results.json"))
