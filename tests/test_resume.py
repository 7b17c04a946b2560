"""Faults never cost results: checkpoints, resume after SIGTERM, finished jobs skipped, not overwritten."""

from __future__ import annotations

import csv
import json
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from noisydml.callbacks.checkpointing import AtomicCheckpointIO
from noisydml.run.train import train
from noisydml.utils.errors import BadInput
from wandb_records import records

# Two epochs of five batches; the fault lands in the middle of the second epoch.
RUN = ["trainer.max_epochs=2", "data.batches_per_epoch=5", "trainer.check_val_every_n_epoch=1"]
KILL = [
    "+callbacks.fault._target_=noisydml.testing.faults.KillAt",
    "+callbacks.fault.step=7",
    "+callbacks.fault.signal=SIGTERM",
]


@pytest.mark.slow
def test_a_run_stopped_by_sigterm_resumes_to_the_same_metrics(compose_config, tmp_path):
    uninterrupted = train(compose_config(*RUN, run="uninterrupted"))

    interrupted = compose_config(*RUN, *KILL)
    run_dir = Path(interrupted.paths.output_dir)
    with pytest.raises(SystemExit, match=str(128 + signal.SIGTERM)):
        train(interrupted)
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    assert json.loads((run_dir / "results.json").read_text())["status"] == "interrupted"

    resumed = compose_config(*RUN)
    assert resumed.paths.output_dir == str(run_dir)
    assert (run_dir / "checkpoints" / "previous.ckpt").is_file()
    assert train(resumed) == uninterrupted
    # Finished: the fallback for a damaged last.ckpt is gone, what was trained and tested stays.
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    logged = (run_dir / "csv" / "metrics.csv").read_text()
    assert "test/recall@1" in logged
    assert json.loads((run_dir / "results.json").read_text())["status"] == "finished"


def test_a_step_interval_adds_resume_points_and_keeps_the_one_at_each_epochs_end(compose_config, monkeypatch):
    # every_n_epochs=1 stays true beside every_n_train_steps: a step interval longer than the run used to
    # leave it without any last.ckpt while its record said every epoch.
    steps = []
    save = AtomicCheckpointIO.save_checkpoint

    def saves(self, checkpoint, path, storage_options=None):
        if Path(path).name == "last.ckpt":
            steps.append(checkpoint["global_step"])
        save(self, checkpoint, path, storage_options)

    monkeypatch.setattr(AtomicCheckpointIO, "save_checkpoint", saves)
    train(compose_config(*RUN, "callbacks.checkpoint.every_n_train_steps=3"))
    assert steps == [3, 5, 6, 9, 10]
    # An interval longer than the run saves nothing of its own: read by nothing, it is refused.
    with pytest.raises(BadInput, match=r"every_n_train_steps=1000 saves every that many steps, but the run "):
        train(compose_config(*RUN, "callbacks.checkpoint.every_n_train_steps=1000", run="long"))


@pytest.mark.slow
def test_a_corrupt_checkpoint_is_named_with_the_fix_and_the_previous_one_resumes(compose_config):
    uninterrupted = train(compose_config(*RUN, run="uninterrupted"))
    interrupted = compose_config(*RUN, *KILL)
    with pytest.raises(SystemExit, match=str(128 + signal.SIGTERM)):
        train(interrupted)
    last = Path(interrupted.paths.output_dir) / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:1000])  # a copy cut short

    fixes = r"resume=.* resume_from=previous; or start this run over: noisydml resume=.* resume=never"
    with pytest.raises(BadInput, match=rf"{last} cannot be read, it is truncated or corrupt .*{fixes}"):
        train(compose_config(*RUN))
    # The checkpoint of the end of the first epoch: the run continues from there to the same metrics.
    assert train(compose_config(*RUN, "resume_from=previous")) == uninterrupted


@pytest.mark.slow
def test_a_run_folder_copied_elsewhere_continues_and_is_skipped_once_finished(compose_config, capsys):
    # Its record holds paths into its folder (trainer.default_root_dir): the copy was another config.
    interrupted = compose_config(*RUN, *KILL)
    with pytest.raises(SystemExit, match=str(128 + signal.SIGTERM)):
        train(interrupted)
    shutil.copytree(interrupted.paths.output_dir, Path(interrupted.paths.output_dir).with_name("copy"))
    finished = train(compose_config(*RUN, run="copy"))
    assert "resuming from" in capsys.readouterr().out
    assert train(compose_config(*RUN, run="copy")) == finished
    assert "already complete; skipping" in capsys.readouterr().out


@pytest.mark.slow
def test_a_refused_continuation_leaves_the_interrupted_runs_record_as_it_was(compose_config):
    # resume_from=previous with no previous.ckpt: the refusal recorded the run failed, without its command.
    interrupted = compose_config(*RUN, *KILL)
    with pytest.raises(SystemExit, match=str(128 + signal.SIGTERM)):
        train(interrupted)
    run_dir = Path(interrupted.paths.output_dir)
    (run_dir / "checkpoints" / "previous.ckpt").unlink(missing_ok=True)
    record = (run_dir / "results.json").read_text()
    with pytest.raises(BadInput, match=r"resume_from=previous: .*previous.ckpt does not exist"):
        train(compose_config(*RUN, "resume_from=previous"))
    assert (run_dir / "results.json").read_text() == record
    assert json.loads(record)["status"] == "interrupted"


def test_a_finished_run_is_skipped_and_never_overwritten(compose_config, capsys):
    cfg = compose_config()
    first = train(cfg)
    results = Path(cfg.paths.output_dir) / "results.json"
    written = results.read_text()

    assert train(compose_config()) == first
    assert "already complete; skipping" in capsys.readouterr().out
    assert results.read_text() == written

    with pytest.raises(
        BadInput, match=r"holds a finished run of another config \(noise.rate: 0.2 there, 0.4 here\)"
    ):
        train(compose_config("noise.rate=0.4"))
    assert json.loads(results.read_text())["config"]["noise"]["rate"] == 0.2

    # A run finished before the project gained an option (its results lack the key) is still skipped.
    stored = json.loads(written)
    del stored["config"]["metrics"]["map_full"]
    results.write_text(json.dumps(stored))
    assert train(compose_config()) == first


NOISYDML = str(Path(sys.executable).with_name("noisydml"))
# Every step logged, so the CSV shows a lost or a repeated step; W&B offline, as a user's run.
CLI_RUN = [*RUN, "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false", "cpu_threads=1"]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"WANDB_MODE": "offline", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    # The source under test, where it is not the installed one.
    env.update({k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ})
    return subprocess.run(
        [NOISYDML, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        # Ctrl-C as in a terminal: a shell's background job (CI started with &) inherits SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def metrics_rows(run_dir: Path) -> list[dict]:
    with (run_dir / "csv" / "metrics.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def wandb_run_ids(run_dir: Path) -> set[str]:
    return {path.name.rsplit("-", 1)[-1] for path in (run_dir / "wandb").glob("offline-run-*")}


def wandb_history(run_dir: Path) -> dict[int, dict[str, float]]:
    """Every W&B value the run's offline folders hold, by W&B step; each step is in one folder only (a
    resumed run logs none of the steps the folders before it hold), and every folder after the first is
    marked resumed."""
    history: dict[int, dict[str, float]] = {}
    for n, path in enumerate(sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))):
        before = set(history)
        for record in records(path):
            if record.WhichOneof("record_type") == "run":
                assert record.run.resumed == (n > 0), f"{path}: resumed is {record.run.resumed}"
            if record.WhichOneof("record_type") != "history":
                continue
            row = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item}
            step = row.pop("_step")
            row = {k: v for k, v in row.items() if k not in ("_timestamp", "_runtime")}
            if "trainer/global_step" in row:
                assert row["trainer/global_step"] == step, "W&B's step is not the trainer's"
            assert step not in before, f"step {step} logged again in {path}"
            known = history.setdefault(step, {})
            assert all(known[k] == v for k, v in row.items() if k in known), f"step {step} logged twice"
            known.update(row)
    return history


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    whole = tmp_path_factory.mktemp("uninterrupted") / "run"
    assert cli(*CLI_RUN, f"hydra.run.dir={whole}", cwd=whole.parent).returncode == 0
    return whole


# A run that did not finish is not a success to a scheduler or a script: it exits as a process the signal
# killed does (a shell's 128 + the signal's number), and a SIGKILLed one is that process.
EXIT_STATUS = {"SIGTERM": 128 + signal.SIGTERM, "SIGINT": 128 + signal.SIGINT, "SIGKILL": -signal.SIGKILL}


@pytest.mark.slow
@pytest.mark.parametrize("kill", list(EXIT_STATUS))
def test_a_killed_run_continues_with_its_command_to_the_whole_history_of_an_uninterrupted_one(
    uninterrupted, tmp_path, kill
):
    """A preemption (SIGTERM), Ctrl-C (SIGINT) or a kill outright (SIGKILL: out of memory, a node failure)
    in the second epoch; the printed (SIGTERM, SIGINT) or recorded (all) command finishes the run with the
    metrics, the CSV rows and the one W&B run, every step once, of an uninterrupted run."""
    run_dir = tmp_path / "killed"
    fault = [*KILL[:2], f"+callbacks.fault.signal={kill}"]
    killed = cli(*CLI_RUN, *fault, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert killed.returncode == EXIT_STATUS[kill], killed.stderr
    recorded = json.loads((run_dir / "results.json").read_text())
    assert recorded["status"] == ("running" if kill == "SIGKILL" else "interrupted")
    assert recorded["resume"] == f"noisydml resume={run_dir}"
    if kill != "SIGKILL":
        assert recorded["error"] == (
            "Ctrl-C" if kill == "SIGINT" else "SIGTERM: preempted, cancelled or out of time"
        )
        printed = re.search(r"continue it with:\n\s+(noisydml .*)", killed.stderr).group(1)
        assert printed == recorded["resume"]

    # The fault is one of the run's overrides; a SIGKILL's run resumes before the step it fired at.
    resumed = cli(*recorded["resume"].split()[1:], "callbacks.fault=null", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from" in resumed.stdout
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] == "finished"
    assert results["metrics"] == json.loads((uninterrupted / "results.json").read_text())["metrics"]
    # Every step once, in order, with the values of the uninterrupted run.
    assert metrics_rows(run_dir) == metrics_rows(uninterrupted)
    assert len(wandb_run_ids(run_dir)) == 1 and len(list((run_dir / "wandb").glob("offline-run-*"))) == 2
    assert wandb_history(run_dir) == wandb_history(uninterrupted)


@pytest.mark.slow
@pytest.mark.parametrize("requeued", [True, False])
def test_a_job_submitit_requeues_stops_after_its_step_and_the_requeued_job_finishes_it(
    uninterrupted, tmp_path, requeued
):
    """submitit's own executor (hydra/launcher=submitit_local, the SLURM launcher's machinery on one machine)
    and its requeue signal in the second epoch: submitit requeues the job, the run stops after the step with
    last.ckpt and exits as submitit has it (status 144, on which its executor runs the job again); the
    requeued job continues from that step to the whole history of an uninterrupted run. A job timed out more
    often than hydra.launcher.max_num_timeout is not requeued: it is interrupted (exit 143) with its
    checkpoint and the reason, and the sweep fails."""
    sweep = tmp_path / "sweep"
    fault = [*KILL[:2], "+callbacks.fault.signal=SIGUSR2"]
    # Under 10 minutes submitit takes any signal for the time limit's, which here may come 0 times.
    limit = [] if requeued else ["hydra.launcher.timeout_min=10", "+hydra.launcher.max_num_timeout=0"]
    launcher = ["hydra/launcher=submitit_local", f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=job", *limit]
    swept = cli("--multirun", *launcher, *CLI_RUN, *fault, cwd=tmp_path)
    run_dir = sweep / "job"
    # The job's output, each time it ran: submitit's lines in .out, the run's stderr in .err.
    (err,) = sweep.glob(".submitit/*/*_0_log.err")
    stopped = err.with_suffix(".out").read_text() + err.read_text()
    results = json.loads((run_dir / "results.json").read_text())
    if requeued:
        assert swept.returncode == 0, swept.stderr
        # Once: the requeued job starts after the step the signal came at, so the fault does not fire again.
        assert "Requeued job" in stopped
        requeued_line = "interrupted (SIGUSR2: requeued by submitit (a time limit or a preemption))"
        assert stopped.count(requeued_line) == 1
        assert "resuming from" in stopped
        assert results["status"] == "finished"
        assert results["metrics"] == json.loads((uninterrupted / "results.json").read_text())["metrics"]
        assert metrics_rows(run_dir) == metrics_rows(uninterrupted)
        assert len(wandb_run_ids(run_dir)) == 1 and wandb_history(run_dir) == wandb_history(uninterrupted)
    else:
        assert swept.returncode != 0 and "Requeued job" not in stopped
        assert results["status"] == "interrupted" and results["resume"] == f"noisydml resume={run_dir}"
        assert results["error"] == (
            "SIGUSR2: a time limit or a preemption, not requeued "
            "(Job not requeued because: timed-out too many times.)"
        )
        last = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
        assert last["global_step"] == 7


def snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_resuming_a_finished_run_with_another_config_is_refused_and_touches_nothing(tmp_path):
    run_dir = tmp_path / "run"
    tiny = ["trainer.max_epochs=1", "data.batches_per_epoch=2", "logger=csv", "cpu_threads=1"]
    assert (
        cli(*tiny, "trainer.enable_progress_bar=false", f"hydra.run.dir={run_dir}", cwd=tmp_path).returncode
        == 0
    )
    before = snapshot(run_dir)

    changed = cli(f"resume={run_dir}", "backbone.embedding_size=64", cwd=tmp_path)
    assert changed.returncode == 1
    message = (
        f"{run_dir} holds a finished run of another config (backbone.embedding_size: 32 there, 64 here), "
        f"which is left as it is; run this config in another folder, e.g. hydra.run.dir={run_dir}-2"
    )
    assert message in changed.stderr and "Traceback" not in changed.stderr
    assert snapshot(run_dir) == before

    again = cli(f"resume={run_dir}", cwd=tmp_path)
    assert again.returncode == 0 and "already complete; skipping" in again.stdout
    assert snapshot(run_dir) == before


@pytest.mark.slow
def test_a_checkpoint_continues_only_the_config_that_wrote_it(compose_config, capsys):
    interrupted = compose_config(*RUN, *KILL)
    with pytest.raises(SystemExit):
        train(interrupted)
    run_dir = Path(interrupted.paths.output_dir)
    before = snapshot(run_dir)

    with pytest.raises(
        BadInput, match=r"holds a checkpoint of another config \(noise.rate: 0.2 there, 0.4 here\)"
    ):
        train(compose_config(*RUN, "noise.rate=0.4"))
    assert snapshot(run_dir) == before

    # Started over at 0.4: the 0.2 checkpoints go, nothing of them is continued.
    capsys.readouterr()
    train(compose_config(*RUN, "noise.rate=0.4", "resume=never"))
    assert "resuming from" not in capsys.readouterr().out
    assert json.loads((run_dir / "results.json").read_text())["config"]["noise"]["rate"] == 0.4


def test_a_run_started_over_keeps_nothing_the_run_before_it_computed(compose_config):
    """resume=never over a killed run that had selected an epoch: a run that selects none must not leave
    that run's best.ckpt, which would read as the weights it tested."""
    killed = compose_config(*RUN, *KILL, "data.val_fraction=0.2")
    with pytest.raises(SystemExit):
        train(killed)
    run_dir = Path(killed.paths.output_dir)
    assert (run_dir / "checkpoints" / "best.ckpt").is_file()
    # Without a validation split, nothing reads trainer.check_val_every_n_epoch (RUN's last key).
    train(compose_config(*RUN[:-1], "data.val_fraction=0", "resume=never"))
    assert not (run_dir / "checkpoints" / "best.ckpt").exists()
    assert json.loads((run_dir / "results.json").read_text())["config"]["data"]["val_fraction"] == 0


def test_a_checkpoint_that_does_not_fit_says_no_space_left_and_keeps_the_last_one(tmp_path):
    """A full disk, as a file-size limit: torch's own message would be "unexpected pos"."""
    last = tmp_path / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint({"weights": torch.zeros(10)}, last)
    kept = last.read_bytes()
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, limits[1]))
    try:
        with pytest.raises(
            OSError, match=rf"no space left to write {last} \(the disk is full, or a quota or"
        ):
            io.save_checkpoint({"weights": torch.zeros(1_000_000)}, last)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    assert last.read_bytes() == kept and [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


# One short epoch, CSV only: the faults below are about the run folder, not about training.
SHORT = [
    "trainer.max_epochs=1",
    "data.batches_per_epoch=3",
    "logger=csv",
    "trainer.enable_progress_bar=false",
]


def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.slow
def test_a_second_process_on_a_live_run_folder_is_refused_in_one_line_and_the_first_finishes(tmp_path):
    """Rule 7 of issue 37: the first run, stopped mid-epoch (SIGSTOP) with its folder locked; a second
    process on the folder, with the same config or another seed, is refused and touches nothing; the first
    then finishes alone (every CSV row once). A dead holder (SIGKILL) holds nothing: the resume tests above
    take a killed run's folder over."""
    run_dir = tmp_path / "run"
    pause = [KILL[0], "+callbacks.fault.step=2", "+callbacks.fault.signal=SIGSTOP"]
    args = [NOISYDML, *SHORT, "cpu_threads=1", *pause, f"hydra.run.dir={run_dir}"]
    env = {"WANDB_MODE": "offline", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    env.update({k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ})
    first = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not stopped(first.pid):
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read().decode()
            time.sleep(0.2)
        before = snapshot(run_dir)
        for other in ([], ["seed=1"]):
            second = cli(*SHORT, *pause, *other, f"hydra.run.dir={run_dir}", cwd=tmp_path)
            assert second.returncode == 1 and "Traceback" not in second.stderr
            holder = f"pid {first.pid} on {socket.gethostname()}: {' '.join(args)}"
            assert (
                f"{run_dir} is in use by another noisydml process ({holder}); two processes in one run "
                "folder overwrite each other's results: wait for it to end (or stop it), or run this one "
                "in another folder (hydra.run.dir=... or hydra.sweep.dir=...)"
            ) in second.stderr.splitlines()
            assert snapshot(run_dir) == before
    finally:
        os.kill(first.pid, signal.SIGCONT)
        out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err.decode()
    assert json.loads((run_dir / "results.json").read_text())["status"] == "finished"
    # Every row once (the test stages and the selected epoch's scores share the last step; no row twice).
    rows = [tuple(sorted(row.items())) for row in metrics_rows(run_dir)]
    assert rows and len(rows) == len(set(rows))
    # The lock goes with its holder.
    assert not (run_dir / ".lock").exists()


@pytest.mark.slow
def test_a_write_killed_halfway_leaves_no_temporary_file_after_the_resume(compose_config):
    """A kill during an atomic write (a checkpoint, results.json) leaves its temporary file; the run that
    takes the folder over next removes it."""
    interrupted = compose_config(*RUN, *KILL)
    with pytest.raises(SystemExit):
        train(interrupted)
    run_dir = Path(interrupted.paths.output_dir)
    left = [run_dir / "checkpoints" / ".last.ckpt.x1y2z3.tmp", run_dir / ".results.json.a1b2c3.tmp"]
    for path in left:
        path.write_bytes(b"")
    train(compose_config(*RUN))
    assert json.loads((run_dir / "results.json").read_text())["status"] == "finished"
    assert [p for p in run_dir.rglob("*.tmp")] == []


@pytest.mark.slow
def test_a_full_disk_is_one_line_with_the_command_that_continues_the_run(tmp_path):
    """No space for last.ckpt, as a file-size limit that best.ckpt (1.3 MB) fits and last.ckpt (3.8 MB,
    with Adam's state) does not: one line naming the file and the fix, no traceback."""
    run_dir = tmp_path / "run"

    def limit() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, resource.RLIM_INFINITY))

    env = {"WANDB_MODE": "offline", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    env.update({k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ})
    full = subprocess.run(
        [NOISYDML, *SHORT, "cpu_threads=1", f"hydra.run.dir={run_dir}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        preexec_fn=limit,
    )
    assert full.returncode == 1
    assert "Traceback" not in full.stderr and "During handling" not in full.stderr
    last = run_dir / "checkpoints" / "last.ckpt"
    assert (
        f"no space left to write {last} (the disk is full, or a quota or file-size limit is reached); "
        f"free space, then continue the run with: noisydml resume={run_dir}"
    ) in full.stderr.splitlines()
    recorded = json.loads((run_dir / "results.json").read_text())
    assert recorded["status"] == "failed" and "no space left" in recorded["error"]
    assert list(run_dir.rglob("*.tmp")) == []


@pytest.mark.slow
def test_an_interrupted_sweep_says_what_ran_and_its_printed_command_continues_it(tmp_path):
    """Ctrl-C in the second of three jobs: the sweep says job 0 finished, job 1 was interrupted, job 2
    never started, and prints one command; that command skips job 0, resumes job 1 and runs job 2."""
    fault = [KILL[0], "+callbacks.fault.step=4", "+callbacks.fault.signal=SIGINT", "+callbacks.fault.job=1"]
    two_epochs = ["trainer.max_epochs=2", *SHORT[1:], "cpu_threads=1"]
    sweep = [*two_epochs, *fault, "seed=0,1,2", "hydra.sweep.subdir=${hydra.job.num}"]
    stopped_sweep = cli("-m", *sweep, cwd=tmp_path)
    assert stopped_sweep.returncode == 128 + signal.SIGINT, stopped_sweep.stderr
    (folder,) = (tmp_path / "outputs" / "sweeps" / "default").iterdir()
    shown = " ".join([*two_epochs, *fault]).replace("=false", "=False")
    jobs = [f"job {n} ({shown} seed={n})" for n in range(3)]
    said = stopped_sweep.stderr[stopped_sweep.stderr.index(f"the sweep in {folder}") :].splitlines()
    assert said[1:4] == [f"  finished: {jobs[0]}", f"  interrupted: {jobs[1]}", f"  never started: {jobs[2]}"]
    assert said[4] == "continue it (finished jobs are skipped, an interrupted one resumes) with:"
    command = shlex.split(said[5])
    assert command == ["noisydml", "-m", *sweep, f"hydra.sweep.dir={folder}"]

    continued = cli(*command[1:], cwd=tmp_path)
    assert continued.returncode == 0, continued.stderr
    assert continued.stdout.count("already complete; skipping") == 1
    assert continued.stdout.count("resuming from") == 1
    runs = sorted(p.parent for p in folder.glob("*/results.json"))
    assert len(runs) == 3
    assert all(json.loads((run / "results.json").read_text())["status"] == "finished" for run in runs)
