"""What only building the parts can say, asked before the data are read: each part built as the run builds
it, the loss and the miner (:func:`check_built`), the optimizer, the scheduler and the Trainer against this
machine. A library's refusal is one line naming the key, the value and a fix (:func:`library_error`: the
key is found by building the object again without each key in turn). The checks of the data and the model
against each other are :mod:`noisydml.run.checks.data`'s.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable
from typing import Any

import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from pytorch_lightning.utilities.exceptions import SIGTERMException

from noisydml.run.checks.classes import parameter_default
from noisydml.run.checks.walk import (
    builds,
    entries,
    import_target,
    raw,
    shown,
    target_nodes,
)
from noisydml.utils.checks import BadValue
from noisydml.utils.errors import BadInput
from noisydml.utils.quiet import quiet_lightning

# The parts the run builds from a node of its own: built once here, before the data are read, so that
# their constructors' checks refuse a value before anything costly (the data, the noise) is done.
BUILT_EARLY = ("loss", "miner", "noise")
# Python's refusal of a call without a required argument: its first name.
MISSING = re.compile(r"missing \d+ required (?:positional |keyword-only )?arguments?: '(\w+)'")


def check_built(cfg: DictConfig) -> None:
    """Build each part of :data:`BUILT_EARLY` once and drop it: a constructor's refusal names the key it
    refused at its place in the config; a logger's keys are checked by its class's ``check_arguments``.
    Called before the run seeds itself, so nothing here changes what the run then draws."""
    for section in BUILT_EARLY:
        if builds(node := cfg.get(section)):
            build(section, node)
    # A logger writes as it is built (MLflow its store): one of this package checks its keys without being
    # built (check_arguments), so a sweep's later job is refused before the first runs.
    for key, node in entries(cfg, "logger"):
        check = (
            getattr(import_target(str(node["_target_"])), "check_arguments", None) if builds(node) else None
        )
        if callable(check):
            made(key, node, lambda n, check=check: check(**_arguments(n)))


def _arguments(node: DictConfig) -> dict[str, Any]:
    """The keyword arguments ``node`` builds its object with, resolved."""
    return {str(k): v for k, v in OmegaConf.to_container(node, resolve=True).items() if k != "_target_"}


def build(key: str, node: DictConfig, **kwargs: Any) -> Any:
    """The object ``node`` (the config at ``key``) builds, refused as :func:`made` refuses it."""
    return made(key, node, lambda n: instantiate(n, **kwargs))


def made(key: str, node: DictConfig, make: Callable[[DictConfig], Any]) -> Any:
    """``make(node)`` (the config at ``key``): a constructor's refusal names the parameter at its place
    below ``key`` (a wrapped loss's, ``loss.loss.margin``), a library's is one line naming the key it
    refused (:func:`library_error`)."""
    try:
        return make(node)
    except Exception as error:
        cause = instantiation_cause(error)
        if isinstance(cause, BadValue):
            place = next((path for path, n in target_nodes(node, key) if cause.key in n), key)
            raise cause.under(place) from error
        if isinstance(cause, BadInput):
            raise cause from error
        raise library_error(key, node, make, cause) from error


def instantiation_cause(error: BaseException) -> BaseException:
    """The error behind Hydra's wrappers (``InstantiationException``), which say only where it came from."""
    while isinstance(error, InstantiationException) and error.__cause__ is not None:
        error = error.__cause__
    return error


def library_error(
    key: str, node: DictConfig, build: Callable[[DictConfig], Any], error: Exception
) -> BadInput:
    """One line for a library's refusal (``error``, out of Hydra's wrappers) to build ``node`` (the config at
    ``key``): the key it refused, found by building again without each key in turn, its value, and a fix."""
    target = node.get("_target_", key)
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if isinstance(error, TypeError) and (missing := MISSING.search(reason)):
        name = missing.group(1)
        return BadInput(
            f"{key}.{name} is required by {target}, but the config sets none (was it removed with "
            f"~{key}.{name}?); give it, e.g. +{key}.{name}=<value>"
        )
    for name in [n for n in node if not str(n).startswith("_")]:
        trial = copy.deepcopy(node)
        with open_dict(trial):
            del trial[name]
        try:
            with quiet_lightning():
                build(trial)
        except Exception:
            continue
        default = parameter_default(import_target(str(target)), str(name))
        fix = (
            f"e.g. its default, {key}.{name}={shown(default)}"
            if default is not None
            else f"or drop {key}.{name}"
        )
        return BadInput(
            f"{key}.{name}={shown(raw(node, str(name)))} is refused by {target} ({reason}); give a "
            f"value it takes, {fix}"
        )
    return BadInput(f"{key} ({target}) cannot be built with its keys: {reason}; change the key it names")


def check_optimization(cfg: DictConfig, model: Any) -> None:
    """The optimizer and scheduler, built on the model's parameters as Lightning will build them."""
    params = [p for p in model.parameters() if p.requires_grad] or [torch.nn.Parameter(torch.zeros(1))]
    made("optimizer", cfg.optimizer, lambda n: instantiate(n)(params))
    if cfg.get("scheduler") is not None:
        # Each trial on an optimizer of its own: a scheduler sets its optimizer's learning rates.
        build = lambda n: instantiate(n)(instantiate(cfg.optimizer)(params))  # noqa: E731
        scheduler = made("scheduler", cfg.scheduler, build)
        # A cosine schedule anneals each rate towards eta_min: one above the rate would raise it instead.
        eta_min, rates = getattr(scheduler, "eta_min", None), getattr(scheduler, "base_lrs", [])
        if isinstance(eta_min, (int, float)) and rates and eta_min > min(rates):
            raise BadInput(
                f"scheduler.eta_min={eta_min} is above the learning rate {min(rates):g} "
                f"(optimizer.lr={shown(cfg.optimizer.get('lr'))}): the schedule would raise the rate to it, "
                "not anneal it; give scheduler.eta_min below it, e.g. scheduler.eta_min=0"
            )


def check_trainer(cfg: DictConfig) -> Any:
    """The Trainer as the run builds it (without loggers and callbacks), refused in one line naming the
    key where Lightning refuses it here (an unknown accelerator or precision), and first what it would
    take without a word or fail on deep in CUDA: a GPU this machine lacks, a process per device on a CPU's
    cores, bf16 on a CPU while the run records 16-mixed; then nodes no cluster starts. Return it, for its
    precision."""
    accelerator = str(OmegaConf.select(cfg, "trainer.accelerator", default="auto"))
    devices = OmegaConf.select(cfg, "trainer.devices", default=1)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if accelerator in ("gpu", "cuda") and not gpus:
        raise BadInput(
            f"trainer.accelerator={accelerator} but torch finds no GPU on this machine; use "
            "trainer.accelerator=cpu (or auto), or run on a GPU node"
        )
    on_gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and gpus > 0)
    if isinstance(devices, bool) or not (devices == "auto" or isinstance(devices, (int, ListConfig))):
        raise BadInput(
            f"trainer.devices={devices} is not a number of devices; e.g. trainer.devices=1 (or auto)"
        )
    # The cores this process may use (a job's share of a node), not the machine's.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if isinstance(devices, int) and devices != -1:
        have = gpus if on_gpu else cores
        what = f"{gpus} GPU(s)" if on_gpu else f"{have} CPU cores (a process per device)"
        if not 1 <= devices <= have:
            raise BadInput(
                f"trainer.devices={devices}: this machine has {what}; use trainer.devices=1, up to {have}"
            )
    if (threads := cfg.get("cpu_threads")) is not None and threads > cores:
        raise BadInput(
            f"cpu_threads={threads}: this process may use {cores} CPU cores, and threads beyond them only "
            f"contend for them (slower, never faster); use cpu_threads={cores} or fewer, or null (torch's "
            "default)"
        )
    precision = str(OmegaConf.select(cfg, "trainer.precision", default="32-true"))
    if not on_gpu and precision in ("16-mixed", "16"):
        raise BadInput(
            f"trainer.precision={precision} needs a GPU: on the CPU Lightning would run bf16-mixed instead; "
            "use trainer.precision=32-true, or bf16-mixed"
        )

    def build(node: DictConfig) -> Any:
        with quiet_lightning():
            plugins = [instantiate(plugin) for plugin in node.get("plugins") or []]
            return instantiate(
                node,
                logger=False,
                callbacks=[],
                plugins=plugins,
                enable_checkpointing=False,
                _convert_="partial",
            )

    trainer = made("trainer", cfg.trainer, build)
    from lightning_fabric.plugins.environments import LightningEnvironment

    nodes = trainer.num_nodes
    alone = type(getattr(trainer.strategy, "cluster_environment", None)) is LightningEnvironment
    if nodes > 1 and alone and "NODE_RANK" not in os.environ:
        raise BadInput(
            f"trainer.num_nodes={nodes}, but no cluster is there to start the other nodes (no SLURM, "
            "torchrun or MPI environment): the run would wait for them forever; run it with "
            "hydra/launcher=slurm (or torchrun on each node), or use trainer.num_nodes=1"
        )
    return trainer


def failure_message(error: BaseException) -> str:
    """The message a user reads: Hydra's wrapper around a constructor's error says only where it came from;
    the type is named where the message alone does not say what went wrong."""
    if isinstance(error, SIGTERMException):
        return "SIGTERM: preempted, cancelled or out of time"
    if ctrl_c(error):
        return "Ctrl-C"
    if isinstance(error, SystemExit):
        # submitit's exit after requeueing a job outside training (building, testing), or a library's.
        return f"exit status {error.code}"
    if isinstance(error, InstantiationException) and error.__cause__ is not None:
        error = error.__cause__
    if isinstance(error, (ValueError, OSError, FloatingPointError)) and str(error):
        return str(error)
    return f"{type(error).__name__}: {error}"


def ctrl_c(error: BaseException) -> bool:
    """Ctrl-C, or the exit Lightning makes of it (``sys.exit(1)`` while handling KeyboardInterrupt)."""
    return isinstance(error, KeyboardInterrupt) or isinstance(error.__context__, KeyboardInterrupt)
