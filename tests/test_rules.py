"""Issue 37's rules, on what they let through: a debug run or an unselected one is recorded as no result
(the report lists it, saying why), an experiment's own sweep and a relabelled departure run, and every
loss, miner and scheduler the project ships is inside its declared ranges. What they refuse is in
docs/reference/bad-input.md's table (tests/test_bad_input.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra.utils import instantiate
from pytorch_metric_learning.losses import TripletMarginLoss

from configs import options
from hydra_plugins.noisydml_sweeper.noisydml_sweeper import NoisydmlSweeper
from noisydml.report.collect import COMPLETE, read_run
from noisydml.run.checks.classes import check_classes
from noisydml.run.checks.config import check_config
from noisydml.run.checks.data import check_unread
from noisydml.run.checks.identity import check_identity
from noisydml.run.train import train
from noisydml.utils.errors import BadInput


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    """A finished run's folder, with Hydra's record of it."""
    folder = tmp_path / "finished"
    (folder / ".hydra").mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"status": "finished"}))
    return folder


def _command(
    name: str, arguments: list[str], cwd: Path | None = None, env: dict | None = None
) -> subprocess.CompletedProcess:
    """One of the package's commands (``noisydml``, ``noisydml-report``, ...), as a user runs it."""
    exe = Path(sys.executable).with_name(name)
    return subprocess.run(
        [str(exe), *arguments], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def _status(cfg) -> dict:
    return json.loads((Path(cfg.paths.output_dir) / "results.json").read_text())


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        (["+trainer.fast_dev_run=true"], "trainer.fast_dev_run=True is a debug mode"),
        (["+trainer.limit_test_batches=1"], "trainer.limit_test_batches=1 is a debug mode"),
    ],
)
def test_a_debug_run_is_recorded_as_debug_and_the_report_says_why(compose_config, overrides, reason):
    cfg = compose_config(*overrides)
    metrics = train(cfg)
    results = _status(cfg)
    assert metrics and results["status"] == "debug" and reason in results["reason"]
    run = read_run(Path(cfg.paths.output_dir))
    assert run.status != COMPLETE and run.error.startswith(f"debug: {reason}")


def test_a_run_stopped_before_any_validation_is_recorded_unselected(compose_config):
    # Validation every 2 epochs, and trainer.max_steps ends the run after the first.
    cfg = compose_config(
        "trainer.max_epochs=2",
        "trainer.check_val_every_n_epoch=2",
        "trainer.max_steps=3",
        "data.batches_per_epoch=3",
    )
    train(cfg)
    results = _status(cfg)
    assert results["status"] == "unselected"
    assert results["reason"].startswith("optimized_metric=val/recall@1 was never logged")
    assert "test/recall@1" in results["metrics"] and read_run(Path(cfg.paths.output_dir)).status != COMPLETE


def test_a_plain_run_is_finished(compose_config):
    cfg = compose_config()
    train(cfg)
    assert _status(cfg)["status"] == "finished" and "reason" not in _status(cfg)


@pytest.mark.parametrize(
    "overrides",
    [
        # Its sweep's methods (each with its own loss and miner), noise models and rates, seeds.
        ["experiment=digits/levi2021_even_odd", "method=levi2021/eps_triplet", "seed=3"],
        ["experiment=digits/le2019_noise", "method=le2019/marginal_random_semihard", "noise=topline"],
        ["experiment=digits/le2019_noise", "noise.rate=0.4"],
        ["experiment=digits/bdml_noise", "method=bdml/pca", "noise.rate=0.3"],
        # Where and how it runs, which cannot change what it computes (identity.FREE).
        [
            "experiment=digits/le2019_noise",
            "paths.data_dir=/tmp",
            "cpu_threads=1",
            "numerics=strict",
            "logger=csv",
            "trainer.enable_progress_bar=false",
            "trainer=cpu",
            "data.num_workers=0",
            "callbacks=save_embeddings",
            "+trainer.max_time=00:01:00:00",
        ],
        # A debug run is recorded as no result.
        ["experiment=digits/le2019_noise", "debug=limit", "trainer.max_epochs=1"],
        # A departure given labels of its own is filed elsewhere.
        ["experiment=digits/le2019_noise", "dataset=mnist5k", "name=mine", "report.figure=mine/mnist5k"],
    ],
)
def test_an_experiment_runs_its_sweep_and_relabelled_departures(compose_choices, overrides):
    check_identity(*compose_choices(*overrides))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        # A swept key takes its sweep's values: another method, noise model, rate or seed is another run.
        (
            ["method=zhang2023/rdml"],
            r"sweeps method over le2019/triplet_random_semihard,.* but method=zhang2023/rdml",
        ),
        (["noise=nearest_class"], r"sweeps noise over uniform,topline, but noise=nearest_class was given"),
        (["noise.rate=0.3"], r"sweeps noise.rate over 0,0.2,0.4,0.5,0.6, but noise.rate=0.3 was given"),
        (["seed=999"], r"sweeps seed over 0,1,.*,11, but seed=999 was given"),
        # The method's settings and backbone, the labels it trains on, the report's labels: its identity.
        (["loss.margin=0.5"], r"is loss.margin=0.2, but loss.margin=0.5 was given"),
        (["backbone.embedding_size=16"], r"is backbone.embedding_size=32, but backbone.embedding_size=16"),
        (["data.unlabeled_fraction=0.5"], r"is data.unlabeled_fraction=0.0, but data.unlabeled_fraction=0.5"),
        (["report.method=mine"], r"is report.method=Triplet \+ random semi-hard, but report.method=mine"),
        (
            ["+data.filter={_target_: noisydml.data.knn_filter.KnnLabelFilter}"],
            r"is data.filter=null, but data.filter={_target_: noisydml.data.knn_filter.KnnLabelFilter}",
        ),
        # Every other key too: how long and on what batch it trains, how it optimizes and selects, what
        # it scores, and several processes (each draws a batch), a key the file never sets included.
        (["trainer.max_epochs=1"], r"is trainer.max_epochs=\d+, but trainer.max_epochs=1 was given"),
        (["data.P=5"], r"is data.P=10, but data.P=5 was given"),
        (["optimizer.lr=0.01"], r"is optimizer.lr=[\d.e-]+, but optimizer.lr=0.01 was given"),
        (["optimizer=sgd"], r"is optimizer._target_=torch.optim.\w+, but optimizer._target_=torch.optim.SGD"),
        (["callbacks.select.mode=min"], r"is callbacks.select.mode=max, but callbacks.select.mode=min"),
        (
            ["metrics.nmi_average=arithmetic"],
            r"is metrics.nmi_average=geometric, but metrics.nmi_average=arithmetic",
        ),
        (["trainer=ddp_cpu"], r"is trainer.devices=1, but trainer.devices=2 was given"),
        (
            ["+loss.triplets_per_anchor=5"],
            r"sets no loss.triplets_per_anchor, but loss.triplets_per_anchor=5 was given",
        ),
    ],
)
def test_a_value_the_experiment_does_not_define_is_another_run(compose_choices, overrides, message):
    cfg, choices = compose_choices("experiment=digits/le2019_noise", *overrides)
    with pytest.raises(
        BadInput, match=rf"^experiment=digits/le2019_noise {message}.* name=<name> report.figure="
    ):
        check_identity(cfg, choices)


def test_a_single_run_of_a_sweep_it_was_not_given_is_told_to_sweep(compose_choices):
    # Not the user's value: the config's, which the experiment sets only in its sweep.
    cfg, choices = compose_choices("experiment=noisy_dml/digits_symmetric")
    with pytest.raises(
        BadInput,
        match=r"sweeps noise.rate over 0.25,0.5, which a single run leaves at the config's noise.rate=0.2; "
        r"run the experiment with -m, or give one of its values, e.g. noise.rate=0.25$",
    ):
        check_identity(cfg, choices)


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_experiments_own_jobs_are_its_own(compose_choices, experiment):
    # Its sweep's first and last jobs (each grid's keys over the params'), as its reproduction runs them:
    # none departs from the file, whatever key the file sets.
    cfg, _ = compose_choices(f"experiment={experiment}")
    jobs = NoisydmlSweeper.expand_sweeper(cfg.hydra.sweeper, [])
    for job in {tuple(jobs[0]), tuple(jobs[-1])}:
        # Every rule on the composed config, identity among them (yu2018's max_epochs=-1 with its steps).
        check_config(*compose_choices(f"experiment={experiment}", *job))


def test_the_values_an_experiment_tunes_are_its_own(compose_choices):
    # digits/zhang2023_noise tunes BSPML's age_max at noise.rate=0.2, seed 0 (its tune.at and tune.space).
    cfg, choices = compose_choices(
        "experiment=digits/zhang2023_noise",
        "method=zhang2023/bspml",
        "loss.age_max=3",
        "noise.rate=0.2",
        "seed=0",
    )
    check_identity(cfg, choices)
    # A key its study does not search is the method's as the file sets it.
    cfg, choices = compose_choices(
        "experiment=digits/zhang2023_noise",
        "method=zhang2023/bspml",
        "loss.age_max=3",
        "backbone.embedding_size=16",
    )
    with pytest.raises(BadInput, match=r"but backbone.embedding_size=16 was given"):
        check_identity(cfg, choices)
    # The study's own settings (tune.at) at their values, and no other.
    at = ("experiment=digits/zhang2023_noise", "method=zhang2023/bspml", "noise.rate=0.2", "seed=0")
    check_identity(*compose_choices(*at, "data.val_fraction=0.1"))
    cfg, choices = compose_choices(*at, "data.val_fraction=0.2")
    with pytest.raises(BadInput, match=r"is data.val_fraction=[\d.]+, but data.val_fraction=0.2 was given"):
        check_identity(cfg, choices)


def test_a_departure_with_only_a_new_name_is_still_filed_under_the_experiment(compose_choices):
    cfg, choices = compose_choices("experiment=digits/le2019_noise", "dataset=mnist5k", "name=mine")
    with pytest.raises(BadInput, match=r"is dataset=digits, but dataset=mnist5k was given"):
        check_identity(cfg, choices)


@pytest.mark.parametrize("key", ["noise.seed", "data.seed"])
def test_a_seed_that_follows_seed_in_the_experiment_follows_it_in_its_runs(compose_choices, key):
    """A report pairs an experiment's runs by ``seed``: one whose noise or sampler took another seed is
    filed at a seed it did not run, whatever the sweep varies (here the noise)."""
    cfg, choices = compose_choices("experiment=digits/le2019_noise", f"{key}=3")
    with pytest.raises(BadInput, match=rf"draws {key} from seed \(\$\{{seed\}}\), but {key}=3 was given"):
        check_identity(cfg, choices)
    cfg, choices = compose_choices("experiment=digits/le2019_noise", "seed=3", f"{key}=${{seed}}")
    check_identity(cfg, choices)


@pytest.mark.parametrize(
    "override",
    [f"loss={o}" for o in options("loss")]
    + [f"miner={o}" for o in options("miner")]
    + [f"scheduler={o}" for o in options("scheduler")],
)
def test_every_shipped_loss_miner_and_scheduler_is_inside_its_ranges(compose_choices, override):
    cfg, _ = compose_choices(override)
    check_classes(cfg)


@pytest.mark.parametrize(
    "arguments", [["hydra.run.dir={finished}/nested"], ["-m", "seed=1,2", "hydra.sweep.dir={finished}/sweep"]]
)
def test_a_run_or_sweep_folder_inside_another_run_is_refused_before_hydra_writes(
    tmp_path, finished, arguments
):
    out = _command("noisydml", [a.replace("{finished}", str(finished)) for a in arguments], tmp_path)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert f"is inside the run folder {finished}, whose files it would mix with" in out.stderr
    assert sorted(p.name for p in finished.iterdir()) == [".hydra", "results.json"]


@pytest.mark.parametrize(
    ("sweep", "message", "fix"),
    [
        (
            "seed=range(0,0)",
            "seed=range(0,0) expands to no value, so the sweep would run no job",
            "seed=0,1,2",
        ),
        (
            "seed=range(0,5,0)",
            "seed=range(0,5,0) cannot be expanded (range() arg 3 must not be zero)",
            "seed=0,1,2",
        ),
        (
            "seed=interval(0,1)",
            "seed: the noisydml sweeper does not support sweep type INTERVAL_SWEEP",
            "=optuna",
        ),
    ],
)
def test_a_sweep_of_no_job_is_refused_before_hydra_writes(tmp_path, sweep, message, fix):
    out = _command("noisydml", ["-m", sweep], tmp_path)
    (line, *rest) = out.stderr.strip().splitlines()
    assert out.returncode == 1 and line.startswith(message) and line.endswith(fix)
    assert "stopped before its end" not in out.stderr and "Traceback" not in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_evaluation_of_weights_in_no_run_folder_says_its_training_config_is_unknown(
    compose_config, tmp_path
):
    # Its record held this command's defaults (noise.rate, trainer.max_epochs) as if the weights trained so.
    trained = compose_config()
    train(trained)
    loose = tmp_path / "loose.ckpt"
    loose.write_bytes((Path(trained.paths.output_dir) / "checkpoints" / "last.ckpt").read_bytes())
    cfg = compose_config(f"ckpt_path={loose}", "resume=never", run="evaluation")
    train(cfg)
    results = _status(cfg)
    assert results["status"] == "evaluated"
    assert results["reason"].endswith(
        "it lies in no run folder, so the config it trained with is unknown: the training keys recorded here "
        "(noise, optimizer, trainer) are this evaluation's, not the checkpoint's"
    )


def test_a_clock_given_as_lightnings_mapping_is_taken(compose_config):
    # Lightning takes max_time as a dict of timedelta's keywords; Hydra's DictConfig was refused.
    cfg = compose_config("+trainer.max_time={hours:1}")
    train(cfg)
    assert _status(cfg)["status"] == "finished"


def test_a_run_its_clock_cut_short_is_recorded_stopped_not_finished(compose_config):
    # A digits epoch takes well under a second: 1,000 of them do not fit in 2 seconds.
    cfg = compose_config("trainer.max_epochs=1000", "+trainer.max_time=00:00:00:02", "data.val_fraction=0")
    train(cfg)
    results = _status(cfg)
    assert results["status"] == "stopped"
    assert results["reason"].startswith("trainer.max_time=00:00:00:02 stopped training after ")
    assert "of trainer.max_epochs=1000 epochs" in results["reason"]
    assert read_run(Path(cfg.paths.output_dir)).status != COMPLETE
    # Continued as it was (the same clock, spent): it trains nothing and keeps the epochs it has.
    train(compose_config("trainer.max_epochs=1000", "+trainer.max_time=00:00:00:02", "data.val_fraction=0"))
    assert _status(cfg)["reason"] == results["reason"]


def test_a_last_epoch_its_clock_cut_short_is_recorded_stopped_not_finished(compose_config):
    # Lightning counts the epoch the clock stopped as completed: one epoch of 100,000 batches, cut at a
    # second, must not read as the one epoch asked for.
    cfg = compose_config(
        "trainer.max_epochs=1", "+trainer.max_time=00:00:00:01", "data.batches_per_epoch=100000"
    )
    train(cfg)
    results = _status(cfg)
    assert results["status"] == "stopped"
    assert results["reason"].startswith("trainer.max_time=00:00:00:01 stopped training after 0 of ")


@pytest.mark.parametrize("key", ["name", "version"])
def test_a_writer_whose_setting_leads_out_of_the_run_is_refused_naming_it_before_it_writes(
    compose_config, tmp_path, key
):
    cfg = compose_config("logger=csv", f"logger.csv.{key}=../../escape")
    with pytest.raises(
        BadInput,
        match=rf"^logger.csv.{key}=../../escape makes logger.csv \(ResumableCSVLogger\) write .*escape, "
        rf"outside the run's folder .*; give logger.csv.{key} without '..'",
    ):
        train(cfg)
    assert not (Path(cfg.paths.output_dir).parents[1] / "escape").exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["name=../../.."], "name=../../.. leads out of outputs/runs/"),
        (["name="], "name= is empty, but a run's folder is outputs/runs/<name>/<time>"),
        (["name=."], "name=. names no folder, but a run's folder is outputs/runs/<name>/<time>"),
        (["-m", "seed=0,1", "name=./"], "name=./ names no folder, but a run's folder is outputs/runs/"),
        (["-m", "seed=0", "hydra.sweep.dir={finished}"], "hydra.sweep.dir={finished} is a run's folder"),
    ],
)
def test_a_run_or_sweep_that_would_land_over_other_runs_is_refused_before_hydra_writes(
    tmp_path, finished, arguments, message
):
    out = _command("noisydml", [a.replace("{finished}", str(finished)) for a in arguments], tmp_path)
    assert out.returncode == 1 and out.stderr.startswith(message.replace("{finished}", str(finished)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["finished"]
    assert sorted(p.name for p in finished.iterdir()) == [".hydra", "results.json"]


@pytest.mark.parametrize(
    ("arguments", "what"),
    [(["hydra.run.dir={folder}"], "run"), (["-m", "seed=0,1", "hydra.sweep.dir={folder}"], "sweep")],
)
def test_a_folder_of_no_run_is_refused_before_hydra_writes(tmp_path, arguments, what):
    """``hydra.run.dir=.`` in a project (or ``~``, or any folder of other files) would mix a run's files with
    the folder's own."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    (folder / "src").mkdir()
    out = _command("noisydml", [a.replace("{folder}", str(folder)) for a in arguments], tmp_path)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert out.stderr.startswith(
        f"{arguments[-1].format(folder=folder)} is no {what}'s folder but holds notes.txt, src"
    )
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "src"]


def test_a_sweep_job_folder_outside_its_sweep_is_refused(tmp_path):
    sweep = tmp_path / "sweep"
    arguments = [
        "-m",
        "seed=0",
        "trainer.max_epochs=1",
        f"hydra.sweep.dir={sweep}",
        "hydra.sweep.subdir=../x",
    ]
    out = _command("noisydml", arguments, tmp_path)
    assert out.returncode == 1
    assert f"hydra.sweep.subdir puts this job in {tmp_path / 'x'}, outside its sweep's folder" in out.stderr
    assert not (tmp_path / "x" / "results.json").exists()


def test_a_job_folder_every_job_of_a_sweep_shares_is_refused_before_hydra_writes(tmp_path):
    arguments = ["-m", "noise.rate=0.1,0.2", "hydra.sweep.subdir=x", f"hydra.sweep.dir={tmp_path / 's'}"]
    out = _command("noisydml", arguments, tmp_path)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert "hydra.sweep.subdir=x names every job's folder the same, so the sweep's 2 jobs" in out.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("swept", "message"),
    [
        # ${seed} in a sweep of rates: the second job would land in the first's folder, refused there after
        # the first trained.
        (
            ["noise.rate=0.1,0.2", "hydra.sweep.subdir=${seed}"],
            "jobs 0 and 1 (noise.rate=0.2 trainer.max_epochs=1) would write one folder, 0 "
            "(hydra.sweep.subdir=${seed})",
        ),
        # A repeated value: the second job was skipped as the first's run, and both counted finished.
        (["seed=0,0"], "job 1 (seed=0 trainer.max_epochs=1) repeats job 0: the same run twice"),
    ],
)
def test_two_jobs_of_one_folder_are_refused_before_any_job(tmp_path, swept, message):
    sweep = tmp_path / "s"
    out = _command("noisydml", ["-m", *swept, f"hydra.sweep.dir={sweep}", "trainer.max_epochs=1"], tmp_path)
    assert out.returncode == 1 and message in out.stderr
    assert not sweep.exists()


def test_a_shared_cache_inside_a_run_is_refused(compose_config, finished):
    cfg = compose_config("noise=instance_dependent", f"noise.cache_dir={finished}/cache")
    with pytest.raises(
        BadInput, match=rf"^noise.cache_dir={finished}/cache is inside the run folder {finished}"
    ):
        train(cfg)
    assert sorted(p.name for p in finished.iterdir()) == [".hydra", "results.json"]


def test_a_report_or_dashboard_store_inside_a_run_is_refused(tmp_path, finished):
    out = _command("noisydml-report", [str(tmp_path), "--out", str(finished / "r")])
    assert out.returncode != 0 and f"--out {finished / 'r'} is inside the run folder {finished}" in out.stderr
    out = _command("noisydml-dashboard", [str(tmp_path), "--store", str(finished / "s")])
    assert (
        out.returncode != 0 and f"--store {finished / 's'} is inside the run folder {finished}" in out.stderr
    )
    assert sorted(p.name for p in finished.iterdir()) == [".hydra", "results.json"]


def test_a_dashboard_port_already_taken_is_refused_at_once(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _command("noisydml-dashboard", [str(tmp_path), "--port", str(port)])
    assert out.returncode != 0 and f"--port {port} is taken on 127.0.0.1" in out.stderr


def test_a_loss_draws_its_own_tuples_by_its_parameters_without_a_miner(compose_choices):
    # Without a miner the loss draws its triplets, triplets_per_anchor of them per anchor.
    cfg, _ = compose_choices("miner=none", "+loss.triplets_per_anchor=5")
    check_classes(cfg)


def test_a_protocols_frozen_batchnorm_is_a_default_for_the_backbones_it_runs(compose_choices):
    # The yu2018 protocol freezes its GoogLeNet's BatchNorm; its MNIST figure runs a LeNet, which has none:
    # the protocol's value is no choice of the run, so the run is not refused; given for it, it is.
    cfg, _ = compose_choices("experiment=yu2018/fig4_mnist")
    backbone = instantiate(cfg.backbone)
    assert cfg.backbone.freeze_bn and type(backbone.trunk).__name__ == "LeNet"
    # The built parts the rule asks: the backbone says its unread keys; the rest are no class of ours.
    model = SimpleNamespace(backbone=backbone, loss=None, miner=None)
    batches = SimpleNamespace(batches_per_epoch=10)
    datamodule = SimpleNamespace(noise=None, dataset=None, sampler=batches, validation_stages=[])
    parts = model, datamodule
    check_unread(cfg, *parts)
    cfg, _ = compose_choices("experiment=yu2018/fig4_mnist", "backbone.freeze_bn=true")
    with pytest.raises(
        BadInput, match=r"^backbone.freeze_bn=true .* the trunk of backbone \(LeNet\) has none, so nothing"
    ):
        check_unread(cfg, *parts)


class SaysUnread(TripletMarginLoss):
    """A user's loss whose ``note`` its other setting leaves unread: the rule asks every built object."""

    def __init__(self, note: int = 0, reads_note: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.reads_note = reads_note

    def unread_keys(self, parts) -> dict[str, str]:
        return {} if self.reads_note else {"note": "is read only with {node}.reads_note=true; drop {key}"}


def test_a_key_a_built_object_leaves_unread_is_refused_where_given(compose_config):
    # Any class's unread_keys, a user's too, by the key in the config; only a key given for the run.
    cfg = compose_config("loss._target_=test_rules.SaysUnread", "+loss.note=1")
    with pytest.raises(
        BadInput, match=r"^loss.note=1 is read only with loss.reads_note=true; drop loss.note$"
    ):
        train(cfg)
    cfg = compose_config("loss._target_=test_rules.SaysUnread", "+loss.note=1", "+loss.reads_note=true")
    model = SimpleNamespace(backbone=None, loss=instantiate(cfg.loss), miner=None)
    batches = SimpleNamespace(batches_per_epoch=10)
    check_unread(cfg, model, SimpleNamespace(noise=None, dataset=None, sampler=batches, validation_stages=[]))


def test_a_protocols_loss_lr_is_a_default_for_the_methods_it_runs(compose_config):
    # digits/zhang2023_noise sets module.loss_lr for its sweep, whose multi-similarity loss has no
    # parameters: the experiment's value is no choice of this run, so it runs.
    cfg = compose_config(
        "experiment=digits/zhang2023_noise",
        "method=zhang2023/ms",
        "noise.rate=0.1",
        # Shortened (conftest's TINY): another run than the experiment's.
        "name=loss_lr",
        "report.figure=tests/loss_lr",
    )
    assert cfg.module.loss_lr == 0.1
    train(cfg)
    assert _status(cfg)["status"] == "finished"


@pytest.mark.parametrize(
    ("arguments", "path", "message"),
    [
        (
            ["-m", "hydra/launcher=slurm", "seed=0,1"],
            "venv",
            "hydra/launcher=slurm submits the sweep's jobs to a SLURM cluster, but sbatch is not on PATH; "
            "run the sweep where SLURM is (a cluster's login node), or drop hydra/launcher=slurm to run the "
            "jobs here",
        ),
        (
            ["-m", "name=x_${noise.rate}", "noise.rate=0.1,0.2"],
            None,
            "name=x_${noise.rate} is resolved by each job of the sweep with its own values, but the sweep's "
            "folder, outputs/sweeps/<name>/, is named once",
        ),
    ],
)
def test_a_sweep_that_cannot_run_as_asked_is_refused_before_hydra_writes(tmp_path, arguments, path, message):
    # "venv": a PATH of the environment's own commands alone, as on a machine without SLURM.
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)} if path == "venv" else None
    out = _command("noisydml", arguments, tmp_path, env)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert out.stderr.startswith(message)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("override", "why"),
    [
        ("noise.rate=0.4", "an evaluation does not read it, yet would record it as its own"),
        ("loss=margin", "an evaluation does not read it"),
        (
            "dataset.split_seed=3",
            "it splits the data otherwise: part of the samples it would test were trained",
        ),
    ],
)
def test_an_evaluation_keeps_its_runs_config_but_what_it_reads(tmp_path, finished, override, why):
    (finished / ".hydra" / "overrides.yaml").write_text("- noise.rate=0.2\n")
    (finished / "checkpoints").mkdir()
    (finished / "checkpoints" / "best.ckpt").write_bytes(b"weights")
    out = _command("noisydml-eval", [f"ckpt_path={finished}/checkpoints/best.ckpt", override], tmp_path)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert out.stderr.startswith(
        f"noisydml-eval: {override} departs from the config {finished} trained with ({why}"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["finished"]


def test_an_evaluation_on_another_data_set_reads_that_data_sets_keys(finished):
    from noisydml.run.checks.arguments import check_evaluation_arguments

    (finished / "results.json").write_text(
        json.dumps({"status": "finished", "choices": {"dataset": "digits"}})
    )
    # Another data set's split: none of its samples were trained on.
    check_evaluation_arguments(["dataset=mnist5k", "dataset.split_seed=3"], finished)
    # The value the run trained with is the evaluation's too.
    record = {"status": "finished", "choices": {"dataset": "digits"}, "config": {"noise": {"rate": 0.2}}}
    (finished / "results.json").write_text(json.dumps(record))
    check_evaluation_arguments(["noise.rate=0.2"], finished)
    with pytest.raises(BadInput, match=r"noise.rate=0.4 departs from the config"):
        check_evaluation_arguments(["noise.rate=0.4"], finished)
    # The same data set, split otherwise: part of its test split was trained on.
    for same in (["dataset.split_seed=3"], ["dataset=digits", "dataset.split_seed=3"]):
        with pytest.raises(BadInput, match="it splits the data otherwise"):
            check_evaluation_arguments(same, finished)


def test_an_evaluation_into_its_training_runs_folder_is_refused_leaving_the_run_as_it_was(tmp_path, finished):
    (finished / ".hydra" / "overrides.yaml").write_text("- noise.rate=0.2\n")
    (finished / "checkpoints").mkdir()
    (finished / "checkpoints" / "best.ckpt").write_bytes(b"weights")
    (finished / "results.json").write_text(json.dumps({"status": "interrupted"}))
    before = sorted(p.relative_to(finished) for p in finished.rglob("*"))
    arguments = [f"ckpt_path={finished}/checkpoints/best.ckpt", f"hydra.run.dir={finished}"]
    out = _command("noisydml-eval", arguments, tmp_path)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert out.stderr.startswith(
        f"noisydml-eval: hydra.run.dir={finished} is the run that wrote the checkpoint, whose checkpoints"
    )
    assert sorted(p.relative_to(finished) for p in finished.rglob("*")) == before


def test_a_search_whose_searched_key_is_pinned_is_refused_before_its_first_trial_trains(tmp_path):
    # Optuna's sweeper takes loss.eta=2 as fixed and drops it from the search: every trial alike.
    out = _command("noisydml", ["-m", "hparams_search=rdml_eta", "loss.eta=2", "logger=csv"], tmp_path)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith(
        "the search (hydra.sweeper.params) searches loss.eta over choice(0.5, 1, 2, 3, 4), but loss.eta=2 "
        "pins it: every trial would run loss.eta=2"
    )
    assert list(tmp_path.rglob("results.json")) == []


@pytest.mark.parametrize(
    ("space", "message"),
    [
        (
            "loss.eta=choice(1,-2)",
            "the search's space loss.eta=choice(1,-2) holds loss.eta=-2, refused before any trial ran: "
            "loss.eta=-2 is refused by",
        ),
        (
            "loss.eta=interval(-1,2)",
            "the search's space loss.eta=interval(-1,2) holds loss.eta=-1.0, refused",
        ),
        (
            "hydra.sweeper.params={loss.eta:''}",
            "the search's fixed values, refused before any trial ran: loss.eta=",
        ),
        # No validation split: every trial trained, then Optuna failed on a None.
        (
            "data.val_fraction=0",
            "the search's fixed values, refused before any trial ran: the search optimises "
            "optimized_metric=val/recall@1, a validation metric, but data.val_fraction=0 holds out no "
            "validation split, so no trial would return it",
        ),
        # Another method's loss has no eta: the refusal blamed a key the user never typed.
        (
            "method=zhang2023/ms",
            "the search's fixed values, refused before any trial ran: the search hparams_search=rdml_eta "
            "draws loss.eta, but loss (loss=multi_similarity) has no key eta in this run's config",
        ),
    ],
)
def test_a_search_space_value_a_trial_would_refuse_stops_the_search_before_its_first_trial(
    tmp_path, space, message
):
    # Optuna draws the values as trials run: a bad one failed the trial that drew it, after others trained.
    out = _command("noisydml", ["-m", "hparams_search=rdml_eta", space, "logger=csv"], tmp_path)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith(message)
    assert list(tmp_path.rglob("results.json")) == [] and list(tmp_path.rglob("multirun.yaml")) == []


def test_a_search_that_would_look_for_the_worst_trial_is_refused_before_its_first_trial_trains(tmp_path):
    arguments = ["-m", "hparams_search=rdml_eta", "hydra.sweeper.direction=minimize"]
    out = _command("noisydml", [*arguments, "hydra.sweeper.n_trials=1", "logger=csv"], tmp_path)
    assert out.returncode == 1
    assert (
        "hydra.sweeper.direction=minimize searches for the worst trial: optimized_metric=val/recall@1 is "
        "better higher; use hydra.sweeper.direction=maximize\n" in out.stderr
    )
    assert list(tmp_path.rglob("results.json")) == [] and list(tmp_path.rglob("*.ckpt")) == []


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("hydra.output_subdir=.hydra", "a run writes its .hydra/ itself, once its folder is known"),
        ("hydra.job.chdir=true", "a run reads the config's relative paths (data, outputs, caches) from"),
    ],
)
def test_a_hydra_setting_a_run_relies_on_is_kept(tmp_path, argument, message):
    out = _command("noisydml", [argument, "trainer.max_epochs=1"], tmp_path)
    assert out.returncode == 1
    assert out.stderr.startswith(f"{argument} is not a setting noisydml runs with: {message}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argument", ["hydra.sweeper.n_trials=3", "hydra/launcher=slurm", "hydra.launcher.timeout_min=3"]
)
def test_a_sweeps_setting_in_a_single_run_is_refused_not_ignored(tmp_path, argument):
    out = _command("noisydml", [argument, "trainer.max_epochs=1"], tmp_path)
    assert out.returncode == 1
    assert out.stderr.startswith(f"{argument} is read only by a sweep (its sweeper or launcher)")
    assert list(tmp_path.iterdir()) == []
