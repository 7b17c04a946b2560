"""One meaning per metric name in every place a run's numbers land: ``results.json``, ``csv/metrics.csv``,
TensorBoard, W&B and MLflow. ``val/...`` is each validation's score (a logger's latest value: the last
epoch's), ``selected_val/...`` the selected epoch's, which ``results.json`` holds; TensorBoard's HParams table
has a row per run with its choices and those metrics. Runs train for real on digits and are read back from
their own files."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sweeps import checkout_env
from wandb_records import records

# A learning rate too high for the model makes its first epoch its best, so the selected epoch's scores and
# the last epoch's differ.
EARLY_BEST = ["trainer.max_epochs=4", "trainer.check_val_every_n_epoch=1", "optimizer.lr=0.05"]


def _validations(run_dir: Path) -> dict[int, dict[str, float]]:
    """csv/metrics.csv's val/ rows by epoch."""
    with (run_dir / "csv" / "metrics.csv").open() as f:
        rows = [row for row in csv.DictReader(f) if row.get("val/recall@1")]
    return {
        int(row["epoch"]): {k: float(v) for k, v in row.items() if k.startswith("val/") and v} for row in rows
    }


def _csv_selected(run_dir: Path) -> dict[str, float]:
    with (run_dir / "csv" / "metrics.csv").open() as f:
        rows = [row for row in csv.DictReader(f) if row.get("selected_val/recall@1")]
    (row,) = rows
    return {k: float(v) for k, v in row.items() if k.startswith("selected_val/") and v}


def _names_and_selection(run_dir: Path) -> tuple[dict, dict[str, float], dict[str, float]]:
    """results.json, the selected epoch's val/ scores and the last epoch's, from the CSV history."""
    results = json.loads((run_dir / "results.json").read_text())
    validations = _validations(run_dir)
    selected, last = validations[results["selection"]["epoch"]], validations[max(validations)]
    assert results["selection"]["epoch"] != max(validations), (
        "the test needs a selected epoch before the last"
    )
    assert selected["val/recall@1"] != last["val/recall@1"]
    return results, selected, last


def _hparams(run_dir: Path) -> tuple[dict, list[str], dict[str, float]]:
    """TensorBoard's HParams row of a run: its hyperparameters, its metric names, and each scalar's last
    value, from the event files as TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    content = events.PluginTagToContent("hparams")
    parse = plugin_data_pb2.HParamsPluginData.FromString
    start = parse(content["_hparams_/session_start_info"]).session_start_info
    hparams = {key: value.string_value or value.number_value for key, value in start.hparams.items()}
    names = [info.name.tag for info in parse(content["_hparams_/experiment"]).experiment.metric_infos]
    scalars = {tag: events.Scalars(tag)[-1].value for tag in events.Tags()["scalars"]}
    return hparams, names, scalars


def test_logger_tensorboard_writes_the_csv_and_fills_the_hparams_table(compose_config):
    pytest.importorskip("tensorboard", reason='logger=tensorboard needs: pip install ".[tensorboard]"')
    from noisydml.run.train import train

    cfg = compose_config(*EARLY_BEST, "logger=tensorboard")
    train(cfg)
    run_dir = Path(cfg.paths.output_dir)
    results, selected, _ = _names_and_selection(run_dir)

    metrics = results["metrics"]
    assert not any(name.startswith("val/") for name in metrics)
    assert {f"selected_{k}": v for k, v in selected.items()} == pytest.approx(
        {k: v for k, v in metrics.items() if k.startswith("selected_val/")}
    )
    assert _csv_selected(run_dir) == pytest.approx(
        {k: v for k, v in metrics.items() if k.startswith("selected_val/")}
    )

    hparams, names, scalars = _hparams(run_dir)
    assert hparams == {
        "dataset": "digits",
        "backbone": "mlp",
        "loss": "triplet",
        "miner": "random_semihard",
        "noise": "uniform",
        "noise_rate": pytest.approx(cfg.noise.rate),
        "method": "Triplet + random semi-hard",
        "seed": 0,
    }
    assert {"test/recall@1", "test_last/recall@1", "selected_val/recall@1", "selected_epoch"} <= set(names)
    for name in ("test/recall@1", "test_last/recall@1", "selected_val/recall@1"):
        assert scalars[name] == pytest.approx(metrics[name], abs=1e-6)
    assert scalars["selected_epoch"] == results["selection"]["epoch"] + 1


@pytest.mark.slow
def test_wandb_mlflow_and_results_json_mean_the_same_by_val_and_selected_val(tmp_path):
    """W&B's summary and MLflow's latest value of val/... are the last epoch's; selected_val/... is the
    selected epoch's everywhere, as in results.json."""
    pytest.importorskip("mlflow", reason='logger=mlflow needs: pip install ".[mlflow]"')
    from mlflow.tracking import MlflowClient

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_dir = tmp_path / "run"
    command = [sys.executable, "-c", "from noisydml.run.cli import main; main()", "logger=[wandb,mlflow]"]
    tiny = ["data.batches_per_epoch=3", "trainer.enable_progress_bar=false", "cpu_threads=1"]
    done = subprocess.run(
        [*command, *EARLY_BEST, *tiny, f"hydra.run.dir={run_dir}"],
        env={**checkout_env(), "WANDB_MODE": "offline", "WANDB_SILENT": "true", "MLFLOW_TRACKING_URI": store},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results, selected, last = _names_and_selection(run_dir)
    assert _csv_selected(run_dir) == pytest.approx({f"selected_{k}": v for k, v in selected.items()})

    (wandb_file,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    summary = {}
    for record in records(wandb_file):
        if record.WhichOneof("record_type") == "summary":
            summary.update(
                {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.summary.update}
            )
    (mlflow_run,) = MlflowClient(tracking_uri=store).search_runs(["1"])
    latest = mlflow_run.data.metrics
    for name in ("recall@1", "map@r", "nmi"):
        assert summary[f"val/{name}"] == pytest.approx(last[f"val/{name}"], abs=1e-6)
        assert latest[f"val/{name.replace('@', '_at_')}"] == pytest.approx(last[f"val/{name}"], abs=1e-6)
        chosen = results["metrics"][f"selected_val/{name}"]
        assert chosen == pytest.approx(selected[f"val/{name}"], abs=1e-6)
        assert summary[f"selected_val/{name}"] == pytest.approx(chosen)
        assert latest[f"selected_val/{name.replace('@', '_at_')}"] == pytest.approx(chosen)


def test_wandb_online_without_an_account_is_refused_before_the_run(monkeypatch, tmp_path):
    from noisydml.loggers.wandb_mode import choose_wandb_mode
    from noisydml.utils.errors import BadInput

    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_BASE_URL", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    # W&B's own refusal came as the run started: "No API key configured", no way out named.
    with pytest.raises(
        BadInput, match=r"^WANDB_MODE=online logs to a W&B account, but none is logged in here"
    ):
        choose_wandb_mode()
    # A server of one's own: its host's login counts.
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")
    (tmp_path / "netrc").write_text("machine wandb.example.org login user password key\n")
    (tmp_path / "netrc").chmod(0o600)
    assert choose_wandb_mode() == "online"


def test_an_mlflow_server_that_does_not_answer_is_refused_at_once_naming_the_variable(monkeypatch):
    """MLflow's client retried an unreachable MLFLOW_TRACKING_URI for minutes while the run waited, its
    record left ``running``; the logger's check probes it once, and a server that answers any way passes."""
    import http.server
    import socket
    import threading
    import time

    pytest.importorskip("mlflow", reason='logger=mlflow needs: pip install ".[mlflow]"')
    from noisydml.loggers.mlflow_names import PROBE_TIMEOUT_S, ReadableMLFlowLogger
    from noisydml.utils.checks import BadValue

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{free.getsockname()[1]}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", closed)
    started = time.monotonic()
    with pytest.raises(BadValue) as refused:
        ReadableMLFlowLogger.check_arguments("noisydml", tracking_uri=closed)
    assert time.monotonic() - started < PROBE_TIMEOUT_S
    assert str(refused.value.under("logger.mlflow")) == (
        f"logger.mlflow.tracking_uri={closed} (the environment variable MLFLOW_TRACKING_URI) does not answer "
        "(Connection refused), and MLflow would retry it for minutes while the run waits; start the server "
        "there, set MLFLOW_TRACKING_URI to one that answers, or unset it to log to the local store "
        "sqlite:///outputs/mlflow.db"
    )
    # Given in the config, not the environment: the fix is the key's.
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    with pytest.raises(
        BadValue, match=r"give one that answers, e.g. tracking_uri=sqlite:///outputs/mlflow.db$"
    ):
        ReadableMLFlowLogger.check_arguments("noisydml", tracking_uri=closed)

    # Any answer is a server's (an error status: a proxy, a login), and a database store is local.
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ReadableMLFlowLogger.check_arguments(
            "noisydml", tracking_uri=f"http://127.0.0.1:{server.server_port}"
        )
    finally:
        server.shutdown()
        server.server_close()
    ReadableMLFlowLogger.check_arguments("noisydml", tracking_uri="sqlite:///outputs/mlflow.db")
