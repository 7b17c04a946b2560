"""The rules on the composed config that need nothing built, in the order :func:`check_config` runs them:
the one table of keys (:data:`KEYS`), whose consumer is a library that checks them late, wrongly or not at
all (the Trainer, an optimizer, numpy's seeding), or the project itself (its top-level keys); the method's
groups (a group swapped for another would have the method's keys blamed on it); every node against its
class (:mod:`~noisydml.run.checks.classes`); the parts whose constructors check their own values (a key
such as ``noise.rate`` or ``data.P`` is checked there, once); the run's identity."""

from __future__ import annotations

import re
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from noisydml.numerics import MODES
from noisydml.run.checks.classes import check_classes, top_level_keys
from noisydml.run.checks.identity import check_identity, check_method
from noisydml.run.checks.library import check_built
from noisydml.run.checks.walk import (
    ABSENT,
    builds,
    entries,
    given_keys,
    given_overrides,
    group_choices,
    raw,
    shown,
    target_nodes,
)
from noisydml.utils.checks import INF, Rule, check_value
from noisydml.utils.errors import BadInput
from noisydml.utils.metric_names import VALIDATION


def check_config(cfg: DictConfig, choices: dict[str, str]) -> None:
    """Refuse the first bad key of the composed config, before anything is built."""
    check_keys(cfg)
    check_given(cfg)
    check_embedding_sizes(cfg)
    check_selection(cfg)
    check_method(cfg, choices)
    check_classes(cfg)
    check_built(cfg)
    check_identity(cfg, choices)


# Keys the run sets itself, with what sets them: given, the run's files would split between two folders
# (its log in hydra.run.dir), or a stopped run would leave nothing to resume from.
SET_BY_THE_RUN = {
    "paths.output_dir": "the run's folder, set by hydra.run.dir; give hydra.run.dir=... instead",
    "callbacks.checkpoint": "the checkpoint a stopped run resumes from; callbacks.checkpoint.every_n_epochs "
    "and every_n_train_steps space them",
}


def check_given(cfg: DictConfig) -> None:
    """A key given for the run that the run sets itself (:data:`SET_BY_THE_RUN`), and a key added with ``+``
    at the top of the config, where no code reads it (a config group is chosen without ``+``'s key)."""
    given = given_overrides()
    for override in given:
        key = override.split("=", 1)[0].lstrip("+~")
        if key in SET_BY_THE_RUN:
            raise BadInput(f"{override} would replace {SET_BY_THE_RUN[key]}")
    groups, keys = set(group_choices()), top_level_keys() - {"defaults"}
    for override in (o for o in given if o.startswith("+") and "=" in o):
        key = override[1:].split("=", 1)[0]
        if "." not in key and key not in keys and key not in groups:
            raise BadInput(
                f"{override[1:]} adds a top-level key that nothing reads (the run's own are "
                f"{', '.join(sorted(keys))}); drop it, or give it below the node that reads it"
            )


def check_embedding_sizes(cfg: DictConfig) -> None:
    """A loss or miner that sizes its own parameters by the embedding (proxies, a memory) has the
    backbone's embedding size: another would fail on the first batch, naming two matrices' shapes."""
    size = OmegaConf.select(cfg, "backbone.embedding_size", default=None)
    nodes = [entry for key in ("loss", "miner") for entry in target_nodes(cfg.get(key), key)]
    for path, node in nodes:
        if "embedding_size" not in node or size is None:
            continue
        if (theirs := node.get("embedding_size")) != size:
            raise BadInput(
                f"{path}.embedding_size={theirs} is not the backbone's backbone.embedding_size={size}, which "
                f"the loss receives; drop {path}.embedding_size (it follows the backbone's), or set "
                f"backbone.embedding_size={theirs}"
            )


def check_selection(cfg: DictConfig) -> None:
    """A selection metric is read from a validation split: without one (``data.val_fraction=0``) the last
    epoch is tested, so ``optimized_metric`` given for the run is read by nothing, and a search that
    optimises it would get nothing back from any trial."""
    metric = OmegaConf.select(cfg, "optimized_metric", default=None)
    held = OmegaConf.select(cfg, "data.val_fraction", default=None) not in (0, None)
    if held and "callbacks.select" in given_keys() and OmegaConf.select(cfg, "callbacks.select") is None:
        raise BadInput(
            f"callbacks.select=null selects no epoch, so optimized_metric={metric} is read by nothing and "
            "the last epoch is tested, while the record reads as selected; to test the last epoch, hold out "
            "no validation split (data.val_fraction=0), or keep callbacks.select"
        )
    # Another split's metric is refused as such once the data are built (check_metrics).
    if OmegaConf.select(cfg, "data.val_fraction", default=None) != 0 or not str(metric).startswith(
        VALIDATION
    ):
        return
    held_out = "but data.val_fraction=0 holds out no validation split"
    sweeper = OmegaConf.select(HydraConfig.get(), "sweeper") if HydraConfig.initialized() else None
    if isinstance(sweeper, DictConfig) and "direction" in sweeper:
        raise BadInput(
            f"the search optimises optimized_metric={metric}, a validation metric, {held_out}, so no trial "
            "would return it; hold one out, e.g. data.val_fraction=0.1"
        )
    if "optimized_metric" in given_keys():
        raise BadInput(
            f"optimized_metric={metric} selects the epoch to test, {held_out}, so nothing reads it (the last "
            "epoch is tested); drop optimized_metric, or hold one out, e.g. data.val_fraction=0.1"
        )


def check_job(cfg: DictConfig, data: bool = False) -> None:
    """:func:`check_config` of a sweep's job, composed (``cfg``, its ``hydra`` node included) before any job
    of the sweep runs, so that a bad value of a later job stops the sweep before the first trains; with
    ``data``, its checks against the data and the model too (a job that runs on this machine). The job's own
    pre-flight checks it again."""
    hydra = HydraConfig.instance()
    sweep = hydra.cfg
    hydra.set_config(cfg)
    try:
        choices = group_choices()
        check_config(cfg, choices)
        if data:
            _check_job_data(cfg, choices)
    finally:
        if sweep is not None:
            hydra.set_config(sweep)


def _check_job_data(cfg: DictConfig, choices: dict[str, str]) -> None:
    """What the job's run checks once its data and model are built (:func:`~noisydml.run.checks.data.
    build_checked`), in a copy of torch's random state, so that the jobs then draw what they would have;
    refused as the run refuses it (anything that stops a run before its first step is the input's)."""
    import torch

    from noisydml.run.checks.data import build_checked
    from noisydml.run.checks.library import check_trainer, failure_message

    with torch.random.fork_rng(devices=[]):
        try:
            build_checked(cfg, choices, check_trainer(cfg))
        except BadInput:
            raise
        except Exception as error:
            raise BadInput(failure_message(error)) from error


def check_seed(seed: Any) -> None:
    """The seed alone, for a sweep's job whose other values an earlier job's :func:`check_job` covered: a
    seed changes no rule but its own."""
    check_value(next(rule for rule in KEYS if rule.key == "seed"), seed)


def _rule(key: str, kind: type, low: float = -INF, high: float = INF, eg: object = None, **rule: Any) -> Rule:
    """A row of :data:`KEYS`; ``eg``, a value the key takes, completes the fix as ``key=eg``."""
    return Rule(key, kind, low, high, example="" if eg is None else f"{key}={eg}", **rule)


KEYS = (
    # numpy's and scikit-learn's seeds are below 2**32.
    _rule("seed", int, 0, 2**32, eg=0),
    _rule("cpu_threads", int, 1, optional=True, eg=1),
    _rule("resume", str, options=("auto", "never")),
    _rule("resume_from", str, options=("last", "previous")),
    _rule("numerics", str, options=MODES),
    # 0: evaluate the backbone as it is (BDML's PCA baseline); -1: no limit, trainer.max_steps ends the run
    # (Yu et al.'s iterations).
    _rule("trainer.max_epochs", int, -1, eg=20),
    _rule("trainer.check_val_every_n_epoch", int, 1, optional=True, eg=5),
    _rule("trainer.log_every_n_steps", int, 1, eg=10),
    # Lightning takes any negative for -1 (every validation batch) without a word.
    _rule("trainer.num_sanity_val_steps", int, -1, eg=0),
    _rule("trainer.accumulate_grad_batches", int, 1, eg=1),
    _rule(
        "trainer.enable_checkpointing",
        bool,
        options=("True",),
        why="a run checkpoints to test its selected epoch and to resume; callbacks.checkpoint spaces them",
    ),
    _rule(
        "trainer.gradient_clip_val",
        float,
        0,
        optional=True,
        eg=1.0,
        why="Lightning skips clipping at a negative value without a word; null clips nothing",
    ),
    _rule("trainer.min_epochs", int, 0, optional=True, eg=1),
    _rule("optimizer.lr", float, 0, open_low=True, eg="1e-3"),
    _rule("optimizer.momentum", float, 0, 1, optional=True, eg=0.9),
    # Two numbers: torch indexes them before checking, and checks their range, [0, 1), itself.
    _rule("optimizer.betas", float, optional=True, each=True, length=2, eg="[0.9,0.999]"),
    _rule("scheduler.milestones", int, 1, each=True, eg="[30]"),
    _rule("scheduler.gamma", float, 0, open_low=True, eg=0.5),
    _rule("scheduler.T_max", int, 1, eg=20),
)

# Nodes that build an object, or are null: without ``_target_`` they would reach their consumer as a dict.
TARGET_EXAMPLES = {
    "data.filter": "{_target_: noisydml.data.knn_filter.KnnLabelFilter}",
    "trainer.plugins": "{_target_: pytorch_lightning.plugins.environments.LightningEnvironment}",
    "scheduler": "{_target_: torch.optim.lr_scheduler.MultiStepLR, _partial_: true, milestones: [30]}",
    "miner": "{_target_: pytorch_metric_learning.miners.BatchHardMiner}",
}
# Single nodes that may build nothing, and how.
NONE = {
    "data.filter": "data.filter=null",
    "scheduler": "scheduler=none (a constant learning rate)",
    "miner": "miner=none (the loss forms its own tuples)",
}
# The nodes the run builds, each into one object (those that may be null are in NONE).
BUILT = ("dataset", "data", "noise", "backbone", "loss", "optimizer", "metrics", "trainer")
CALLBACK_EXAMPLE = "{_target_: pytorch_lightning.callbacks.EarlyStopping, monitor: val/recall@1, mode: max}"


def check_keys(cfg: DictConfig) -> None:
    """Refuse the first key of :data:`KEYS` outside its rule, and a node that builds nothing."""
    for rule in KEYS:
        value = OmegaConf.select(cfg, rule.key, default=ABSENT)
        if value is not ABSENT:
            check_value(rule, value)
    max_steps = OmegaConf.select(cfg, "trainer.max_steps", default=-1)
    if max_steps is not None and not (isinstance(max_steps, int) and (max_steps == -1 or max_steps >= 1)):
        raise BadInput(
            f"trainer.max_steps={max_steps} must be -1 (no limit) or >= 1; e.g. trainer.max_steps=1000"
        )
    if OmegaConf.select(cfg, "trainer.max_epochs", default=None) == -1 and max_steps in (None, -1):
        raise BadInput(
            "trainer.max_epochs=-1 sets no end, and trainer.max_steps=-1 none either: the run would train "
            "forever; give trainer.max_epochs, e.g. trainer.max_epochs=20, or trainer.max_steps, e.g. "
            "trainer.max_steps=1000"
        )
    epochs = (OmegaConf.select(cfg, "trainer.min_epochs"), OmegaConf.select(cfg, "trainer.max_epochs"))
    if epochs[0] is not None and epochs[1] not in (None, -1) and epochs[0] > epochs[1]:
        raise BadInput(
            f"trainer.min_epochs={epochs[0]} is above trainer.max_epochs={epochs[1]}, so the run cannot do "
            "what both say; lower trainer.min_epochs or raise trainer.max_epochs"
        )
    # A folder the run reads or writes named by nothing (an environment variable set empty): relative to
    # the filesystem's root, "" joined to a name leads out of every data and run folder.
    for key, value in entries(cfg, "paths"):
        if value == "":
            typed = str(raw(cfg, key, ""))
            variable = re.search(r"\$\{oc\.env:(\w+)", typed)
            source = f" (the environment variable {variable[1]} is set empty)" if variable else ""
            fix = (
                f"unset {variable[1]} or set it to a folder"
                if variable
                else f"give a folder, e.g. {key}=data"
            )
            raise BadInput(f"{key} is empty{source}, so its files would go to /; {fix}")
    # Each callback, logger, trainer plugin and label filter names the class it builds.
    nodes = [(s, *entry) for s in ("callbacks", "logger", "trainer.plugins") for entry in entries(cfg, s)]
    nodes += [(key, key, OmegaConf.select(cfg, key, default=None)) for key in (*NONE, *BUILT)]
    for section, key, node in nodes:
        if node is not None and not builds(node):
            null = f", or {NONE[section]} with no keys of its own" if section in NONE else ""
            example = TARGET_EXAMPLES.get(
                section, "{_target_: ...}" if section in BUILT else CALLBACK_EXAMPLE
            )
            raise BadInput(
                f"{key}={shown(node)} has no _target_, the class it builds; give it, e.g. "
                f"'{key}={example}'{null}"
            )
