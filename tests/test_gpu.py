"""Every GPU path of the runner, trained for two steps and evaluated: mixed precision (bf16, fp16),
channels_last with cuDNN autotuning, torch.compile, pinned-memory loading from worker processes, the
decoded-image cache, GPU evaluation (torch engine, faiss GPU where installed, CPU fallback), SIGTERM
and resume, DDP over NCCL on every GPU of the machine, and the GPU's random stream after a block that
draws on it (noisydml.utils.random_state).

Tests and cases marked ``gpu`` skip without CUDA (conftest.py). Where a path also exists on a CPU, a
``"cpu"`` case of the same test runs it there (marked ``slow``), so the test's own code is exercised by
every ``make test`` and cannot rot between sessions that have a GPU.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import faiss
import numpy as np
import pytest
import torch
from pytorch_lightning.utilities.exceptions import SIGTERMException

import layouts
from noisydml.metrics import evaluate
from noisydml.metrics.engine import resolve_engine
from noisydml.run.train import train

GPU = pytest.param("gpu", marks=pytest.mark.gpu)
# The CPU cases only keep the tests' own code exercised: slow for what they show.
CPU = pytest.param("cpu", marks=pytest.mark.slow)
# Two optimizer steps, then the test split is embedded and scored.
TWO_STEPS = ["trainer.max_steps=2", "data.batches_per_epoch=2"]
# The loading path of a real GPU job: worker processes (and page-locked batches, on a GPU: on()).
LOADING = ["data.num_workers=2"]


@pytest.fixture
def cub(tmp_path: Path) -> list[str]:
    """A generated CUB folder with 5 images per class (10 test images: enough for the default Recall@8)
    and the overrides that train a random ResNet34 on it (layouts.cub_run)."""
    return layouts.cub_run(tmp_path / "data", per_class=5)


def on(accelerator: str) -> list[str]:
    # A CPU run refuses data.pin_memory=true and trainer.benchmark=true, which it would not read.
    pinned = ["data.pin_memory=true"] if accelerator == "gpu" else []
    return [f"trainer.accelerator={accelerator}", "trainer.devices=1", *pinned]


def cudnn(accelerator: str) -> list[str]:
    """cuDNN's autotuning, where a run has cuDNN to tune."""
    return ["trainer.benchmark=true"] if accelerator == "gpu" else []


def assert_scored(metrics: dict[str, float]) -> None:
    assert {"test/recall@1", "test/nmi", "test/map@r"} <= set(metrics)
    assert all(math.isfinite(value) and 0 <= value <= 1 for value in metrics.values())


@pytest.mark.parametrize(
    ("precision", "accelerator"),
    [
        pytest.param("bf16-mixed", "cpu", marks=pytest.mark.slow),
        pytest.param("bf16-mixed", "gpu", marks=pytest.mark.gpu),
        pytest.param("16-mixed", "gpu", marks=pytest.mark.gpu),
    ],
)
def test_mixed_precision_trains_and_evaluates(precision, accelerator, compose_config, cub):
    cfg = compose_config(*cub, *TWO_STEPS, *LOADING, *on(accelerator), f"trainer.precision={precision}")
    assert_scored(train(cfg))


@pytest.mark.parametrize("accelerator", [CPU, GPU])
def test_channels_last_with_cudnn_autotuning(accelerator, compose_config, cub):
    cfg = compose_config(
        *cub,
        *TWO_STEPS,
        *LOADING,
        *on(accelerator),
        "trainer.precision=bf16-mixed",
        "module.channels_last=true",
        *cudnn(accelerator),
    )
    assert_scored(train(cfg))


# Inductor takes minutes to compile a ResNet on a CPU; on a GPU it is the path users take.
@pytest.mark.gpu
def test_compiled_backbone_trains_and_its_checkpoint_keeps_plain_keys(compose_config, cub):
    cfg = compose_config(*cub, *TWO_STEPS, *on("gpu"), "trainer.precision=bf16-mixed", "module.compile=true")
    assert_scored(train(cfg))
    checkpoint = torch.load(
        Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True
    )
    assert not any("_orig_mod" in key for key in checkpoint["state_dict"])


@pytest.mark.parametrize("accelerator", [CPU, GPU])
def test_decoded_image_cache_feeds_training(accelerator, compose_config, cub, tmp_path):
    cfg = compose_config(
        *cub,
        *TWO_STEPS,
        *LOADING,
        *on(accelerator),
        "dataset.cache_decoded=true",
        f"dataset.cache_dir={tmp_path / 'cache'}",
    )
    assert_scored(train(cfg))
    assert any((tmp_path / "cache" / "decoded").iterdir())


def sop_like(n: int = 20_000, dim: int = 128, classes: int = 4_000, seed: int = 0):
    """L2-normalised embeddings with class structure and many small classes, as SOP's (R@1 about 0.5)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size=n)
    x = rng.normal(size=(classes, dim))[labels] * 0.6 + rng.normal(size=(n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32), labels


@pytest.mark.gpu
def test_gpu_evaluation_matches_the_cpu_path():
    x, labels = sop_like()
    ks = (1, 10, 100, 1000)
    cpu = evaluate(x, labels, recall_ks=ks, use_gpu=False)
    on_gpu = evaluate(x, labels, recall_ks=ks, use_gpu=True, backend="torch")
    # The same fp32 arithmetic; a neighbour pair whose distances differ only in the last bit can swap.
    for k in ks:
        assert on_gpu[f"recall@{k}"] == pytest.approx(cpu[f"recall@{k}"], abs=3 / len(x))
    assert on_gpu["map@r"] == pytest.approx(cpu["map@r"], abs=1e-4)
    # Another k-means draw: within the spread of k-means seeds.
    assert on_gpu["nmi"] == pytest.approx(cpu["nmi"], abs=0.01)
    if faiss.get_num_gpus() > 0:
        with_faiss = evaluate(x, labels, recall_ks=ks, use_gpu=True, backend="faiss")
        assert with_faiss["recall@1"] == pytest.approx(cpu["recall@1"], abs=3 / len(x))
    # What a run on this machine uses by default: faiss where it sees the GPU, else torch.
    assert resolve_engine().gpu and resolve_engine(use_gpu=False).device == "cpu"


@pytest.mark.gpu
def test_sigterm_mid_epoch_then_resume_on_the_gpu(compose_config):
    # Digits with the MLP: every kernel it runs is deterministic under Lightning's deterministic mode
    # ("warn": an op without a deterministic kernel would warn, not stop), so the resumed run must
    # reproduce the uninterrupted one exactly.
    run = [*on("gpu"), "trainer.deterministic=warn", "trainer.max_epochs=2", "data.batches_per_epoch=5"]
    kill = ["+callbacks.fault._target_=noisydml.testing.faults.KillAt", "+callbacks.fault.step=7"]
    uninterrupted = train(compose_config(*run, run="uninterrupted"))

    interrupted = compose_config(*run, *kill, "+callbacks.fault.signal=SIGTERM")
    with pytest.raises(SIGTERMException):
        train(interrupted)
    checkpoint = Path(interrupted.paths.output_dir) / "checkpoints" / "last.ckpt"
    # Written on the GPU, readable on a CPU-only machine.
    assert torch.load(checkpoint, map_location="cpu", weights_only=True)["global_step"] == 7
    assert train(compose_config(*run)) == uninterrupted


@pytest.mark.gpu
def test_ddp_over_nccl_on_every_gpu(tmp_path):
    devices = torch.cuda.device_count()
    run_dir = tmp_path / "ddp"
    command = [
        str(Path(sys.executable).with_name("noisydml")),
        "trainer=ddp",
        "trainer.accelerator=gpu",
        f"trainer.devices={devices}",
        "trainer.max_steps=2",
        "trainer.enable_progress_bar=false",
        "logger=csv",
        f"hydra.run.dir={run_dir}",
    ]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["config"]["trainer"]["devices"] == devices
    assert_scored(results["metrics"])


# A fresh process each: whether CUDA has started before the block is the case under test.
DRAWS_AFTER_A_BLOCK = """
import sys
import torch
from noisydml.utils.random_state import streams_kept
torch.manual_seed(5)
if sys.argv[1] == "started before":
    torch.cuda.init()
if sys.argv[2] == "block draws":
    with streams_kept():
        torch.rand(4, device="cuda")
print(torch.rand(4, device="cuda").tolist())
"""


@pytest.mark.gpu
@pytest.mark.parametrize("started", ["started before", "started in the block"])
def test_what_a_block_draws_on_the_gpu_leaves_the_draws_after_it_alone(started):
    """The noise models' classifiers train on the GPU where there is one, and a cache hit trains nothing:
    a run's GPU draws after the noisy labels must not depend on which, whether or not CUDA had started."""
    after = [
        subprocess.run(
            [sys.executable, "-c", DRAWS_AFTER_A_BLOCK, started, block],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        ).stdout
        for block in ("block draws", "no block")
    ]
    assert after[0] == after[1]
