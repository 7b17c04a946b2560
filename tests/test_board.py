"""runs.csv, the board (issue 46): a reproduction's finished runs as rows, the committed verdicts drawn from
them alone, and a new method set beside them (``noisydml-report MY_SWEEP --against results/<name>``) with
the verdicts a sweep holding every method gives. On real runs: a shortened noisy_dml comparison of three
methods at three seeds (tests/sweeps.py), and a fourth method run apart, as a user runs theirs."""

from __future__ import annotations

import csv
import filecmp
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from noisydml.report import board as board_module
from noisydml.report import comparisons
from noisydml.report.against import board_comparisons, write_against
from noisydml.report.board import draw_verdicts, read_runs, rows_from_folders, runs_of, write_runs
from noisydml.report.cli import main, write_report
from noisydml.report.collect import collect
from noisydml.report.tables import group_runs
from sweeps import BOARD_METHODS, checkout_env, run_board

# Each test reads real runs: the sweeps take about a minute on 2 cores.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# What a reproduction commits that runs.csv must give back byte for byte.
DRAWN = ("claims.csv", "comparisons.csv", "detection.csv", "test_selection.csv")
NEW = "le2019/marginal_random_semihard"


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The board's sweep; the new method under its own labels, as a user runs it; the same method labelled
    as the board's sweep, so that a report over both folders is one sweep of every method."""
    root = tmp_path_factory.mktemp("board")
    return {
        "board": run_board(root / "board", BOARD_METHODS),
        "mine": run_board(root / "mine", NEW, name="mine", figure="mylab/digits"),
        "mine_as_board": run_board(root / "mine_as_board", NEW),
    }


@pytest.fixture(scope="module")
def published(sweeps, tmp_path_factory) -> Path:
    """The board published as a reproduction is: results/board/ holds runs.csv and what it decides."""
    results = tmp_path_factory.mktemp("results")
    assert _publish(["board", str(sweeps["board"]), "--results", str(results)]) == 0
    return results / "board"


def _publish(argv: list[str]) -> int:
    import importlib.util

    spec = importlib.util.spec_from_file_location("publish_results", ROOT / "scripts" / "publish_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main(argv)


def test_runs_csv_gives_back_the_verdicts_the_run_folders_give(sweeps, tmp_path):
    report = write_report([sweeps["board"]], tmp_path / "reports", name="board")
    rows = read_runs(report.directory)
    assert len(rows) == 9 and {r["method"] for r in rows} == set(BOARD_METHODS.split(","))
    drawn = tmp_path / "drawn"
    drawn.mkdir()
    draw_verdicts(runs_of(rows), drawn)
    for name in DRAWN:
        assert (report.directory / name).is_file(), name
        assert filecmp.cmp(report.directory / name, drawn / name, shallow=False), name
    # Every method of a seed trained on the same noisy labels, the filter's dropped samples included.
    by_seed = {(r["seed"], r["split_hash"], r["label_hash"]) for r in rows}
    assert len(by_seed) == 3 and len({h for _, _, h in by_seed}) == 3
    assert all(len(r["label_hash"]) == 16 for r in rows)
    row = rows[0]
    assert (row["experiment"], row["figure"], row["noise"], row["noise_rate"]) == (
        "noisy_dml/digits_symmetric",
        "noisy_dml/board",
        "uniform",
        "0.5",
    )
    assert row["numerics"] == "avx2" and row["cpu_capability"] == "AVX2" and row["commit"]
    assert json.loads(row["versions"])["torch"] and float(row["wall_s"]) > 0
    assert (row["selected_epoch"], row["last_epoch"], row["test_best_epoch"]) == ("0", "0", "0")
    for metric in ("test/recall@1", "test_last/recall@1", "test_best_epoch/recall@1", "train/knn_start_auc"):
        assert 0 < float(row[metric]) <= 1, metric


def test_a_large_runs_csv_is_compressed_the_same_bytes_each_time(sweeps, tmp_path, monkeypatch):
    rows = rows_from_folders([sweeps["board"]])
    plain = write_runs(rows, tmp_path)
    text = plain.read_bytes()
    assert plain.name == "runs.csv"
    monkeypatch.setattr(board_module, "COMPRESS_ABOVE", 1000)
    packed = write_runs(rows, tmp_path)
    data = packed.read_bytes()
    # The plain file goes: a folder holds one of the two.
    assert packed.name == "runs.csv.gz" and not plain.exists()
    assert write_runs(rows, tmp_path).read_bytes() == data and gzip.decompress(data) == text
    assert len(read_runs(tmp_path)) == 9


def test_publishing_writes_runs_csv_beside_comparisons_csv_drawn_from_it(published, sweeps, tmp_path):
    assert (published / "runs.csv").is_file() and (published / "comparisons.csv").is_file()
    assert not (published / "claims.csv").exists()
    report = write_report([sweeps["board"]], tmp_path / "reports", name="board")
    for name in ("runs.csv", "comparisons.csv", "detection.csv"):
        assert filecmp.cmp(report.directory / name, published / name, shallow=False), name
    stamp = json.loads((published / "stamp.json").read_text())
    assert stamp["complete_runs"] == 9 and stamp["seeds"] == {"noisy_dml/board": [0, 1, 2]}
    assert stamp["numerics"] == ["avx2"] and len(stamp["versions"]) == 1
    # The commit is the one the runs trained at, whatever checkout publishes; no time without --started.
    assert stamp["commit"] == stamp["versions"][0]["git_commit"] and "wall_s" not in stamp


def test_publishing_keeps_the_tuning_without_the_machines_folders_and_times_the_reproduction(
    sweeps, tmp_path
):
    sweep = shutil.copytree(sweeps["board"], tmp_path / "digits" / "board")
    tuned = {"metric": "val/recall@1", "methods": {"bdml/dml": {"chosen": {"optimizer.lr": 0.0012}}}}
    study = {"study": "/home/me/outputs/tuning/bdml/dml"}
    record = {**tuned, "methods": {"bdml/dml": {**tuned["methods"]["bdml/dml"], **study}}}
    (sweep / "tuning.json").write_text(json.dumps(record))
    results = tmp_path / "results"
    argv = [
        "board",
        str(sweep),
        "--results",
        str(results),
        "--started",
        str(time.time() - 125),
        "--jobs",
        "2",
    ]
    assert _publish(argv) == 0
    assert json.loads((results / "board" / "tuning.json").read_text()) == {"digits/board": tuned}
    stamp = json.loads((results / "board" / "stamp.json").read_text())
    assert 125 <= stamp["wall_s"] < 185 and stamp["jobs"] == 2 and stamp["cores"] == os.cpu_count()


def test_a_reproduction_stopped_and_called_again_is_timed_by_the_sittings_that_wrote_its_runs(
    sweeps, tmp_path
):
    sweep = shutil.copytree(sweeps["board"], tmp_path / "board")
    now = time.time()
    # A sitting whose runs were deleted since (nothing under the sweep is from then), one taken back after
    # 100 s of work (its last file), and the one that goes on now, 125 s in.
    stale, stopped, going_on = now - 5000, now - 1000, now - 125
    files = [path for path in sweep.rglob("*") if path.is_file()]
    for path in files:
        os.utime(path, (going_on + 5, going_on + 5))
    os.utime(files[0], (stopped + 100, stopped + 100))
    results = tmp_path / "results"
    starts = [str(t) for t in (going_on, stale, stopped)]
    argv = ["board", str(sweep), "--results", str(results), "--started", *starts, "--jobs", "2"]
    assert _publish(argv) == 0
    stamp = json.loads((results / "board" / "stamp.json").read_text())
    assert 225 <= stamp["wall_s"] < 285 and stamp["sittings"] == 2


@pytest.mark.parametrize("folder", sorted(p.parent for p in (ROOT / "results").glob("*/runs.csv*")))
def test_the_committed_results_are_what_their_runs_csv_gives(folder, tmp_path):
    draw_verdicts(runs_of(read_runs(folder)), tmp_path)
    committed = [name for name in DRAWN if (folder / name).is_file()]
    assert committed
    for name in committed:
        assert filecmp.cmp(folder / name, tmp_path / name, shallow=False), f"{folder.name}/{name}"


def test_against_the_board_gives_the_verdicts_of_one_sweep_of_every_method(sweeps, published, tmp_path):
    together = write_report([sweeps["board"], sweeps["mine_as_board"]], tmp_path / "reports", name="all")
    found = write_against([sweeps["mine"]], published, tmp_path / "reports", name="against")
    for name in DRAWN:
        assert filecmp.cmp(together.directory / name, found.directory / name, shallow=False), name
    # The new method beside its baseline and the reference, adjusted over the reproduction's family.
    rows = list(csv.DictReader((found.directory / "comparisons.csv").open()))
    mine = [(r["method"], r["baseline"]) for r in rows if r["method"] == "Marginal + random semi-hard"]
    assert mine == [
        ("Marginal + random semi-hard", "Triplet + random semi-hard"),
        ("Marginal + random semi-hard", "kNN filter + triplet"),
    ]
    # Against each committed method: the same comparisons as from the folders of one sweep.
    groups = group_runs(collect([sweeps["board"], sweeps["mine_as_board"]]))
    comparisons.write_csv(board_comparisons(groups, {NEW}), tmp_path / "board.csv")
    assert filecmp.cmp(tmp_path / "board.csv", found.directory / "board.csv", shallow=False)
    board_rows = list(csv.DictReader((found.directory / "board.csv").open()))
    assert sorted(r["baseline"] for r in board_rows) == [
        "Triplet + fixed semi-hard",
        "Triplet + random semi-hard",
        "kNN filter + triplet",
    ]
    assert {r["n_comparisons"] for r in board_rows} == {"3"}
    ranks = list(csv.DictReader((found.directory / "ranks.csv").open()))
    assert len(ranks) == 4 and sorted(r["rank"] for r in ranks) == ["1", "2", "3", "4"]
    ((path, _),) = found.figures
    assert path.name == "digits_critical_difference.png" and path.stat().st_size > 10_000
    assert path.with_suffix(".svg").is_file()


def test_the_command_prints_where_the_new_method_ranks(sweeps, published, tmp_path, capsys):
    argv = [str(sweeps["mine"]), "--against", str(published), "--out", str(tmp_path), "--no-wandb"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "digits, uniform noise at 0.5: Marginal + random semi-hard ranks " in out
    assert "of 4 (mean test Recall@1" in out
    assert "Marginal + random semi-hard vs Triplet + fixed semi-hard: " in out
    assert "warning" not in out


def _edited(published: Path, folder: Path, change) -> Path:
    """A copy of the published board with ``change`` applied to each row."""
    folder.mkdir()
    rows = [change(dict(row)) for row in read_runs(published)]
    write_runs(rows, folder)
    return folder


def test_other_noisy_labels_are_refused_in_one_line(sweeps, published, tmp_path, capsys):
    def relabel(row):
        if row["seed"] == "1":
            row["label_hash"] = "0123456789abcdef"
        return row

    board = _edited(published, tmp_path / "board", relabel)
    argv = [str(sweeps["mine"]), "--against", str(board), "--out", str(tmp_path / "out"), "--no-wandb"]
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    message = str(stopped.value.code)
    assert "\n" not in message
    assert message.startswith(
        "noisydml-report: noise=uniform noise.rate=0.5 seed=1 of experiment=noisy_dml/digits_symmetric: the "
        "noisy labels differ from the board's (label_hash "
    )
    assert "0123456789abcdef on the board" in message and "other noise code" in message


def test_another_numerics_mode_is_said(sweeps, published, tmp_path, capsys):
    board = _edited(published, tmp_path / "board", lambda row: {**row, "numerics": "native"})
    argv = [str(sweeps["mine"]), "--against", str(board), "--out", str(tmp_path / "out"), "--no-wandb"]
    assert main(argv) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 3
    assert warnings[0].startswith("warning: noise=uniform noise.rate=0.5 seed=0: numerics=avx2 at ")
    assert "numerics=native at " in warnings[0]


def test_a_method_already_on_the_board_is_refused(sweeps, published, tmp_path):
    argv = [str(sweeps["board"]), "--against", str(published), "--out", str(tmp_path), "--no-wandb"]
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert "is already on the board" in str(stopped.value.code)


def _replay(row: dict[str, str], folder: Path) -> dict[str, str]:
    """The row's run again, from its overrides, in the row's numerics mode: its row."""
    overrides = [o for o in json.loads(row["overrides"]) if not o.startswith("numerics=")]
    command = [sys.executable, "-c", "from noisydml.run.cli import main; main()", *overrides]
    command += [f"numerics={row['numerics']}", f"hydra.run.dir={folder}"]
    done = subprocess.run(command, env=checkout_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    (again,) = rows_from_folders([folder])
    return again


def _one_per_family(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """A run of each method family (the paper of ``method=``; the loss, for runs of no method) at its first
    experiment, setting and seed."""
    chosen: dict[str, dict[str, str]] = {}
    for row in sorted(rows, key=lambda r: (r["experiment"], r["noise"], r["noise_rate"], r["seed"])):
        family = row["method"].split("/")[0] or str(json.loads(row["choices"]).get("loss"))
        chosen.setdefault(family, row)
    return list(chosen.values())


def _assert_replayed(row: dict[str, str], again: dict[str, str]) -> None:
    where = f"{row['method']} seed={row['seed']} {row['noise']} {row['noise_rate']}"
    assert (again["split_hash"], again["label_hash"]) == (row["split_hash"], row["label_hash"]), where
    metrics = [k for k in row if "/" in k and row[k]]
    assert metrics, where
    assert {k: again.get(k) for k in metrics} == {k: row[k] for k in metrics}, where


@pytest.mark.slow
def test_a_run_of_each_family_replays_to_the_last_digit(published, tmp_path):
    rows = read_runs(published)
    chosen = _one_per_family(rows)
    assert {row["method"].split("/")[0] for row in chosen} == {"le2019", "reference"}
    for i, row in enumerate(chosen):
        _assert_replayed(row, _replay(row, tmp_path / f"run{i}"))


@pytest.mark.slow
@pytest.mark.parametrize("folder", sorted(p.parent for p in (ROOT / "results").glob("*/runs.csv*")))
def test_the_committed_board_replays_to_the_last_digit(folder, tmp_path):
    """Every family's first run replays at this commit, but for the runs its stamp says a later commit
    changed on purpose (``changed_since``: their noise models, the commit and why; the README says so)."""
    stamp = json.loads((folder / "stamp.json").read_text())
    changed = {noise for change in stamp.get("changed_since", []) for noise in change["noise"]}
    rows = [row for row in read_runs(folder) if row["noise"] not in changed]
    assert rows, f"{folder.name}: every run has changed since; re-run the reproduction"
    for i, row in enumerate(_one_per_family(rows)):
        _assert_replayed(row, _replay(row, tmp_path / f"run{i}"))


PAGE = ROOT / "docs" / "board.md"
# The page's runs at the board fixture's size (tests/sweeps.py's BOARD: an epoch of 3 batches, 3 seeds).
SMALL = [
    "seed=0,1,2",
    "trainer.max_epochs=1",
    "data.batches_per_epoch=3",
    "trainer.enable_progress_bar=false",
]
COMMANDS = {
    "noisydml": [sys.executable, "-c", "from noisydml.run.cli import main; main()"],
    "noisydml-report": [
        sys.executable,
        "-c",
        "import sys; from noisydml.report.cli import main; sys.exit(main())",
    ],
}


def _page_files():
    """scripts/docs/page_files.py, which writes the files a docs page shows."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("page_files", ROOT / "scripts" / "docs" / "page_files.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands(block: str, here: Path) -> list[list[str]]:
    import shlex

    lines = block.replace("\\\n", " ").replace("$PWD", str(here)).splitlines()
    return [shlex.split(line) for line in lines if line.split(" ", 1)[0] in COMMANDS]


def test_the_board_page_runs_at_a_small_size(published, tmp_path):
    """docs/board.md as a user follows it: its loss and configs written where it says, its one-setting
    commands run (at the fixture's size) and compared with a board, whose files it names."""
    page = _page_files()
    page.write_files(PAGE, tmp_path)
    assert (tmp_path / "mylab_losses.py").is_file() and (
        tmp_path / "myconf/method/mylab/soft_triplet.yaml"
    ).is_file()
    bash = [text for language, text in page.blocks(PAGE) if language == "bash"]
    one_setting = next(block for block in bash if "--against" in block and "for noise" not in block)
    env = {**checkout_env(), "PYTHONPATH": f"{tmp_path}{os.pathsep}{checkout_env()['PYTHONPATH']}"}
    run, report = _commands(one_setting, tmp_path)
    assert run[0] == "noisydml" and report[0] == "noisydml-report"

    def page_command(command: list[str]) -> subprocess.CompletedProcess:
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    page_command([*COMMANDS["noisydml"], *run[1:], *SMALL])
    board_name = report[report.index("--against") + 1]
    assert board_name == "noisy_dml_cpu"
    report[report.index("--against") + 1] = str(published)
    done = page_command([*COMMANDS["noisydml-report"], *report[1:], "--no-wandb"])
    assert "Soft triplet ranks " in done.stdout
    out = tmp_path / "outputs" / "reports" / "mylab_symmetric"
    for name in ("board.csv", "comparisons.csv", "against.md", "figures/digits_critical_difference.png"):
        assert (out / name).is_file(), name
    mine = {(r["method"], r["baseline"]) for r in csv.DictReader((out / "comparisons.csv").open())}
    assert ("Soft triplet", "Triplet + random semi-hard") in mine and (
        "Soft triplet",
        "kNN filter + triplet",
    ) in mine
    # Step 5's sweeps are the committed board's experiments.
    whole = next(block for block in bash if "for noise" in block)
    experiments = {
        f"noisy_dml/digits_{noise}" for noise in whole.split("for noise in ", 1)[1].split(";")[0].split()
    }
    assert experiments == set(json.loads((ROOT / "results" / board_name / "stamp.json").read_text())["seeds"])


def test_a_board_is_named_from_the_installed_package(tmp_path, monkeypatch):
    """``--against noisy_dml_cpu`` finds the package's committed board; a name that is none is refused with
    the boards there are."""
    import noisydml
    from noisydml.report.cli import board_folder

    (tmp_path / "noisy_dml_cpu").mkdir()
    (tmp_path / "noisy_dml_cpu" / "runs.csv").write_text("experiment\n")
    monkeypatch.setattr(noisydml, "RESULTS_DIR", tmp_path)
    assert board_folder("noisy_dml_cpu") == tmp_path / "noisy_dml_cpu"
    with pytest.raises(
        ValueError,
        match=r"--against noisy_dml_gpu is neither a folder nor a committed board; .*\(noisy_dml_cpu\)",
    ):
        board_folder("noisy_dml_gpu")
