"""``noisydml-dashboard [dirs...]``: the runs and sweeps below the given folders in MLflow's UI, served on
127.0.0.1 until stopped (Ctrl-C).

MLflow's UI, not a server of our own: its runs table has a column per param and metric, sorts by any of
them and filters by a search expression (``params.miner = 'fixed_semihard' and metrics.`test/recall@1` >
0.9``), and each run's page charts its curves. It runs on a local SQLite file, with no account and no
internet. The store is built afresh from the runs' own files at each start (a few runs a second), so what
it shows is what the folders hold now; ``--store`` keeps it somewhere to open again with ``mlflow ui``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from noisydml.utils.checks import check_writable
from noisydml.utils.errors import BadInput
from noisydml.utils.run_directory import run_holding

LOOPBACK = "127.0.0.1"
# Written beside the SQLite file of a store the dashboard built: only such a store is replaced at a start.
STORE_MARK = "noisydml-dashboard.txt"
MAX_PORT = 65535


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="noisydml-dashboard",
        description="Serve runs and sweeps (their results.json and csv/metrics.csv) in MLflow's UI on "
        f"{LOOPBACK} until stopped.",
    )
    parser.add_argument(
        "dirs",
        nargs="*",
        type=Path,
        default=[Path("outputs")],
        help="run or sweep folders (default: outputs)",
    )
    parser.add_argument(
        "--port", type=int, default=5000, help="port on 127.0.0.1; 0: a free one (default 5000)"
    )
    parser.add_argument(
        "--store", type=Path, default=None, help="folder for the SQLite store (default: a temporary one)"
    )
    return parser.parse_args(argv)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    """Nothing listens on ``port`` of the loopback: MLflow's server would otherwise wait to bind it, and
    the page found there would be another server's."""
    with socket.socket() as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def build_store(dirs: list[Path], store: Path) -> list:
    """A fresh SQLite store in ``store`` with one experiment per folder of ``dirs``; a folder inside another
    given (a sweep's job beside its sweep) is that folder's already, and is not imported twice."""
    from mlflow.tracking import MlflowClient

    from noisydml.dashboard.store import import_folder

    resolved = [Path(folder).resolve() for folder in dirs]
    inner = {f for f in resolved if any(f != other and f.is_relative_to(other) for other in resolved)}
    for folder in sorted(inner):
        print(
            f"{folder} is inside another folder given, whose runs it is among; imported once", file=sys.stderr
        )
    # Each folder once, in the order given.
    first = {path: folder for folder, path in reversed(list(zip(dirs, resolved, strict=True)))}
    dirs = [first[path] for path in dict.fromkeys(resolved) if path not in inner]

    store.mkdir(parents=True, exist_ok=True)
    check_store(store)
    database = store / "mlflow.db"
    database.unlink(missing_ok=True)
    (store / STORE_MARK).write_text(
        "Built by noisydml-dashboard from the run folders below, and built afresh at its next start:\n"
        + "".join(f"{Path(folder).resolve()}\n" for folder in dirs)
    )
    client = MlflowClient(tracking_uri=_sqlite(database))
    return [import_folder(client, folder) for folder in dirs]


def check_store(store: Path) -> None:
    """A store folder's SQLite file is replaced at each start: only one the dashboard built (its mark beside
    it), never an MLflow store of the user's (``logger=mlflow`` into ``mlflow.db``)."""
    if (store / "mlflow.db").exists() and not (store / STORE_MARK).is_file():
        raise BadInput(
            f"--store {store} holds an mlflow.db that noisydml-dashboard did not build (no {STORE_MARK} "
            "beside it), which it would replace: the store is built afresh at each start; give a folder of "
            f"its own, e.g. --store {store / 'dashboard'}"
        )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    files = [d for d in args.dirs if d.is_file()]
    if files:
        # The run folder a file lies in (csv/metrics.csv's too), else the folder holding it.
        folders = " ".join(dict.fromkeys(shlex.quote(str(run_holding(f) or f.parent)) for f in files))
        sys.exit(
            f"noisydml-dashboard: {', '.join(map(str, files))} is a file; the dashboard takes run or sweep "
            f"folders, e.g. its folder: noisydml-dashboard {folders}"
        )
    missing = [str(d) for d in args.dirs if not d.is_dir()]
    if missing:
        sys.exit(f"noisydml-dashboard: {', '.join(missing)}: no such folder; give run or sweep folders")
    if not 0 <= args.port <= MAX_PORT:
        sys.exit(
            f"noisydml-dashboard: --port {args.port} is not a port; give one in 1-{MAX_PORT}, or 0 for a "
            "free one"
        )
    if args.port and not port_is_free(args.port):
        sys.exit(
            f"noisydml-dashboard: --port {args.port} is taken on {LOOPBACK} (another server listens there); "
            "give another, or --port 0 for a free one"
        )
    if args.store is not None:
        try:
            if (run := run_holding(args.store)) is not None:
                raise BadInput(
                    f"--store {args.store} is inside the run folder {run}, which the dashboard never writes "
                    "into; give a folder outside every run"
                )
            check_writable(args.store, "--store", "--store <a folder of yours>")
        except BadInput as error:
            sys.exit(f"noisydml-dashboard: {error}")
    try:
        import mlflow  # noqa: F401
    except ImportError:
        sys.exit('noisydml-dashboard needs MLflow: pip install "noisydml[mlflow]"')
    port = args.port or free_port()
    with tempfile.TemporaryDirectory(prefix="noisydml-dashboard-") as temporary:
        store = args.store or Path(temporary)
        try:
            imported = build_store(args.dirs, store)
        except (FileNotFoundError, BadInput) as error:
            sys.exit(f"noisydml-dashboard: {error}")
        url = f"http://{LOOPBACK}:{port}"
        for experiment in imported:
            print(f"{experiment.name}: {len(experiment.run_ids)} runs")
        print(f"starting MLflow's server on {url} (it can take a minute)...", flush=True)

        def announce() -> None:
            for experiment in imported:
                pages = experiment.paths()
                print(
                    f"{experiment.name}:\n  table:   {url}{pages['runs']}\n  compare: {url}{pages['compare']}"
                )
            print(f"serving on {url} until stopped (Ctrl-C)", flush=True)

        sys.exit(serve(store, port, announce))


def serve(store: Path, port: int, announce: Callable[[], None] = lambda: None) -> int:
    """MLflow's server on the store, on loopback only, until it stops or this process is told to;
    ``announce`` once it answers."""
    # A file URI names an absolute path (--store outputs/dashboard is relative to here).
    artifacts = store.resolve() / "artifacts"
    artifacts.mkdir(exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        _sqlite(store / "mlflow.db"),
        "--default-artifact-root",
        artifacts.as_uri(),
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    # Its own process group, so stopping the dashboard stops MLflow's workers with it.
    server = subprocess.Popen(command, start_new_session=True)

    def stop(signum, frame) -> None:
        os.killpg(server.pid, signal.SIGTERM)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    try:
        if _answers(f"http://{LOOPBACK}:{port}/health", server):
            announce()
        return server.wait()
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)


def _answers(url: str, server: subprocess.Popen) -> bool:
    """Whether ``url`` answers before ``server`` exits (its workers take a while to start)."""
    while server.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except OSError:
            time.sleep(0.5)
    return False


def _sqlite(path: Path) -> str:
    return f"sqlite:///{path.resolve()}"


if __name__ == "__main__":
    main()
