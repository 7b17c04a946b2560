"""Issue 37's rules, on what they let through: a debug run or an unselected one is recorded as no result
(the report lists it, saying why), an experiment's own sweep and a relabelled departure run, and every
loss, miner and scheduler the project ships is inside its declared ranges. What they refuse is in
docs/reference/bad-input.md's table (tests/test_bad_input.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from noisydml import CONFIG_DIR
from noisydml.report.collect import COMPLETE, read_run
from noisydml.run.checks.classes import check_classes
from noisydml.run.checks.identity import check_identity
from noisydml.run.train import group_choices, train
from noisydml.utils.errors import BadInput


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


@pytest.fixture
def compose_choices():
    """Compose like compose_config, returning the config and its group choices as a run sees them."""

    def _compose(*overrides: str):
        from hydra.core.hydra_config import HydraConfig

        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose("config", overrides=list(overrides), return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        return cfg, group_choices()

    yield _compose
    GlobalHydra.instance().clear()


@pytest.mark.parametrize(
    "overrides",
    [
        # Its sweep's methods (each with its own loss and miner), noise models and rates, seeds.
        ["experiment=digits/levi2021_even_odd", "method=levi2021/eps_triplet", "seed=3"],
        ["experiment=digits/le2019_noise", "method=le2019/marginal_random_semihard", "noise=topline"],
        ["experiment=digits/le2019_noise", "noise.rate=0.4"],
        ["experiment=digits/bdml_noise", "method=bdml/pca", "noise.rate=0.3"],
        # What does not make the run another (scale, paths, training length).
        ["experiment=digits/le2019_noise", "trainer.max_epochs=1", "data.P=5", "paths.data_dir=/tmp"],
        # A departure given labels of its own is filed elsewhere.
        ["experiment=digits/le2019_noise", "dataset=mnist5k", "name=mine", "report.figure=mine/mnist5k"],
    ],
)
def test_an_experiment_runs_its_sweep_and_relabelled_departures(compose_choices, overrides):
    check_identity(*compose_choices(*overrides))


def test_a_departure_with_only_a_new_name_is_still_filed_under_the_experiment(compose_choices):
    cfg, choices = compose_choices("experiment=digits/le2019_noise", "dataset=mnist5k", "name=mine")
    with pytest.raises(BadInput, match=r"is dataset=digits, but dataset=mnist5k was given"):
        check_identity(cfg, choices)


def _options(group: str) -> list[str]:
    return sorted(
        str(p.relative_to(CONFIG_DIR / group).with_suffix("")) for p in (CONFIG_DIR / group).glob("*.yaml")
    )


@pytest.mark.parametrize(
    "override",
    [f"loss={o}" for o in _options("loss")]
    + [f"miner={o}" for o in _options("miner")]
    + [f"scheduler={o}" for o in _options("scheduler")],
)
def test_every_shipped_loss_miner_and_scheduler_is_inside_its_ranges(compose_choices, override):
    cfg, _ = compose_choices(override)
    check_classes(cfg)


@pytest.mark.parametrize(
    "arguments", [["hydra.run.dir={finished}/nested"], ["-m", "seed=1,2", "hydra.sweep.dir={finished}/sweep"]]
)
def test_a_run_or_sweep_folder_inside_another_run_is_refused_before_hydra_writes(tmp_path, arguments):
    finished = tmp_path / "finished"
    (finished / ".hydra").mkdir(parents=True)
    (finished / "results.json").write_text(json.dumps({"status": "finished"}))
    exe = Path(sys.executable).with_name("noisydml")
    given = [a.replace("{finished}", str(finished)) for a in arguments]
    out = subprocess.run([str(exe), *given], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert f"is inside the run folder {finished}, whose files it would mix with" in out.stderr
    assert sorted(p.name for p in finished.iterdir()) == [".hydra", "results.json"]


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ("seed=range(0,0)", "seed=range(0,0) expands to no value, so the sweep would run no job"),
        ("seed=range(0,5,0)", "seed=range(0,5,0) cannot be expanded (range() arg 3 must not be zero)"),
    ],
)
def test_a_sweep_of_no_job_is_refused_before_hydra_writes(tmp_path, sweep, message):
    exe = Path(sys.executable).with_name("noisydml")
    out = subprocess.run([str(exe), "-m", sweep], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    (line,) = out.stderr.strip().splitlines()
    assert (
        out.returncode == 1
        and line.startswith(message)
        and line.endswith("e.g. seed=range(0,5) or seed=0,1,2")
    )
    assert list(tmp_path.iterdir()) == []


def test_a_run_its_clock_cut_short_is_recorded_stopped_not_finished(compose_config):
    # A digits epoch takes well under a second: 1,000 of them do not fit in 2 seconds.
    cfg = compose_config("trainer.max_epochs=1000", "+trainer.max_time=00:00:00:02", "data.val_fraction=0")
    train(cfg)
    results = _status(cfg)
    assert results["status"] == "stopped"
    assert results["reason"].startswith("trainer.max_time=00:00:00:02 stopped training after ")
    assert "of trainer.max_epochs=1000 epochs" in results["reason"]
    assert read_run(Path(cfg.paths.output_dir)).status != COMPLETE
