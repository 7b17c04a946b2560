"""``noisydml-dashboard`` on a real small sweep, read by a real browser (Debian's headless ``chromium``)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

import browser
from sweeps import checkout_env

pytest.importorskip(
    "mlflow", reason='MLflow is the optional extra the dashboard runs on: pip install ".[mlflow]"'
)

STARTUP_S = 180


class _ComparePage(HTMLParser):
    """MLflow's compare page: its table rows (run names, params: label, then a cell per run), and its metric
    grid, where a cell is placed by its style (``left``: which run, ``top``: which metric) and a metric's
    name is a link titled "Plot chart" at the same ``top``."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.names: dict[int, str] = {}
        self.values: dict[tuple[int, int], str] = {}
        self._cell: list[str] | None = None
        self._place: tuple[int, int] | None = None
        self._grid: tuple[str, tuple[int, int]] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th") and self.rows:
            self._cell = []
        elif tag == "div" and "top:" in (attrs.get("style") or ""):
            style = dict(p.split(":", 1) for p in attrs["style"].replace(" ", "").split(";") if ":" in p)
            if style.get("top", "").endswith("px") and style.get("left", "").endswith("px"):
                self._place = (int(float(style["top"][:-2])), int(float(style["left"][:-2])))
        elif tag == "a" and attrs.get("title") == "Plot chart" and self._place:
            self._grid = ("name", self._place)
        elif tag == "span" and self._place and "tooltip-data-state" in attrs:
            self._grid = ("value", self._place)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag in ("a", "span"):
            self._grid = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._grid is not None and data.strip():
            kind, (top, left) = self._grid
            if kind == "name":
                self.names[top] = data.strip()
            else:
                self.values[top, left] = data.strip()

    def metric(self, name: str) -> list[str]:
        """The metric's value for each run, left to right."""
        (top,) = [top for top, label in self.names.items() if label == name]
        return [
            value
            for (row, _), value in sorted(self.values.items(), key=lambda item: item[0][1])
            if row == top
        ]


class _RunsTable(HTMLParser):
    """MLflow's runs table (ag-grid): its column ids, and each row's cells by column id (``params.`miner```,
    ``duration``), the rows in the order shown (the grid places them by ``row-index``)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[int, dict[str, str]] = {}
        self.headers: list[str] = []
        self._row: int | None = None
        self._column: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("role") == "row" and (attrs.get("row-index") or "").isdigit():
            self._row, self._column = int(attrs["row-index"]), None
        elif attrs.get("role") == "columnheader" and attrs.get("col-id"):
            self.headers.append(attrs["col-id"])
        elif attrs.get("role") == "gridcell" and self._row is not None and attrs.get("col-id"):
            self._column = attrs["col-id"]
            self.rows.setdefault(self._row, {})[self._column] = ""

    def handle_data(self, data):
        if self._column is not None and data.strip():
            row = self.rows[self._row]
            row[self._column] = f"{row[self._column]} {data.strip()}".strip()

    def shown(self) -> list[dict[str, str]]:
        return [self.rows[index] for index in sorted(self.rows)]


def _served(log: Path, server: subprocess.Popen, seconds: float) -> str:
    """What the dashboard printed once it said where it serves; by then the server must answer."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert server.poll() is None, f"noisydml-dashboard exited with {server.returncode}"
        printed = log.read_text()
        if "serving on" in printed:
            url = next(line.split()[2] for line in printed.splitlines() if line.startswith("serving on"))
            # Printed only once it answers: the first request succeeds, with no retry.
            with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                assert answer.status == 200
            return printed
        time.sleep(1)
    raise AssertionError(f"noisydml-dashboard printed no URL within {seconds} s: {log.read_text()[-2000:]}")


def _seconds(duration: str) -> float:
    """MLflow's duration text (``0.9s``, ``1.5min``) in seconds."""
    value, unit = re.fullmatch(r"([\d.]+)\s*(ms|s|min|h)", duration).groups()
    return float(value) * {"ms": 0.001, "s": 1, "min": 60, "h": 3600}[unit]


@pytest.mark.slow
def test_dashboard_shows_every_run_with_its_noise_rate_miner_and_recall(small_sweep, tmp_path):
    """The runs table opens with the swept params, test Recall@1 (best first) and the runs' durations, each
    run named by what differs; the compare page shows every run and plots test Recall@1."""
    browser.chromium()
    from noisydml.dashboard.cli import free_port

    port = free_port()
    log_path = tmp_path / "dashboard.log"
    log = log_path.open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "noisydml.dashboard.cli", str(small_sweep), "--port", str(port)],
        env=checkout_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        printed = _served(log_path, server, STARTUP_S).splitlines()
        table_url = next(line.split()[-1] for line in printed if "table:" in line)
        compare = next(line.split()[-1] for line in printed if "compare:" in line)
        assert compare.startswith(f"http://127.0.0.1:{port}/")
        page = browser.dump_dom(compare)
        table_page = browser.dump_dom(table_url, window=(2400, 1000))
        screenshot = os.environ.get("NOISYDML_DASHBOARD_SCREENSHOT")
        if screenshot:
            browser.screenshot(table_url, Path(screenshot), window=(1920, 560))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        log.close()

    runs = [json.loads(p.read_text()) for p in sorted(small_sweep.glob("*/results.json"))]
    assert len(runs) == 4
    parser = _ComparePage()
    parser.feed(page)
    table = {row[0].rstrip(":"): row[1:] for row in parser.rows if row}
    assert "Run Name" in table, f"no runs in the page: {page[:2000]}"
    assert len(table["Run Name"]) == 4
    shown = list(zip(table["noise_rate"], table["miner"], parser.metric("test/recall_at_1"), strict=True))
    expected = [
        (f"{r['config']['noise']['rate']:g}", r["choices"]["miner"], f"{r['metrics']['test/recall@1']:.3g}")
        for r in runs
    ]
    # The page rounds metrics to three significant digits; the runs' own values, rounded alike, must match.
    assert sorted(shown) == sorted(expected)
    # Its plot is on the metric the runs were selected by, scored on the test split.
    axes = re.findall(r'class="axis-title"[^>]*data-unformatted="([^"]+)"', page)
    assert "test/recall_at_1" in axes and not any(
        "/" in axis for axis in axes if axis != "test/recall_at_1"
    ), axes

    grid = _RunsTable()
    grid.feed(table_page)
    params = ["params.`noise_rate`", "params.`miner`"]
    assert {*params, "metrics.`test/recall_at_1`", "duration"} <= set(grid.headers), grid.headers
    rows = grid.shown()
    assert len(rows) == 4, table_page[:2000]
    by_name = {f"noise.rate={r['config']['noise']['rate']:g} miner={r['choices']['miner']}": r for r in runs}
    recalls = []
    for row in rows:
        # Named by the overrides that differ between the runs; those every run shares are left out.
        run = by_name[re.sub(r"^#\w+ ", "", row["attributes.`Run Name`"])]  # after the run's colour
        assert [row[p] for p in params] == [f"{run['config']['noise']['rate']:g}", run["choices"]["miner"]]
        assert float(row["metrics.`test/recall_at_1`"]) == pytest.approx(run["metrics"]["test/recall@1"])
        took = datetime.fromisoformat(run["ended_at"]) - datetime.fromisoformat(run["started_at"])
        # MLflow shows a tenth of a second.
        assert _seconds(row["duration"]) == pytest.approx(took.total_seconds(), abs=0.051)
        recalls.append(run["metrics"]["test/recall@1"])
    assert recalls == sorted(recalls, reverse=True)
    # A server told to stop is gone, with its workers.
    assert server.returncode is not None


@pytest.mark.slow
def test_logger_mlflow_names_each_run_by_its_overrides_as_wandb_does(tmp_path):
    """A live sweep with logger=mlflow into a SQLite store: each MLflow run is named by its job's overrides,
    the name its W&B run and its noisydml-dashboard run get (loggers.run_fields.run_name)."""
    from mlflow.tracking import MlflowClient

    from noisydml.loggers.run_fields import run_name

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tiny = ["trainer.max_epochs=1", "data.batches_per_epoch=2", "trainer.enable_progress_bar=false"]
    command = [sys.executable, "-c", "from noisydml.run.cli import main; main()", "-m", "logger=mlflow"]
    swept = [
        *tiny,
        "cpu_threads=1",
        "miner=random_semihard,fixed_semihard",
        f"hydra.sweep.dir={tmp_path / 's'}",
    ]
    done = subprocess.run(
        [*command, *swept],
        env={**checkout_env(), "MLFLOW_TRACKING_URI": store},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    client = MlflowClient(tracking_uri=store)
    (experiment,) = [e for e in client.search_experiments() if e.name == "default"]
    runs = client.search_runs([experiment.experiment_id])
    names = sorted(run.info.run_name for run in runs)
    # Where or how a job logs (the progress bar, threads, logger=, hydra.*) does not name it.
    assert names == [f"{' '.join(tiny[:2])} miner={m}" for m in ("fixed_semihard", "random_semihard")]
    stored = [yaml.safe_load(p.read_text()) for p in (tmp_path / "s").glob("*/.hydra/overrides.yaml")]
    assert sorted(run_name(overrides, "default") for overrides in stored) == names
    assert all("test/recall_at_1" in run.data.metrics for run in runs)


@pytest.mark.slow
def test_store_names_times_and_view_of_runs_old_and_new(tmp_path):
    """Two run folders written as noisydml writes them, one from before results.json recorded its start
    and end: MLflow's runs get the recorded times (else the file's time, wall_time_s before it), names from
    the overrides that differ, and a view on the varied params and the optimized metric."""
    from mlflow.tracking import MlflowClient

    from noisydml.dashboard.cli import build_store

    base = {"status": "finished", "config": {"name": "default", "optimized_metric": "val/recall@1"}}
    base["choices"] = {"loss": "triplet", "miner": "fixed_semihard"}
    base["selection"] = {"epoch": 0, "mode": "max"}
    new = {**base, "started_at": "2026-01-01T10:00:00.000+00:00", "ended_at": "2026-01-01T10:00:07.500+00:00"}
    new["metrics"] = {"test/recall@1": 0.9, "selected_val/recall@1": 0.8}
    # Written before selected_val/: val/ held the selected epoch's scores.
    old = {**base, "wall_time_s": 3.0, "metrics": {"test/recall@1": 0.7, "val/recall@1": 0.6}}
    old["choices"] = {"loss": "triplet", "miner": "random_semihard"}
    sweep = tmp_path / "sweep"
    for job, (results, miner) in enumerate(((new, "fixed_semihard"), (old, "random_semihard"))):
        (sweep / str(job) / ".hydra").mkdir(parents=True)
        (sweep / str(job) / "results.json").write_text(json.dumps(results))
        overrides = ["trainer.max_epochs=2", f"miner={miner}", "logger=csv"]
        (sweep / str(job) / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    ended_old = (sweep / "1" / "results.json").stat().st_mtime

    (imported,) = build_store([sweep], tmp_path / "store")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    runs = {run.info.run_name: run for run in client.search_runs([imported.experiment_id])}
    assert sorted(runs) == ["miner=fixed_semihard", "miner=random_semihard"]
    recent, earlier = runs["miner=fixed_semihard"].info, runs["miner=random_semihard"].info
    start = datetime.fromisoformat(new["started_at"]).timestamp() * 1000
    assert (recent.start_time, recent.end_time - recent.start_time) == (start, 7500)
    assert earlier.end_time == int(ended_old * 1000) and earlier.end_time - earlier.start_time == 3000
    assert runs["miner=random_semihard"].data.metrics["selected_val/recall_at_1"] == 0.6
    assert runs["miner=random_semihard"].data.params["trainer.max_epochs"] == "2"

    view = json.loads(
        client.get_experiment(imported.experiment_id).tags[f"mlflow.sharedViewState.{imported.view}"]
    )
    assert view["selectedColumns"][:2] == ["params.`miner`", "params.`method`"]
    assert view["selectedColumns"][2:] == ["metrics.`test/recall_at_1`", "metrics.`selected_val/recall_at_1`"]
    assert (view["orderByKey"], view["orderByAsc"]) == ("metrics.`test/recall_at_1`", False)
    assert imported.paths()["runs"].endswith(f"?viewStateShareKey={imported.view}")


def test_each_stored_run_ends_with_the_status_its_record_says(tmp_path):
    """``--store`` left an evaluated run (noisydml-eval) and a debug run RUNNING in MLflow: every run that
    ran to its end ends FINISHED or FAILED, an interrupted one KILLED, and only one recorded running runs."""
    from mlflow.tracking import MlflowClient

    from noisydml.dashboard.cli import build_store
    from noisydml.utils import run_directory as recorded

    expected = {
        recorded.RUNNING: "RUNNING",
        recorded.FINISHED: "FINISHED",
        recorded.LEGACY_FINISHED: "FINISHED",
        recorded.FAILED: "FAILED",
        recorded.INTERRUPTED: "KILLED",
        recorded.DEBUG: "FINISHED",
        recorded.UNSELECTED: "FINISHED",
        recorded.STOPPED: "FINISHED",
        recorded.EVALUATED: "FINISHED",
        recorded.DIVERGED: "FAILED",
    }
    # Every status results.json records: the module's docstring has a bullet per status, or statuses.
    bullets = re.findall(r"^- (.*?):", recorded.__doc__, re.M)
    documented = {status for bullet in bullets for status in re.findall(r"``(\w+)``", bullet)}
    assert documented | {recorded.LEGACY_FINISHED} == set(expected)
    runs = tmp_path / "runs"
    for status in expected:
        (runs / status).mkdir(parents=True)
        record = {"status": status, "config": {"name": "default"}, "metrics": {"test/recall@1": 0.5}}
        (runs / status / "results.json").write_text(json.dumps(record))

    (imported,) = build_store([runs], tmp_path / "store")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    stored = {
        run.data.tags["status"]: run.info.status for run in client.search_runs([imported.experiment_id])
    }
    assert stored == expected


def test_a_relative_store_is_served(tmp_path, monkeypatch):
    """``--store outputs/dashboard`` stopped with a traceback once the store was built (a relative path has
    no file URI for MLflow's artifacts): the server is given the absolute folder."""
    from noisydml.dashboard import cli

    started: list[list[str]] = []

    class Server:
        pid = 0

        def __init__(self, command: list[str], **kwargs) -> None:
            started.append(command)

        def poll(self) -> int:
            return 0

        def wait(self) -> int:
            return 0

    monkeypatch.setattr(cli.subprocess, "Popen", Server)
    monkeypatch.setattr(cli.signal, "signal", lambda *args: None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "store").mkdir()
    assert cli.serve(Path("store"), 5000) == 0
    (command,) = started
    assert (
        command[command.index("--default-artifact-root") + 1] == (tmp_path / "store" / "artifacts").as_uri()
    )


def test_a_store_the_dashboard_did_not_build_is_never_replaced(tmp_path):
    """``--store`` on a folder holding the user's own MLflow store (``logger=mlflow``'s ``mlflow.db``) is
    refused before anything is written; a store the dashboard built is rebuilt."""
    from noisydml.dashboard.cli import STORE_MARK, build_store

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "mlflow.db").write_bytes(b"their runs")
    out = subprocess.run(
        [str(Path(sys.executable).with_name("noisydml-dashboard")), str(tmp_path), "--store", str(theirs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert f"--store {theirs} holds an mlflow.db that noisydml-dashboard did not build" in out.stderr
    assert (theirs / "mlflow.db").read_bytes() == b"their runs"
    assert sorted(p.name for p in theirs.iterdir()) == ["mlflow.db"]
    ours = tmp_path / "ours"
    build_store([], ours)
    (ours / "mlflow.db").write_bytes(b"an earlier store of ours")
    build_store([], ours)
    assert (ours / STORE_MARK).is_file()
    database = ours / "mlflow.db"
    assert not database.exists() or database.read_bytes() != b"an earlier store of ours"


def test_a_file_given_for_a_folder_is_told_to_give_its_folder(tmp_path, capsys):
    """A run's ``results.json`` given for its folder is said to be a file, its run folder named; a path that
    is not there is no such folder."""
    from noisydml.dashboard.cli import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text("{}")
    with pytest.raises(SystemExit) as refused:
        main([str(run / "results.json")])
    assert str(refused.value) == (
        f"noisydml-dashboard: {run / 'results.json'} is a file; the dashboard takes run or sweep folders, "
        f"e.g. its folder: noisydml-dashboard {run}"
    )
    (run / "csv").mkdir()
    (run / "csv" / "metrics.csv").write_text("epoch\n")
    with pytest.raises(SystemExit, match=f"is a file; .*: noisydml-dashboard {run}$"):
        main([str(run / "csv" / "metrics.csv")])
    with pytest.raises(SystemExit) as refused:
        main([str(tmp_path / "gone")])
    assert str(refused.value).startswith(f"noisydml-dashboard: {tmp_path / 'gone'}: no such folder")


def test_a_folder_given_beside_the_folder_that_holds_it_is_imported_once(tmp_path, capsys):
    # A sweep and one of its jobs: the job's run was stored twice, and shown twice.
    from noisydml.dashboard.cli import build_store

    sweep = tmp_path / "sweep"
    for job in ("0", "1"):
        (sweep / job).mkdir(parents=True)
        record = {"status": "finished", "config": {"name": "default"}, "metrics": {"test/recall@1": 0.5}}
        (sweep / job / "results.json").write_text(json.dumps(record))
    imported = build_store([sweep, sweep / "1", sweep], tmp_path / "store")
    assert [len(experiment.run_ids) for experiment in imported] == [2]
    assert f"{sweep / '1'} is inside another folder given" in capsys.readouterr().err
