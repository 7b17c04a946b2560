"""A run: build the parts of a composed config, fit, test, and write the run's results.

The command line is :mod:`noisydml.run.cli`, which imports this module only when a run starts. However a
run ends, its directory says how (:mod:`noisydml.utils.run_directory`): finished, failed (the error, and its
traceback in ``error.log``) or interrupted (with the command that continues it).
"""

from __future__ import annotations

import contextlib
import math
import pickle
import signal
import sys
import time
import traceback
from pathlib import Path

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from lightning_fabric.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pytorch_lightning.callbacks import Timer
from pytorch_lightning.loggers import CSVLogger
from pytorch_lightning.plugins.environments import SLURMEnvironment
from pytorch_lightning.utilities.exceptions import SIGTERMException

from noisydml.callbacks.checkpointing import ValidateLastEpoch, checkpoint_step
from noisydml.callbacks.divergence import DivergenceWarning
from noisydml.callbacks.progress import EpochLine, progress_bar, wants_progress_bar
from noisydml.callbacks.requeue import RequeueAtStepEnd
from noisydml.loggers.resumable_csv import ResumableCSVLogger, keep_rows_before
from noisydml.loggers.resumable_wandb import ResumableWandbLogger
from noisydml.loggers.run_fields import logged_config, summary_fields
from noisydml.loggers.wandb_mode import finish_wandb
from noisydml.numerics import numerics_record
from noisydml.run.checks.data import check_callbacks
from noisydml.run.checks.folders import check_run_directory, check_run_folder, check_writers
from noisydml.run.checks.library import build, ctrl_c, failure_message
from noisydml.run.checks.walk import entries, given_overrides, group_choices
from noisydml.run.preflight import prepare
from noisydml.run.results import format_metrics, format_selection, versions
from noisydml.run.selection import result_status, test_selected, watched_callbacks
from noisydml.utils import resolvers  # noqa: F401  (registers the config's resolvers)
from noisydml.utils.atomic import atomic_write
from noisydml.utils.errors import BadInput, DiskFull, no_space
from noisydml.utils.metric_names import with_selected_names
from noisydml.utils.quiet import silence_known_noise
from noisydml.utils.run_directory import FAILED, INTERRUPTED, RUNNING, RunDir, now
from noisydml.utils.run_lock import run_lock

silence_known_noise()


def train(cfg: DictConfig) -> dict[str, float]:
    """Run one experiment described by a composed config; return its metrics (test and validation)."""
    run = RunDir(cfg.paths.output_dir)
    # Rank 0 holds the folder for the processes of its run. Nothing, not even the lock, is written into a
    # folder before it is known to lie in no other run's (a sweep's job, in its sweep's folder).
    if zero := rank_zero_only.rank == 0:
        multirun = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
        check_run_folder(run, Path(HydraConfig.get().sweep.dir) if multirun else None)
    with run_lock(run) if zero else contextlib.nullcontext():
        return _train_in(cfg, run)


def _train_in(cfg: DictConfig, run: RunDir) -> dict[str, float]:
    choices = group_choices()
    resolved = _resolve(cfg, run, choices)
    # Nothing is written into the directory before it is known to hold no other run.
    if (done := check_run_directory(run, resolved, cfg.resume)) is not None:
        print(f"{run.path} is already complete; skipping (delete its results.json to run it again)")
        return with_selected_names(done["metrics"])
    record = {
        "started_at": now(),
        "config": resolved,
        "choices": choices,
        "report": resolved.get("report"),
        "seed": cfg.seed,
        "numerics": numerics_record(),
    }
    # The record of the run's last session (an interrupted run's, with the command that continues it).
    earlier = run.read_results() if rank_zero_only.rank == 0 else None
    if rank_zero_only.rank == 0:
        _start(cfg, run, record)
    requeue = RequeueAtStepEnd()
    try:
        return _train(cfg, run, resolved, record, requeue)
    except SIGTERMException as stop:
        # SIGTERM: preemption, scancel, a time limit. Lightning's exception exits 0, which a scheduler or a
        # script takes for a finished job: exit as a process killed by SIGTERM does, or as submitit exits
        # after requeueing the job, so that the requeued job runs.
        _record_end(run, record, INTERRUPTED, stop, requeue.message(), requeued=requeue.exit is not None)
        raise (requeue.exit or SystemExit(128 + signal.SIGTERM)) from stop
    except (KeyboardInterrupt, SystemExit) as stop:
        _record_end(run, record, INTERRUPTED, stop)
        if ctrl_c(stop):
            # Lightning turns Ctrl-C into exit status 1; a process stopped by SIGINT exits 130.
            raise SystemExit(128 + signal.SIGINT) from stop
        raise
    except Exception as error:
        if isinstance(error, BadInput) and earlier is not None:
            # A refusal before the first step computed nothing: the run stays as its last session left it.
            run.write_results(**earlier)
            raise
        _record_end(run, record, FAILED, error)
        if (full := no_space(error)) is not None:
            raise DiskFull(full.errno, _no_space_message(full, run)) from error
        raise


def _no_space_message(error: OSError, run: RunDir) -> str:
    # A checkpoint's error names its file in its message; another write's in its filename.
    what = str(error.strerror)
    if not what.startswith("no space left"):
        what = f"no space left to write {error.filename or run.path} ({what})"
    return f"{what}; free space, then continue the run with: {run.resume_command()}"


def _resolve(cfg: DictConfig, run: RunDir, choices: dict[str, str]) -> dict:
    """The config with every interpolation resolved; one that points at a key this config lacks (e.g.
    ``noise=from_file``'s ``${dataset.root}`` with a data set that has no folder) is refused, naming both,
    and so is a mandatory value left unset (``???``, e.g. ``noise=from_file``'s ``path``)."""
    try:
        resolved = OmegaConf.to_container(cfg, resolve=True)
        missing = sorted(OmegaConf.missing_keys(cfg))
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None) or "?"
        reason = str(error).splitlines()[0]
        bad = BadInput(
            f"{key}{_option(key, choices)} cannot be resolved: {reason}; choose options that go together "
            f"(e.g. a dataset= that has the key) or set {key}=... yourself"
        )
    else:
        if not missing:
            return resolved
        key, others = missing[0], f" (and {', '.join(missing[1:])})" if missing[1:] else ""
        bad = BadInput(
            f"{key}{_option(key, choices)} is mandatory and has no value (??? in its config){others}; "
            f"set it, e.g. {key}=..."
        )
    if rank_zero_only.rank == 0 and run.read_results() is None:
        _record_end(run, {"choices": choices}, FAILED, bad)
    # The message holds the library's reason: Hydra would print its error again under it.
    raise bad from None


def _option(key: str, choices: dict[str, str]) -> str:
    group = key.split(".")[0]
    return f" ({group}={choices[group]})" if group in choices else ""


def _start(cfg: DictConfig, run: RunDir, record: dict) -> None:
    """Hydra's record of the run (``.hydra/``), and ``results.json`` saying it is running and how to
    continue it, so that a run killed outright is seen as such; a run started over drops what the run
    before it computed: its checkpoints, which ``resume=auto`` would otherwise continue, and its files."""
    if cfg.resume == "never":
        run.drop_products()
    if HydraConfig.initialized():
        hydra = HydraConfig.get()
        files = {
            run.config: cfg,
            run.hydra_config: OmegaConf.create({"hydra": hydra}),
            run.overrides: hydra.overrides.task,
        }
        for path, config in files.items():
            with atomic_write(path) as f:
                f.write(OmegaConf.to_yaml(config))
    resume = run.resume_command()
    run.write_results(RUNNING, resume=resume, **record, versions=versions())
    # An evaluation trains nothing to continue: stopped, it is run again. A search's trial is continued by
    # its search, run again, which alone sees every trial.
    sweeper = HydraConfig.get().sweeper if HydraConfig.initialized() else {}
    if cfg.get("ckpt_path"):
        again = ""
    elif "direction" in (sweeper or {}):
        again = " (a trial of a search: if it stops, run the search's command again)"
    else:
        again = f" (if it stops, continue it with: {resume})"
    print(f"run directory: {run.path.resolve()}{again}", flush=True)


def _train(
    cfg: DictConfig, run: RunDir, resolved: dict, record: dict, requeue: RequeueAtStepEnd
) -> dict[str, float]:
    started = time.perf_counter()
    try:
        checkpoint, datamodule, model, trainer = _build(cfg, run, resolved, record["choices"], requeue)
    except Exception as error:
        finish_wandb()
        if isinstance(error, BadInput):
            raise
        # Anything that stops a run before its first step is the input's: one line, the traceback in
        # error.log (HYDRA_FULL_ERROR=1 prints it too).
        raise BadInput(failure_message(error)) from error
    try:
        if checkpoint is not None:
            print(f"resuming from {checkpoint}")
        if (left := datamodule.sampler.left_out)[0] and not cfg.get("ckpt_path"):
            print(
                f"{left[0]} of the training split's classes ({left[1]} samples) are never drawn: fewer than "
                f"data.K={datamodule.K} samples with data.small_classes={datamodule.small_classes}, or one"
            )
        if cfg.get("ckpt_path"):
            # noisydml-eval: the checkpoint's weights, scored as they are.
            load_weights(model, cfg.ckpt_path)
            print(f"evaluating {cfg.ckpt_path}")
        elif model.has_parameters_to_train():
            trainer.fit(model, datamodule=datamodule, ckpt_path=checkpoint, weights_only=True)
        else:
            # BDML's PCA baseline (backbone=identity): the inputs themselves are evaluated.
            print(f"nothing to train in backbone {type(model.backbone).__name__}: evaluating it as it is")
        metrics, selection = test_selected(trainer, model, datamodule, cfg.optimized_metric)
        noise = datamodule.noise_summary()
        trained = not cfg.get("ckpt_path") and model.has_parameters_to_train()
        status, reason = result_status(
            cfg,
            record["choices"],
            datamodule,
            selection,
            trained,
            _stopped_by_clock(trainer),
            _diverged(trainer),
        )
        _log_summary(trainer, summary_fields(status, selection, noise, time.perf_counter() - started))
    except BaseException as error:
        stopped = isinstance(error, (SIGTERMException, KeyboardInterrupt, SystemExit))
        ended = INTERRUPTED if stopped else FAILED
        _log_summary(trainer, summary_fields(ended, wall_time_s=time.perf_counter() - started))
        raise
    finally:
        finish_wandb()

    if not trainer.is_global_zero:
        return metrics
    datamodule.write_labels(run.labels, run.unlabeled, run.validation, run.filtered)
    model.hooks.save(run.path)
    results = run.write_results(
        status,
        **({"reason": reason} if reason else {}),
        metrics=metrics,
        selection=selection,
        noise=noise,
        validation=datamodule.validation_summary(),
        skipped_inputs=datamodule.skipped_inputs,
        # How many processes trained (trainer.devices=auto, num_nodes): the global batch is P x K x that.
        processes=trainer.world_size,
        metrics_engine=model.metrics.engine_record(),
        **record,
        versions=versions(),
        wall_time_s=round(time.perf_counter() - started, 3),
    )
    # previous.ckpt is the fallback for a damaged last.ckpt, i.e. for a resume; a finished run is never
    # resumed (it is skipped), so it goes. last.ckpt, to train on, and best.ckpt, what was tested, stay.
    run.previous_checkpoint.unlink(missing_ok=True)
    print(f"\n{format_metrics(model.test_metrics)}\n")
    if (selected := format_selection(selection)) is not None:
        print(selected)
    print(f"run directory: {run.path.resolve()}\nresults: {results}")
    if reason:
        print(f"recorded as {status}, not finished: {reason}")
    return metrics


def _diverged(trainer) -> str | None:
    """What the divergence watch said, where the trained weights blew up."""
    return next((c.message for c in trainer.callbacks if isinstance(c, DivergenceWarning)), None)


def _stopped_by_clock(trainer) -> int | None:
    """The whole epochs trained, where ``trainer.max_time`` ended training before ``trainer.max_epochs``
    did (a run with no epoch limit ends by its clock as configured). Lightning counts an epoch the clock
    cut short as completed, the last one included: its batches say it was not."""
    timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
    remaining = timer.time_remaining("train") if timer is not None else None
    if remaining is None or remaining > 0 or trainer.max_epochs in (None, -1):
        return None
    # The batches of every session of the run (restored from its checkpoint on a resume) in whole epochs:
    # a run continued with no time left trains none, and still has those it trained.
    batches, per_epoch = (
        trainer.fit_loop.epoch_loop.batch_progress.total.completed,
        trainer.num_training_batches,
    )
    finite = per_epoch and math.isfinite(per_epoch)
    epochs = int(batches // per_epoch) if finite else trainer.current_epoch
    return epochs if epochs < trainer.max_epochs else None


def load_weights(model: torch.nn.Module, path: str) -> None:
    """A checkpoint's weights into ``model``, refused in one line when they are not the model's."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, pickle.UnpicklingError) as error:
        reason = str(error).splitlines()[0]
        if reason.startswith("Weights only load failed"):
            # torch's advice, to load it with weights_only=False, would run whatever the file holds.
            reason = "it is no file of tensors torch.save wrote"
        raise BadInput(
            f"ckpt_path={path} is not a checkpoint torch can read ({reason}); give a checkpoint a run wrote "
            "(checkpoints/*.ckpt)"
        ) from error
    try:
        model.load_state_dict(state["state_dict"])
    except (KeyError, TypeError, RuntimeError) as error:
        # torch's first line names only the model: the first mismatch it lists is the reason.
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = next((line for line in lines[1:] if "mismatch" in line or "key" in line), lines[0])
        given = ", ".join(_given_beside(Path(path))) or "a data set of another input size, another backbone"
        raise BadInput(
            f"ckpt_path={path} cannot be loaded into this run's model ({reason}); an override given beside "
            f"it builds another model ({given}): drop it, or give the overrides the checkpoint was trained "
            "with (a checkpoint in a run folder brings them)"
        ) from error


def _given_beside(checkpoint: Path) -> list[str]:
    """The overrides of this evaluation that its checkpoint's run did not train with."""
    stored = RunDir(checkpoint.parent.parent).overrides
    if not HydraConfig.initialized() or not stored.is_file():
        return []
    trained = set(OmegaConf.load(stored))
    own = ("ckpt_path=", "resume=", "hydra.")
    return [o for o in given_overrides() if o not in trained and not o.startswith(own)]


def _build(
    cfg: DictConfig, run: RunDir, resolved: dict, choices: dict[str, str], requeue: RequeueAtStepEnd
) -> tuple:
    """The checkpoint to continue from, the data, the model and the trainer with its loggers and callbacks."""
    checkpoint, datamodule, model = prepare(cfg, run, resolved, choices)
    history = []
    if rank_zero_only.rank == 0:
        # The history of a resumed run continues after its checkpoint; a run started over has none.
        history = keep_rows_before(run.metrics_csv, checkpoint_step(checkpoint))
    # A resumed run continues its W&B run (WandbLogger resumes an id it is given).
    wandb_id = {"id": run.wandb_id()} if checkpoint is not None and run.wandb_id() else {}
    chosen = {key: node for key, node in entries(cfg, "logger") if node is not None}
    loggers = [build(key, node, **(wandb_id if "id" in node else {})) for key, node in chosen.items()]
    given = {key: node for key, node in entries(cfg, "callbacks") if node is not None}
    callbacks = [build(key, node) for key, node in given.items()]
    # Before a logger writes anything (TensorBoard's hyperparameters are written at once).
    nodes = {**chosen, **given}
    check_writers(
        {key: (built, nodes[key]) for key, built in zip(nodes, [*loggers, *callbacks], strict=True)}, run.path
    )
    check_callbacks(dict(zip(given, callbacks, strict=True)), datamodule)
    if not any(isinstance(logger, CSVLogger) for logger in loggers):
        # Every run writes its history whatever its loggers: noisydml-dashboard and the report read it.
        loggers.append(ResumableCSVLogger(save_dir=run.path, name=run.csv_dir.name, version=""))
    for logger in loggers:
        logger.log_hyperparams(logged_config(resolved, choices))
        if isinstance(logger, ResumableWandbLogger):
            # What W&B lost of the run before its checkpoint (a kill cuts its buffered steps), from the CSV.
            logger.log_rows(history)
    callbacks = [
        *watched_callbacks(callbacks, datamodule.validation_stages),
        ValidateLastEpoch(),
        DivergenceWarning(),
        requeue,
    ]
    bar = wants_progress_bar(cfg.trainer.enable_progress_bar)
    callbacks.append(progress_bar() if bar else EpochLine())
    plugins = [instantiate(plugin) for plugin in cfg.trainer.get("plugins") or []]
    if SLURMEnvironment.detect():
        # submitit owns requeueing on SLURM; Lightning's own would write a second, mid-step checkpoint
        # that trainer.test() then silently loads.
        plugins.append(SLURMEnvironment(auto_requeue=False))
    # Plain containers: Lightning reads a mapping (trainer.max_time={hours: 1}) as a dict only.
    trainer = instantiate(
        cfg.trainer,
        logger=loggers,
        callbacks=callbacks,
        plugins=plugins,
        enable_progress_bar=bar,
        _convert_="partial",
    )
    return checkpoint, datamodule, model, trainer


def _record_end(
    run: RunDir,
    record: dict,
    status: str,
    error: BaseException,
    message: str | None = None,
    requeued: bool = False,
) -> None:
    """``results.json`` of a run that did not finish, its traceback in ``error.log``; for an interrupted
    run, the command that continues it (a requeued job runs it by itself)."""
    if rank_zero_only.rank != 0:
        return
    resume = run.resume_command()
    fields = {"error": message or failure_message(error), "error_type": type(error).__name__}
    try:
        fields["traceback"] = run.write_traceback(traceback.format_exc()).name
        if status == INTERRUPTED:
            fields["resume"] = resume
        run.write_results(status, **fields, **record, versions=versions())
    except OSError as unwritable:
        if no_space(error) is not None:
            # The one line about the full disk says it all.
            return
        # The run directory itself is the problem (full, read-only): the error still reaches the user.
        print(f"could not record the run's end in {run.path}: {unwritable}", file=sys.stderr)
        return
    if status == INTERRUPTED:
        then = "the requeued job continues it; by hand" if requeued else "continue it with"
        print(
            f"\ninterrupted ({fields['error']}); the run is in {run.path.resolve()}\n{then}:\n  {resume}",
            file=sys.stderr,
            flush=True,
        )


def _log_summary(trainer, fields: dict) -> None:
    """The run's summary fields to the loggers that keep a summary (W&B's run summary)."""
    for logger in trainer.loggers:
        if hasattr(logger, "log_summary"):
            logger.log_summary(fields)
