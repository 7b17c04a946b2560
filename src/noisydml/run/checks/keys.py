"""The one table of keys: those whose consumer is a library that checks them late, wrongly or not at all
(the Trainer, an optimizer, numpy's seeding, Lightning's callbacks), or the project's own top-level keys.
A key a constructor of this package checks (``noise.rate``, ``data.val_fraction``, a miner's margin) is
not here: it is checked there, once. The ranges of a library class's parameters, wherever its node sits,
are in :mod:`noisydml.run.checks.classes`."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from noisydml.run.checks.walk import ABSENT, select, shown
from noisydml.utils.checks import Rule, check_value
from noisydml.utils.errors import BadInput

KEYS = (
    # numpy's and scikit-learn's seeds are below 2**32.
    Rule("seed", int, 0, 2**32, example="seed=0"),
    Rule("dataset.split_seed", int, 0, 2**32, optional=True, example="dataset.split_seed=0"),
    Rule("cpu_threads", int, 1, optional=True, example="cpu_threads=1"),
    Rule("resume", str, options=("auto", "never")),
    Rule("resume_from", str, options=("last", "previous")),
    Rule("numerics", str, options=("native", "strict")),
    # 0: evaluate the backbone as it is (BDML's PCA baseline).
    Rule("trainer.max_epochs", int, 0, example="trainer.max_epochs=20"),
    Rule(
        "trainer.check_val_every_n_epoch", int, 1, optional=True, example="trainer.check_val_every_n_epoch=5"
    ),
    Rule("trainer.log_every_n_steps", int, 1, example="trainer.log_every_n_steps=10"),
    Rule("trainer.num_nodes", int, 1, example="trainer.num_nodes=1"),
    Rule("trainer.accumulate_grad_batches", int, 1, example="trainer.accumulate_grad_batches=1"),
    Rule(
        "trainer.enable_checkpointing",
        bool,
        options=("True",),
        why="a run checkpoints to test its selected epoch and to resume; callbacks.checkpoint spaces them",
    ),
    Rule(
        "trainer.gradient_clip_val",
        float,
        0,
        optional=True,
        example="trainer.gradient_clip_val=1.0",
        why="Lightning skips clipping at a negative value without a word; null clips nothing",
    ),
    Rule("trainer.min_epochs", int, 0, optional=True, example="trainer.min_epochs=1"),
    Rule("trainer.accelerator", str, options=("auto", "cpu", "gpu", "cuda", "mps", "tpu")),
    Rule(
        "trainer.precision",
        str,
        options=("32-true", "32", "16-mixed", "bf16-mixed", "bf16-true", "16-true", "64-true"),
    ),
    Rule("optimizer.lr", float, 0, open_low=True, example="optimizer.lr=1e-3"),
    Rule("optimizer.weight_decay", float, 0, optional=True, example="optimizer.weight_decay=0"),
    Rule("optimizer.momentum", float, 0, 1, optional=True, example="optimizer.momentum=0.9"),
    Rule(
        "optimizer.betas",
        float,
        0,
        1,
        optional=True,
        each=True,
        length=2,
        example="optimizer.betas=[0.9,0.999]",
    ),
    Rule("scheduler.milestones", int, 1, each=True, example="scheduler.milestones=[30]"),
    Rule("scheduler.gamma", float, 0, open_low=True, example="scheduler.gamma=0.5"),
    Rule("scheduler.T_max", int, 1, example="scheduler.T_max=20"),
    Rule("data.P", int, 2, example="data.P=10"),
    Rule("data.K", int, 2, example="data.K=6"),
    Rule("data.batches_per_epoch", int, 1, optional=True, example="data.batches_per_epoch=100"),
    Rule("data.eval_batch_size", int, 1, example="data.eval_batch_size=512"),
    Rule("data.num_workers", int, 0, example="data.num_workers=4"),
    Rule("data.small_classes", str, options=("error", "replace", "drop")),
    Rule("backbone.embedding_size", int, 1, example="backbone.embedding_size=128"),
    Rule("module.train_samples", int, 1, example="module.train_samples=1"),
    Rule("module.loss_lr", float, 0, open_low=True, optional=True, example="module.loss_lr=1e-2"),
    Rule("metrics.knn_accuracy_k", int, 1, optional=True, example="metrics.knn_accuracy_k=5"),
    Rule("metrics.nmi_seeds", int, 1, example="metrics.nmi_seeds=5"),
    Rule("metrics.nmi_plus_factor", int, 1, optional=True, example="metrics.nmi_plus_factor=2"),
    Rule("metrics.nmi_average", str, options=("arithmetic", "geometric")),
    Rule("metrics.kmeans_niter", int, 1, example="metrics.kmeans_niter=20"),
    Rule("metrics.kmeans_restarts", int, 1, example="metrics.kmeans_restarts=5"),
    Rule("metrics.kmeans_init", str, options=("random", "k-means++")),
    Rule(
        "dataset.test_fraction",
        float,
        0,
        1,
        open_low=True,
        optional=True,
        example="dataset.test_fraction=0.3",
    ),
    Rule("callbacks.checkpoint.every_n_epochs", int, 1, optional=True, example="every_n_epochs=1"),
    Rule(
        "callbacks.checkpoint.every_n_train_steps", int, 1, optional=True, example="every_n_train_steps=500"
    ),
)

# Nodes that build an object, or are null: without ``_target_`` they would reach their consumer as a dict.
TARGET_SECTIONS = ("callbacks", "logger", "trainer.plugins", "data.filter")
TARGET_EXAMPLES = {
    "data.filter": "{_target_: noisydml.data.knn_filter.KnnLabelFilter}",
    "trainer.plugins": "{_target_: pytorch_lightning.plugins.environments.LightningEnvironment}",
}
CALLBACK_EXAMPLE = "{_target_: pytorch_lightning.callbacks.EarlyStopping, monitor: val/recall@1, mode: max}"


def check_keys(cfg: DictConfig) -> None:
    """Refuse the first key of :data:`KEYS` outside its rule, and a node that builds nothing."""
    for rule in KEYS:
        value = select(cfg, rule.key)
        if value is not ABSENT:
            check_value(rule, value)
    max_steps = OmegaConf.select(cfg, "trainer.max_steps", default=-1)
    if max_steps is not None and not (isinstance(max_steps, int) and (max_steps == -1 or max_steps >= 1)):
        raise BadInput(
            f"trainer.max_steps={max_steps} must be -1 (no limit) or >= 1; e.g. trainer.max_steps=1000"
        )
    epochs = (OmegaConf.select(cfg, "trainer.min_epochs"), OmegaConf.select(cfg, "trainer.max_epochs"))
    if epochs[0] is not None and epochs[1] not in (None, -1) and epochs[0] > epochs[1]:
        raise BadInput(
            f"trainer.min_epochs={epochs[0]} is above trainer.max_epochs={epochs[1]}, so the run cannot do "
            "what both say; lower trainer.min_epochs or raise trainer.max_epochs"
        )
    _check_targets(cfg)


def _check_targets(cfg: DictConfig) -> None:
    """Each callback, logger, trainer plugin and label filter names the class it builds."""
    for section in TARGET_SECTIONS:
        for key, node in _section_nodes(cfg, section):
            if node is None or (isinstance(node, DictConfig) and "_target_" in node):
                continue
            example = TARGET_EXAMPLES.get(section, CALLBACK_EXAMPLE)
            null = f", or {key}=null" if section == "data.filter" else ""
            raise BadInput(
                f"{key}={shown(node)} has no _target_, the class it builds; give it, e.g. "
                f"'{key}={example}'{null}"
            )


def _section_nodes(cfg: DictConfig, section: str) -> list[tuple[str, object]]:
    """``(key, node)`` of a section's entries: a mapping's, a list's (``trainer.plugins[0]``) or itself."""
    found = OmegaConf.select(cfg, section, default=None)
    if section == "data.filter":
        return [(section, found)]
    if section == "trainer.plugins":
        return [(f"{section}[{i}]", node) for i, node in enumerate(found or [])]
    return [(f"{section}.{name}", node) for name, node in (found or {}).items()]
