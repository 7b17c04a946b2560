"""End to end: real Hydra composition, the real Lightning Trainer, real faiss metrics, on digits."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import warnings
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import torch

from noisydml.metrics.engine import Engine, faiss_build, resolve_engine
from noisydml.report.cli import main as report_main
from noisydml.run.train import train
from wandb_records import logged_config, logged_metrics

METRICS = ["test/recall@1", "test/recall@2", "test/recall@4", "test/recall@8", "test/nmi", "test/map@r"]


def read_results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def test_default_experiment_trains_and_writes_its_run_directory(compose_config):
    cfg = compose_config()
    metrics = train(cfg)
    run_dir = Path(cfg.paths.output_dir)

    # The one epoch is the last, so it is validated and selected: test/ (the selected weights), test_last/
    # (the last epoch's, the same here) and the validation scores it was selected by.
    names = [m.split("/", 1)[1] for m in METRICS]
    stages = ("test", "test_last", "selected_val")
    assert sorted(metrics) == sorted(f"{stage}/{n}" for stage in stages for n in names)
    assert all(0.0 <= v <= 1.0 for v in metrics.values())
    # Digits are easy: even one short epoch of triplet training beats chance (0.1) by far.
    assert metrics["test/recall@1"] > 0.5

    results = read_results(run_dir)
    assert results["status"] == "finished"
    assert results["metrics"] == metrics
    assert results["seed"] == 0 and results["config"]["noise"]["rate"] == 0.2
    assert {"torch", "pytorch-lightning", "faiss-gpu", "git_commit"} <= set(results["versions"])
    engine = results["metrics_engine"]
    assert (engine["backend"], engine["use_gpu"], engine["faiss_build"]) == ("auto", None, faiss_build())
    assert Engine(engine["library"], engine["device"]) == resolve_engine()
    if not resolve_engine().gpu:
        # No GPU, whichever faiss build is installed: faiss on the CPU (noisydml.metrics.engine).
        assert (engine["library"], engine["device"], engine["faiss_gpus"]) == ("faiss", "cpu", 0)
    # When it started and ended, around the time it trained and tested.
    took = datetime.fromisoformat(results["ended_at"]) - datetime.fromisoformat(results["started_at"])
    assert results["wall_time_s"] <= took.total_seconds() < results["wall_time_s"] + 60

    with open(run_dir / "labels.csv") as f:
        rows = list(csv.DictReader(f))
    with open(run_dir / "validation.csv") as f:
        held_out = list(csv.DictReader(f))
    # 70% of 1,797 digits, 10% of each class held out for validation, every other one trained on.
    assert (len(rows), len(held_out)) == (1131, 126)
    flipped = np.mean([r["true"] != r["observed"] for r in rows])
    assert results["noise"]["realized_rate"] == pytest.approx(flipped)
    assert abs(flipped - 0.2) < 4 * np.sqrt(0.2 * 0.8 / len(rows))

    logged = (run_dir / "csv" / "metrics.csv").read_text()
    assert "test/recall@1" in logged.splitlines()[0] and "train/loss" in logged.splitlines()[0]


def test_one_seed_fixes_labels_sampler_and_weights(compose_config):
    first = train(cfg := compose_config("seed=3", run="first"))
    labels_first = (Path(cfg.paths.output_dir) / "labels.csv").read_text()
    second = train(cfg := compose_config("seed=3", run="second"))
    assert first == second
    assert (Path(cfg.paths.output_dir) / "labels.csv").read_text() == labels_first

    train(cfg := compose_config("seed=4", run="other_seed"))
    assert (Path(cfg.paths.output_dir) / "labels.csv").read_text() != labels_first


def test_topline_trains_on_a_clean_subset(compose_config):
    cfg = compose_config("noise=topline", "noise.rate=0.4")
    train(cfg)
    results = read_results(Path(cfg.paths.output_dir))
    assert results["noise"]["realized_rate"] == 0.0
    # The kept 60% of the training split, of which 10% is held out for validation.
    kept = results["noise"]["num_trained_on"] + results["validation"]["num_samples"]
    assert kept == pytest.approx(0.6 * 1257, abs=10)


@pytest.mark.slow
def test_wandb_offline_run_holds_the_test_metrics(compose_config, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent")
    cfg = compose_config("logger=default")
    metrics = train(cfg)
    assert os.environ["WANDB_MODE"] == "offline"
    run_files = list(Path(cfg.paths.output_dir).glob("wandb/offline-run-*/run-*.wandb"))
    assert len(run_files) == 1
    logged = logged_metrics(run_files[0])
    for name, value in metrics.items():
        assert logged[name] == pytest.approx(value, rel=1e-6)
    config = logged_config(run_files[0])
    assert config["cfg"]["miner"]["_target_"] == "noisydml.miners.RandomSemihardMiner"
    assert config["cfg"]["noise"]["rate"] == 0.2


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("noisydml")
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_cli_multirun_gives_each_job_its_own_directory_and_reruns_only_missing_jobs(tmp_path):
    sweep = tmp_path / "sweep"
    args = [
        "-m",
        "noise.rate=0,0.4",
        "trainer.max_epochs=1",
        "data.batches_per_epoch=2",
        "logger=csv",
        f"hydra.sweep.dir={sweep}",
    ]
    out = run_cli(*args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    common = "data.batches_per_epoch=2,logger=csv"
    jobs = {p.parent.name: read_results(p.parent) for p in sweep.glob("*/results.json")}
    assert set(jobs) == {f"{common},noise.rate={rate},trainer.max_epochs=1" for rate in ("0", "0.4")}
    rates = sorted(job["noise"]["realized_rate"] for job in jobs.values())
    assert rates[0] == 0.0 and rates[1] > 0.3

    # A job that did not finish is re-run; the finished one is skipped, its results untouched.
    done, unfinished = sorted(sweep.glob("*/results.json"))
    kept = done.read_text()
    unfinished.unlink()
    out = run_cli(*args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("is already complete; skipping") == 1
    assert done.read_text() == kept and unfinished.is_file()


def test_cli_prints_the_composed_config(tmp_path):
    out = run_cli("--cfg", "job", "noise.rate=0.3", "miner=fixed_semihard", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "rate: 0.3" in out.stdout and "FixedSemihardMiner" in out.stdout


def test_cli_unknown_group_option_lists_the_choices(tmp_path):
    out = run_cli("miner=nope", cwd=tmp_path)
    assert out.returncode != 0
    assert "miner=nope is not an option" in out.stderr and "random_semihard" in out.stderr


@pytest.mark.slow
def test_saved_embeddings_are_the_test_split_and_the_report_draws_them(compose_config, tiny_cub, tmp_path):
    cfg = compose_config(
        *tiny_cub, "metrics.recall_ks=[1]", "callbacks=save_embeddings", "trainer.max_steps=1"
    )
    train(cfg)
    run_dir = Path(cfg.paths.output_dir)
    saved = np.load(run_dir / "embeddings.npz")
    # The zero-shot half of CUB's classes (4 generated classes x 3 images: 2 test classes, 6 images).
    assert saved["embeddings"].shape == (6, cfg.backbone.embedding_size)
    np.testing.assert_allclose(np.linalg.norm(saved["embeddings"], axis=1), 1.0, rtol=1e-5)
    assert len(set(saved["labels"].tolist())) == 2
    assert all(Path(p).is_absolute() and Path(p).is_file() for p in saved["paths"])
    # Each image's folder names its class: the labels follow the files they were read with.
    folders = [Path(p).parent.name for p in saved["paths"]]
    assert len({(f, int(label)) for f, label in zip(folders, saved["labels"], strict=True)}) == 2

    assert report_main([str(run_dir), "--out", str(tmp_path / "reports"), "--name", "r"]) == 0
    figures = sorted(p.name for p in (tmp_path / "reports" / "r" / "figures").glob("*.png"))
    assert any(name.endswith("__embeddings.png") for name in figures)
    assert any(name.endswith("__retrieval.png") for name in figures)


@pytest.mark.slow
def test_channels_last_changes_the_memory_layout_not_the_results(compose_config, tiny_cub):
    common = [*tiny_cub, "metrics.recall_ks=[1,2]", "trainer.max_steps=2"]
    plain = train(compose_config(*common, run="plain"))
    nhwc = train(compose_config(*common, "module.channels_last=true", run="nhwc"))
    assert plain.keys() == nhwc.keys()
    for name, value in plain.items():
        assert nhwc[name] == pytest.approx(value, abs=1e-6), name


@pytest.mark.slow
def test_compiled_backbone_trains_and_keeps_its_checkpoint_keys(compose_config):
    cfg = compose_config("module.compile=true")
    metrics = train(cfg)
    assert 0.5 < metrics["test/recall@1"] <= 1.0
    state = torch.load(Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt", weights_only=True)
    keys = list(state["state_dict"])
    # Compiled in place: the keys of an uncompiled run, so either kind of run resumes the other's.
    assert keys and not any("_orig_mod" in key for key in keys)


def test_a_diverging_run_says_so_and_is_recorded_as_no_result(compose_config):
    diverging = compose_config("optimizer.lr=1e9", "data.batches_per_epoch=3", run="diverging")
    with pytest.warns(UserWarning, match=r"training diverged: the weights' norm grew from .* \(now 1e\+09\)"):
        train(diverging)
    record = json.loads((Path(diverging.paths.output_dir) / "results.json").read_text())
    # Its loss stayed bounded and its scores looked plausible: recorded finished, a report counted it.
    assert record["status"] == "diverged" and record["reason"].startswith("training diverged: ")
    clean = compose_config("data.batches_per_epoch=3")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(clean)
    assert not [w for w in caught if "diverge" in str(w.message)]
    assert json.loads((Path(clean.paths.output_dir) / "results.json").read_text())["status"] == "finished"


def test_the_printed_scores_of_several_splits_are_labelled_by_split(compose_config, capsys):
    # data.score_train scores the training split beside the test split: both were printed unlabelled.
    train(compose_config("data.score_train=observed"))
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("recall@1"))
    assert lines[header + 1].startswith("test  ") and lines[header + 2].startswith("test_train  ")
