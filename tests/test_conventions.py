"""The conventions users bring from lightning-hydra-template: trainer=cpu|gpu|mps|ddp, the debug= group,
hparams_search= studies and callbacks= as a group of named callbacks that combine."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from noisydml.run.train import train

NOISYDML = str(Path(sys.executable).with_name("noisydml"))


@pytest.mark.parametrize(("trainer", "accelerator"), [("cpu", "cpu"), ("gpu", "gpu"), ("mps", "mps")])
def test_a_trainer_option_per_accelerator(compose_config, trainer, accelerator):
    cfg = compose_config(f"trainer={trainer}", tiny=False)
    assert (cfg.trainer.accelerator, cfg.trainer.devices) == (accelerator, 1)
    assert cfg.trainer.check_val_every_n_epoch == 5  # the rest of trainer/default.yaml


def test_callbacks_combine_as_a_list_beside_checkpointing(compose_config):
    cfg = compose_config("callbacks=[early_stopping,save_embeddings]", tiny=False)
    assert set(cfg.callbacks) == {"checkpoint", "select", "early_stop", "early_stopping", "save_embeddings"}
    assert cfg.callbacks.early_stopping.monitor == cfg.optimized_metric


def test_an_experiment_s_callback_is_kept_when_one_is_chosen_beside_it(compose_config):
    chosen = "callbacks=[loss_detection,save_embeddings]"
    cfg = compose_config("experiment=noisy_dml/digits_symmetric", chosen, tiny=False)
    assert {"loss_detection", "save_embeddings"} <= set(cfg.callbacks)


def _metrics_rows(run_dir: Path) -> list[dict]:
    with (run_dir / "csv" / "metrics.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def test_debug_fdr_runs_one_batch_of_each_stage_and_keeps_nothing_but_the_record(compose_config, tmp_path):
    cfg = compose_config("debug=fdr", tiny=False, run="fdr")
    assert OmegaConf.select(cfg, "logger.wandb") is None
    metrics = train(cfg)
    assert "test/recall@1" in metrics
    record = json.loads((tmp_path / "fdr" / "results.json").read_text())
    # A smoke test, not a result: the report leaves it out, saying why.
    assert record["status"] == "debug" and record["selection"] is None
    assert record["reason"].startswith("debug=fdr is a debug mode: its metrics are not a result")
    # Lightning's fast_dev_run writes no checkpoint and no logs: a smoke test leaves nothing to resume.
    assert not (tmp_path / "fdr" / "checkpoints").exists()


@pytest.mark.slow
def test_debug_limit_trains_two_short_epochs_and_validates_each(compose_config, tmp_path):
    train(compose_config("debug=limit", tiny=False, run="limit"))
    rows = _metrics_rows(tmp_path / "limit")
    # Validated after each epoch of 3 steps: at the steps 2 and 5.
    assert [int(row["step"]) for row in rows if row.get("val/recall@1")] == [2, 5]


def test_debug_profiler_writes_its_table_to_the_run(compose_config, tmp_path):
    train(compose_config("debug=profiler", "data.batches_per_epoch=3", tiny=False, run="profiled"))
    assert "Action" in (tmp_path / "profiled" / "fit-profile.txt").read_text()


@pytest.mark.slow
def test_hparams_search_runs_an_optuna_study_of_the_method_s_key(tmp_path):
    sweep = tmp_path / "study"
    search = [
        NOISYDML,
        "-m",
        "hparams_search=rdml_eta",
        "hydra.sweeper.n_trials=2",
        "trainer.max_epochs=1",
        "data.batches_per_epoch=3",
        "trainer.check_val_every_n_epoch=1",
        "logger=csv",
        f"hydra.sweep.dir={sweep}",
    ]
    out = subprocess.run(search, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    study = OmegaConf.load(sweep / "optimization_results.yaml")
    assert study.best_params["loss.eta"] in (0.5, 1, 2, 3, 4)
    jobs = [json.loads(p.read_text()) for p in sweep.glob("*/results.json")]
    assert len(jobs) == 2
    assert {job["choices"]["method"] for job in jobs} == {"zhang2023/rdml"}
    # A trial continued alone would score outside the study that chose its values.
    trial = next(p.parent for p in sweep.glob("*/results.json"))
    before = (trial / "results.json").read_bytes()
    again = subprocess.run([NOISYDML, f"resume={trial}"], cwd=tmp_path, capture_output=True, text=True)
    assert again.returncode == 1
    assert f"resume={trial}: the folder is a trial of the search in {sweep}" in again.stderr
    assert (trial / "results.json").read_bytes() == before
    # The search run again in its folder (which has no multirun.yaml) finds its trials done.
    rerun = subprocess.run(search, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert rerun.stdout.count("is already complete; skipping") == 2


@pytest.mark.slow
def test_noisydml_eval_scores_a_checkpoint_as_its_run_did(tmp_path):
    run = tmp_path / "run"
    tiny = ["trainer.max_epochs=2", "data.batches_per_epoch=3", "logger=csv"]
    subprocess.run([NOISYDML, *tiny, f"hydra.run.dir={run}"], cwd=tmp_path, check=True, capture_output=True)
    trained = json.loads((run / "results.json").read_text())

    def evaluate(*overrides: str) -> subprocess.CompletedProcess:
        command = [
            str(Path(NOISYDML).with_name("noisydml-eval")),
            f"ckpt_path={run / 'checkpoints' / 'best.ckpt'}",
        ]
        return subprocess.run(
            [*command, *overrides], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )

    evaluated = tmp_path / "eval"
    out = evaluate("logger=csv", f"hydra.run.dir={evaluated}")
    assert out.returncode == 0, out.stderr[-2000:]
    record = json.loads((evaluated / "results.json").read_text())
    # Scores of given weights, recorded as such: the report never takes them for a run of the config.
    assert record["status"] == "evaluated" and record["reason"].startswith("ckpt_path=")
    # The run's own overrides build the network, and the weights are the selected epoch's.
    assert record["config"]["trainer"]["max_epochs"] == 2
    assert record["metrics"]["test/recall@1"] == trained["metrics"]["test/recall@1"]
    # It trains nothing to continue: no resume command is offered.
    assert "continue it with" not in out.stdout
    # Other metrics, without the training run's selection metric: an evaluation selects nothing.
    out = evaluate("metrics.recall_ks=[3]", f"hydra.run.dir={tmp_path / 'eval_k3'}")
    assert out.returncode == 0, out.stderr[-2000:]
    # Another data set builds another network: the override that did is named, in one line.
    other = evaluate("dataset=mnist1d", f"hydra.run.dir={tmp_path / 'other'}")
    assert other.returncode == 1 and "cannot be loaded into this run's model (size mismatch" in other.stderr
    assert "an override given beside it builds another model (dataset=mnist1d): drop it" in other.stderr


def test_noisydml_eval_without_a_checkpoint_says_what_to_give(tmp_path):
    eval_command = str(Path(NOISYDML).with_name("noisydml-eval"))
    out = subprocess.run([eval_command], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "noisydml-eval needs ckpt_path=<a checkpoint>, e.g. ckpt_path=outputs/runs/.../checkpoints/best.ckpt"
    )
    missing = subprocess.run(
        [eval_command, f"ckpt_path={tmp_path / 'no.ckpt'}"], cwd=tmp_path, capture_output=True, text=True
    )
    assert f"ckpt_path={tmp_path / 'no.ckpt'} is not a file" in missing.stderr


def test_tags_follow_the_choices_in_the_w_and_b_run(compose_config):
    from hydra.utils import instantiate

    cfg = compose_config("logger=wandb", "tags=[ablation,lr_sweep]", tiny=False)
    logger = instantiate(cfg.logger.wandb)
    assert logger._wandb_init["tags"] == [
        "digits",
        "triplet",
        "random_semihard",
        "uniform",
        "ablation",
        "lr_sweep",
    ]


def test_a_protocol_chosen_without_an_experiment_names_its_runs_after_itself(compose_config):
    # Its name interpolated the experiment's, None here: the run was refused blaming name=.
    cfg = compose_config("+protocol=le2019")
    assert cfg.name == "le2019"
