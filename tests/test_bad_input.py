"""Bad input fails before training, with the key, the value and the fix, and costs no results."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import open_dict
from pytorch_metric_learning.losses import TripletMarginLoss

from layouts import make_cub
from noisydml.run.train import train
from noisydml.utils.errors import BadInput, Diverged


def assert_nothing_trained(cfg) -> None:
    """No checkpoint, and a results.json that records the failure."""
    run_dir = Path(cfg.paths.output_dir)
    assert not (run_dir / "checkpoints").exists()
    assert json.loads((run_dir / "results.json").read_text())["status"] == "failed"


def _refuses_file_store() -> bool:
    """The installed MLflow refuses its file store (MLflow 3, without MLFLOW_ALLOW_FILE_STORE)."""
    if importlib.util.find_spec("mlflow") is None:
        return False
    from mlflow import environment_variables

    allowed = getattr(environment_variables, "MLFLOW_ALLOW_FILE_STORE", None)
    return allowed is not None and not allowed.get()


# An input that is an environment variable, not an override: WANDB_MODE=offline.
ENVIRONMENT = re.compile(r"^[A-Z][A-Z0-9_]*=")

# Where the machine has a GPU these inputs are valid.
NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="valid on a machine with a GPU")

# Every bad input of docs/reference/bad-input.md's table: the overrides (``{data}`` is a folder of
# generated feature files, see ``data``) and the message, which names the key, the value and the fix.
BAD_INPUTS = [
    (["noise.rate=1.2"], r"noise.rate=1.2 is outside \[0, 1\); e.g. noise.rate=0.2"),
    (["noise.rate=-0.1"], r"noise.rate=-0.1 is outside \[0, 1\)"),
    (["noise.rate=abc"], r"noise.rate=abc is not a number; give one, e.g. noise.rate=0.2"),
    (["noise.rate=0.95"], r"noise.rate=0.95: with 10 training classes .* use noise.rate < 0.900"),
    (["noise=class_conditional", "noise.rates=[0.1,0.2]"], r"noise.rates has 2 entries .* 10 classes"),
    (
        ["noise=class_conditional", "noise.rates=[1.5,0.1]"],
        r"noise.rates=\[1.5,0.1\]: 1.5 is outside \[0, 1\); e.g. noise.rates=\[0.2,0.1\]$",
    ),
    # Issue 45: a key nothing reads, or read otherwise than recorded.
    (
        ["callbacks.select.monitor=val/nmi"],
        r"callbacks.select.monitor=val/nmi would select .* optimized_metric=val/recall@1 .*; set "
        r"optimized_metric=val/nmi instead",
    ),
    (
        ["data.val_fraction=0", "data.val_labels=true"],
        r"data.val_labels=true .* data.val_fraction=0 holds none out, so nothing reads it",
    ),
    (
        ["data.val_fraction=0", "data.val_split=stratified"],
        r"data.val_split=stratified .* data.val_fraction=0 holds none out, so nothing reads it",
    ),
    (
        ["backbone.freeze_bn=true"],
        r"backbone.freeze_bn=true .* the trunk of backbone \(MLP\) has none, so nothing reads it",
    ),
    (
        ["scheduler=none", "+scheduler.gamma=0.5"],
        r"scheduler={gamma: 0.5} has no _target_, the class it builds; give it, e.g. 'scheduler={_target_: "
        r"torch.optim.lr_scheduler.MultiStepLR, .*, or scheduler=none \(a constant learning rate\) with no "
        r"keys",
    ),
    (
        ["callbacks=knn_detection", "noise=none"],
        r"callbacks.knn_detection scores how well the flipped labels are found, but this run's noise "
        r"flips 0 of \d+, so it would log nothing; drop it, or add noise",
    ),
    (
        ["data.unlabeled_fraction=0.5"],
        r"data.unlabeled_fraction=0.5 hides that share of the training labels for a semi-supervised method, "
        r"but the loss \(TripletMarginLoss\) reads no unlabeled sample, so the run would train on the rest "
        r"alone",
    ),
    (
        ["tune.trials=5"],
        r"tune.trials=5 sets the studies scripts/reproduce.py runs for an experiment's tuned methods, which "
        r"a run does not read; drop it, or give it to scripts/reproduce.py <experiment> tune.trials=...$",
    ),
    (
        ["metrics.nmi=false", "metrics.nmi_seeds=3"],
        r"metrics.nmi_seeds=3 is read only when metrics.nmi is not false \(it sets how NMI is computed\), "
        r"but metrics.nmi=false, so it is ignored; drop metrics.nmi_seeds",
    ),
    (
        ["scheduler=multistep", "scheduler.milestones=[100]", "trainer.max_epochs=3"],
        r"scheduler.milestones=\[100\] .* trainer.max_epochs=3, so it reaches none and nothing reads them; "
        r"give a milestone below 3",
    ),
    (
        ["miner=none", "+loss.triplets_per_anchor=-3"],
        r"loss.triplets_per_anchor=-3 must be >= 1 \(each anchor draws that many of its triplets; all: every "
        r"one\)",
    ),
    (
        ["miner=none", "+loss.triplets_per_anchor=some"],
        r"loss.triplets_per_anchor=some is not an option; use one of: all, or an integer >= 1",
    ),
    (
        ["metrics.ncm_accuracy=true", "dataset.split=disjoint", "data.val_fraction=0", "data.P=5"],
        r"metrics.ncm_accuracy needs every test class among the training classes, but 5 are not \(e.g. "
        r"\[5, 6, 7, 8, 9\]\): use a same-classes split",
    ),
    # Refused in each DDP process, after they had started, as two tracebacks.
    (
        ["trainer=ddp_cpu"],
        r"data.P=10 x 2 process\(es\) is larger than the 10 training classes that can be drawn; use data.P=5",
    ),
    (
        ["backbone=mlp", "module.channels_last=true"],
        r"module.channels_last=true .* but the backbone \(MLP\) has no 2-d convolution, so nothing reads it",
    ),
    pytest.param(
        ["data.pin_memory=true"],
        r"data.pin_memory=true .* but this run trains on the CPU, so nothing reads it; drop data.pin_memory",
        marks=NO_GPU,
    ),
    # Keys their objects' other settings leave unread (each class's unread_keys), and the libraries'.
    (
        ["+trainer.gradient_clip_algorithm=value"],
        r"trainer.gradient_clip_algorithm=value says how gradients are clipped, but "
        r"trainer.gradient_clip_val is not set, so none is and nothing reads it",
    ),
    (
        ["data.val_fraction=0", "trainer.check_val_every_n_epoch=1"],
        r"trainer.check_val_every_n_epoch=1 says when or how much the run validates, but it holds out no "
        r"validation split \(data.val_fraction=0\) and scores none at validation, so nothing reads it",
    ),
    (
        ["callbacks.checkpoint.every_n_train_steps=1000"],
        r"callbacks.checkpoint.every_n_train_steps=1000 saves every that many steps, but the run trains \d+, "
        r"so it saves none and nothing reads it",
    ),
    (
        ["miner=none", "+miner.margin=0.3"],
        r"miner=\{margin: 0.3\} has no _target_, the class it builds; give it, e.g. "
        r"'miner=\{_target_: pytorch_metric_learning.miners.BatchHardMiner\}', or miner=none",
    ),
    (
        ["data.val_fraction=0", "optimized_metric=val/nmi"],
        r"optimized_metric=val/nmi selects the epoch to test, but data.val_fraction=0 holds out no "
        r"validation split, so nothing reads it",
    ),
    (
        ["NOISYDML_DATA_DIR=", "noise=instance_dependent"],
        r"paths.data_dir is empty \(the environment variable NOISYDML_DATA_DIR is set empty\), so its files "
        r"would go to /; unset NOISYDML_DATA_DIR or set it to a folder",
    ),
    (
        ["method=bdml/pca", "optimizer.lr=0.5"],
        r"optimizer.lr=0.5 sets how the run trains, but backbone=identity has nothing to train, so nothing "
        r"reads it; drop optimizer.lr",
    ),
    (
        ["loss=proxy_anchor", "miner=none", "loss.embedding_size=16"],
        r"loss.embedding_size=16 is not the backbone's backbone.embedding_size=32, which the loss receives; "
        r"drop loss.embedding_size",
    ),
    (
        ["callbacks.select=null"],
        r"callbacks.select=null selects no epoch, so optimized_metric=val/recall@1 is read by nothing and "
        r"the last epoch is tested",
    ),
    (
        ["+foo=1"],
        r"foo=1 adds a top-level key that nothing reads \(the run's own are callbacks, .*\); drop it",
    ),
    (
        ["paths.output_dir=/tmp/noisydml-elsewhere"],
        r"paths.output_dir=/tmp/noisydml-elsewhere would replace the run's folder, set by hydra.run.dir; "
        r"give hydra.run.dir=... instead",
    ),
    (
        ["callbacks.checkpoint=null"],
        r"callbacks.checkpoint=null would replace the checkpoint a stopped run resumes from",
    ),
    (
        ["noise=none", "noise.seed=5"],
        r"noise.seed=5 seeds the noise, but noise draws none, so nothing reads it; drop noise.seed",
    ),
    (
        ["+trainer.sync_batchnorm=true"],
        r"trainer.sync_batchnorm=true shares BatchNorm's statistics between the processes .* this run is one "
        r"process, so nothing reads it",
    ),
    pytest.param(
        ["trainer.benchmark=true"],
        r"trainer.benchmark=true lets cuDNN choose .* this run trains on the CPU, so nothing reads it",
        marks=NO_GPU,
    ),
    (
        ["backbone=bayesian_mlp", "backbone.eval_samples=50"],
        r"backbone.eval_samples=50 .* backbone.predict=mean tests the posterior means, so nothing reads it; "
        r"drop backbone.eval_samples, or average samples: backbone.predict=sample_average",
    ),
    (
        ["miner=easy_positive", "miner.negatives=random", "miner.epsilon=0.3"],
        r"miner.epsilon=0.3 is a parameter of other negative rules than miner.negatives=random, which does "
        r"not read it; drop miner.epsilon",
    ),
    (
        ["callbacks=loss_detection", "loss=trimmed"],
        r"callbacks.loss_detection reads each sample's loss from the loss's reducer, but the loss "
        r"\(TrimmedLoss\) has none, so it would log nothing",
    ),
    (
        ["callbacks=early_stopping", "data.val_fraction=0.2"],
        r"callbacks.early_stopping stops the run after patience=3 validations without improvement, but the "
        r"run validates 1 time, so it can never stop it early",
    ),
    (
        ["noise=nearest_class", "noise.backbone=${backbone}"],
        r"noise.backbone=\$\{backbone\} embeds the samples .* noise.features=inputs compares their inputs, "
        r"so nothing reads it; drop noise.backbone, or compare embeddings: noise.features=backbone",
    ),
    (
        ["trainer.max_steps=100000"],
        r"trainer.max_steps=100000 .* trainer.max_epochs=\d+ ends the run after \d+ steps first, so nothing "
        r"reads it; drop trainer.max_steps, or train by steps: trainer.max_epochs=-1",
    ),
    (
        ["scheduler=cosine", "+scheduler.eta_min=1"],
        r"scheduler.eta_min=1 is above the learning rate 0.001 \(optimizer.lr=0.001\): the schedule would "
        r"raise the rate to it, not anneal it",
    ),
    (
        ["logger=wandb", "logger.wandb.resume=must"],
        r"logger.wandb.resume=must continues the W&B run that id names, but logger.wandb.id=null; give the "
        r"run's logger.wandb.id=\.\.\., or logger.wandb.resume=allow",
    ),
    (
        ["loss=margin", "miner=distance_weighted", "loss.learn_beta=false"],
        r"loss.per_class_beta=true .* give loss.per_class_beta=false with loss.learn_beta=false$",
    ),
    (
        ["optimizer=sgd", "optimizer.momentum=0", "+optimizer.dampening=0.5"],
        r"optimizer.dampening=0.5 is read only when optimizer.momentum is not 0 .* so it is ignored",
    ),
    (["report.baselines=[foo/bar]"], r"report.baselines names foo/bar, which is no method= option"),
    (["module.compile=maybe"], r"module.compile=maybe is not a boolean; give true or false"),
    (
        ["callbacks=model_summary", "callbacks.model_summary.max_depth=-5"],
        r"callbacks.model_summary.max_depth=-5 must be >= -1 \(-1 shows every layer, 0 none\)",
    ),
    (
        ["+trainer.min_steps=100"],
        r"trainer.min_steps=100 is more than the \d+ steps of trainer.max_epochs=\d+, which ends the run",
    ),
    (["+trainer.max_time=00:00:00:00"], r"trainer.max_time=00:00:00:00 stops the run before its first step"),
    (["loss.margin=nan"], r"loss.margin=nan is not a number; give one, e.g. loss.margin="),
    (
        ["+noise.rat=0.2"],
        r"noise.rat=0.2 is not an option of noisydml.noise.UniformNoise .*did you mean noise.rate\?",
    ),
    (["noise=instance_dependent", "noise.epochs=0"], r"noise.epochs=0 must be >= 1; e.g. noise.epochs=20"),
    (
        ["noise=nearest_class", "noise.features=pixels"],
        r"noise.features='pixels' is not one of \('inputs', 'backbone'\)",
    ),
    (
        ["dataset=mnist1d", "dataset.num_samples=10"],
        r"dataset.num_samples=10 must be >= 20 .*num_samples=10000",
    ),
    (["seed=abc"], r"seed=abc is not an integer; give one, e.g. seed=0"),
    (["seed=-1"], r"seed=-1 is outside \[0, 4294967296\)"),
    (["optimizer.lr=-1"], r"optimizer.lr=-1 must be > 0; e.g. optimizer.lr=1e-3"),
    (["optimizer.lr=0"], r"optimizer.lr=0 must be > 0"),
    (
        ["optimizer.weight_decay=-0.1"],
        r"optimizer.weight_decay=-0.1 is refused by torch.optim.Adam \(Invalid weight_decay value: -0.1\); "
        r"give a value it takes, e.g. its default, optimizer.weight_decay=0",
    ),
    (["optimizer=sgd", "optimizer.momentum=1.5"], r"optimizer.momentum=1.5 is outside \[0, 1\)"),
    (
        ["+optimizer.lrr=0.1"],
        r"optimizer.lrr=0.1 is not an option of torch.optim.Adam .*did you mean optimizer.lr\?",
    ),
    (["trainer.max_epochs=-1"], r"trainer.max_epochs=-1 sets no end, and trainer.max_steps=-1 none either"),
    (["trainer.max_epochs=-2"], r"trainer.max_epochs=-2 must be >= -1; e.g. trainer.max_epochs=20"),
    (["trainer.max_steps=0"], r"trainer.max_steps=0 must be -1 \(no limit\) or >= 1"),
    (["trainer.log_every_n_steps=0"], r"trainer.log_every_n_steps=0 must be >= 1"),
    (["trainer.check_val_every_n_epoch=0"], r"trainer.check_val_every_n_epoch=0 must be >= 1"),
    (
        ["trainer.precision=15"],
        r"trainer.precision=15 is refused by pytorch_lightning.Trainer \(Precision 15 is invalid. Allowed "
        r"precision values: .*\); give a value it takes, or drop trainer.precision",
    ),
    (
        ["trainer.accelerator=quantum"],
        r"trainer.accelerator=quantum is refused by pytorch_lightning.Trainer \(You selected an invalid "
        r"accelerator name: `accelerator='quantum'`. Available names are: auto, .*\); give a value it "
        r"takes, e.g. its default, trainer.accelerator=auto",
    ),
    (["data.P=1"], r"data.P=1 must be >= 2"),
    (["data.P=11"], r"data.P=11 .* 10 training classes"),
    (["data.K=1"], r"data.K=1 must be >= 2"),
    (["data.K=500"], r"data.K=500 is larger than every class"),
    (["data.batches_per_epoch=0"], r"data.batches_per_epoch=0 must be >= 1"),
    (
        ["data.small_classes=maybe"],
        r"data.small_classes=maybe is not an option; use one of: error, replace, drop",
    ),
    (["data.val_fraction=1.5"], r"data.val_fraction=1.5 is outside \[0, 1\)"),
    (["data.val_split=random"], r"data.val_split='random' is not one of"),
    (
        ["data.val_fraction=0.99"],
        r"data.val_fraction=0.99 leaves too little to train on \(data.K=6 is larger than every class .*\); "
        r"lower data.val_fraction",
    ),
    (
        ["data.val_split=class_disjoint", "data.val_fraction=0.99"],
        r"data.val_fraction=0.99 holds out 10 of the 10 training classes, leaving 0 to train on; a batch "
        r"draws at least 2 classes: e.g. data.val_fraction=0.8 data.P=2 \(holds out 8, leaves 2\), or "
        r"data.val_split=stratified",
    ),
    (
        [
            "dataset.split=disjoint",
            "dataset.train_digits=[0,1]",
            "data.P=2",
            "data.val_split=class_disjoint",
            "data.val_fraction=0.4",
        ],
        r"data.val_fraction=0.4 holds out 1 of the 2 training classes; .*: with 2 no class-disjoint split "
        r"is possible; use data.val_split=stratified \(a share of every class\), or data.val_fraction=0 for "
        r"none$",
    ),
    (["data.num_workers=-1"], r"data.num_workers=-1 must be >= 0"),
    (["data.unlabeled_fraction=1.0"], r"data.unlabeled_fraction=1.0 is outside \[0, 1\)"),
    (["dataset.test_fraction=0"], r"dataset.test_fraction=0 is outside \(0, 1\)"),
    (["backbone.embedding_size=0"], r"backbone.embedding_size=0 must be >= 1"),
    (
        ["+backbone.trunk.hiden=[64]"],
        r"backbone.trunk.hiden=\[64\] is not an option of noisydml.models.MLP .*hidden",
    ),
    (["loss.margin=-0.1"], r"loss.margin=-0.1 must be >= 0"),
    (
        ["+loss.margn=0.1"],
        r"loss.margn=0.1 is not an option of .*TripletMarginLoss .*did you mean loss.margin\?",
    ),
    (["miner.margin=-1"], r"miner.margin=-1 must be >= 0"),
    (["loss=proxy_anchor"], r"loss=proxy_anchor with miner=random_semihard fails .*: use miner=none"),
    (["loss=bspml"], r"loss=bspml with miner=random_semihard fails .*: use miner=multi_similarity"),
    (["module.train_samples=0"], r"module.train_samples=0 must be >= 1"),
    (["module.loss_lr=0"], r"module.loss_lr=0 must be > 0"),
    (
        ["+module.train_sample=2"],
        r"module.train_sample=2 is not an option .*did you mean module.train_samples\?",
    ),
    (["metrics.knn_accuracy_k=0"], r"metrics.knn_accuracy_k=0 must be >= 1"),
    (
        ["metrics.nmi_average=harmonic"],
        r"metrics.nmi_average=harmonic is not an option; use one of: arithmetic, geometric",
    ),
    (["metrics.kmeans_restarts=0"], r"metrics.kmeans_restarts=0 must be >= 1"),
    (
        ["+metrics.recal_ks=[1]"],
        r"metrics.recal_ks=\[1\] is not an option of .*Evaluator .*did you mean metrics.recall_ks\?",
    ),
    (["cpu_threads=0"], r"cpu_threads=0 must be >= 1"),
    (["callbacks.checkpoint.every_n_epochs=0"], r"callbacks.checkpoint.every_n_epochs=0 must be >= 1"),
    (
        ["callbacks.checkpoint.every_n_epochs=null"],
        r"callbacks.checkpoint.every_n_epochs=null with callbacks.checkpoint.every_n_train_steps=null writes "
        r"no checkpoint to resume from",
    ),
    (["resume=sometimes"], r"resume=sometimes is not an option; use one of: auto, never"),
    (["resume_from=first"], r"resume_from=first is not an option; use one of: last, previous"),
    (
        ["method=zhang2023/bspml", "loss=triplet"],
        r"method=zhang2023/bspml is loss=bspml, but loss=triplet was given, which would record a triplet run "
        r"as zhang2023/bspml; drop loss=triplet to run the method, or drop method= to run loss=triplet",
    ),
    # An object the method builds removed: a plain triplet run was recorded as the kNN filter.
    (
        ["method=reference/knn_filter", "data.filter=null"],
        r"method=reference/knn_filter builds data.filter \(KnnLabelFilter\), but data.filter=null was given, "
        r"which would record a run without it as reference/knn_filter",
    ),
    # The method's miner keys (miner.negatives) were blamed on the miner given in its place.
    (
        ["method=levi2021/triplet_semihard", "miner=multi_similarity"],
        r"method=levi2021/triplet_semihard is miner=random_positive, but miner=multi_similarity was given",
    ),
    (["seed=99999999999999999999"], r"seed=99999999999999999999 is outside \[0, 4294967296\); e.g. seed=0"),
    (
        ["scheduler=multistep", "scheduler.milestones=[abc]"],
        r"scheduler.milestones=\[abc\]: abc is not an integer; give one, e.g. scheduler.milestones=\[30\]",
    ),
    (
        ["scheduler=multistep", "scheduler.milestones=10"],
        r"scheduler.milestones=10 is not a list; give one, e.g. scheduler.milestones=\[30\]",
    ),
    (["scheduler=cosine", "scheduler.T_max=0"], r"scheduler.T_max=0 must be >= 1; e.g. scheduler.T_max=20"),
    (
        ["+optimizer.betas=[0.9]"],
        r"optimizer.betas=\[0.9\] needs 2 values; e.g. optimizer.betas=\[0.9,0.999\]",
    ),
    (
        ["metrics.recall_ks=[0]"],
        r"metrics.recall_ks=\[0\]: 0 must be >= 1; e.g. metrics.recall_ks=\[1,2,4,8\]",
    ),
    (["metrics.recall_ks=[-1]"], r"metrics.recall_ks=\[-1\]: -1 must be >= 1"),
    (["metrics.recall_ks=abc"], r"metrics.recall_ks=abc is not a list; give one, e.g. metrics.recall_ks="),
    (
        ["metrics.recall_ks=[100000]"],
        r"metrics.recall_ks=\[100000\]: Recall@100000 needs more than the \d+ neighbours each test query has",
    ),
    (
        ["metrics.recall_ks=[]"],
        r"optimized_metric=val/recall@1 is not a metric this run logs \(it logs: val/map@r, val/nmi\)",
    ),
    (
        ["optimized_metric=val/recal@1"],
        r"optimized_metric=val/recal@1 is not a metric .* did you mean optimized_metric=val/recall@1\?",
    ),
    (
        ["callbacks.early_stop={_target_: pytorch_lightning.callbacks.EarlyStopping, monitor: val/nope}"],
        r"callbacks.early_stop.monitor=val/nope is not a metric this run logs \(it logs: val/recall@1",
    ),
    # Issue 45: a joint constraint names the key given, with the fix for either.
    (
        ["noise=small_cluster_kmeans", "noise.backbone=null"],
        r"noise.backbone=null, but noise.clusters=kmeans clusters a backbone's features; give a backbone "
        r"\(as the small_cluster_kmeans noise config does: noise.backbone=\$\{backbone\}, the run's\), or "
        r"noise.clusters=random$",
    ),
    # Issue 45: a node given whole with another class keeps the config's keys (Hydra merges it).
    (
        [
            "loss=adapted_triplet",
            "loss.distance={_target_: pytorch_metric_learning.distances.DotProductSimilarity}",
        ],
        r"loss.distance={_target_: pytorch_metric_learning.distances.DotProductSimilarity} is merged into "
        r"the config's loss.distance node, which keeps its normalize_embeddings=true, p=2, power=2: .*; "
        r"give them in the node to keep them, or replace the node: ~loss.distance '\+loss.distance=",
    ),
    (
        ["+callbacks.foo={_target_: collections.OrderedDict}"],
        r"callbacks.foo builds a collections.OrderedDict, which is no Lightning callback; give a "
        r"pytorch_lightning.callbacks.Callback's class as callbacks.foo._target_, or drop callbacks.foo$",
    ),
    (
        ["callbacks.early_stop={monitor: val/recall@1}"],
        r"callbacks.early_stop={monitor: val/recall@1} has no _target_, the class it builds; give it, e.g. ",
    ),
    (
        ["callbacks.checkpoint.dirpath=/proc/noisydml"],
        r"callbacks.checkpoint.dirpath=/proc/noisydml cannot be written \(.*\); choose a writable folder",
    ),
    pytest.param(
        ["trainer.accelerator=gpu"],
        r"trainer.accelerator=gpu but torch finds no GPU on this machine; use trainer.accelerator=cpu",
        marks=NO_GPU,
    ),
    pytest.param(
        ["trainer.devices=4096"], r"trainer.devices=4096: this machine has \d+ CPU cores", marks=NO_GPU
    ),
    (["trainer.devices=0"], r"trainer.devices=0: this machine has .*; use trainer.devices=1"),
    pytest.param(
        ["trainer.precision=16-mixed"],
        r"trainer.precision=16-mixed needs a GPU: on the CPU Lightning would run bf16-mixed instead",
        marks=NO_GPU,
    ),
    (
        ["noise=from_file"],
        r"noise.root \(noise=from_file\) cannot be resolved: .*dataset.root",
    ),
    (
        ["noise=from_file", "noise.root=/nonexistent"],
        r"noise.path \(noise=from_file\) is mandatory and has no value \(\?\?\? in its config\); set it",
    ),
    (["dataset=cub", "paths.data_dir=/nonexistent"], r"cub: images.txt not found under dataset.root"),
    (
        ["dataset=features", "dataset.root={data}/no_test", "backbone.trunk.in_features=8"],
        r"the data set PrecomputedFeatures at dataset.root=.*/no_test: its test split is empty \(its folder, "
        r"file or split keys leave it no sample\); check dataset.root and the split keys",
    ),
    (
        ["dataset=features", "dataset.root={data}/nan", "backbone.trunk.in_features=8"],
        r"features.npz has 2 rows of NaN or infinite features \(rows 3, 7\); fix or drop them",
    ),
    (
        ["dataset=features", "dataset.root={data}/corrupt"],
        r"corrupt/features.npz cannot be read as an .npz file .*; write it again with np.savez",
    ),
    (
        ["dataset=features", "data.P=4", "data.K=2", "data.val_fraction=0", "dataset.root={data}/good"],
        r"backbone=mlp cannot take the data's inputs of shape \(8,\) .*backbone.trunk.in_features",
    ),
    (
        ["backbone=cnn1d"],
        r"backbone=cnn1d cannot take the data's inputs of shape \(1, 8, 8\) .*; its first convolution is "
        r"1-d, the inputs 2-d; choose a backbone for 2-d inputs$",
    ),
    (
        ["dataset=features", "dataset.root={data}/one_class", "backbone.trunk.in_features=8"],
        r"dataset.root=.*/one_class: the training rows of features.npz \(split 'train' or 0\) are all of one "
        r"class \(label 0\); metric learning needs at least 2 training classes \(the P x K sampler draws "
        r"data.P of them\): save the rows of more classes in it, or point dataset.root at another",
    ),
    (
        [
            "dataset.split=disjoint",
            "dataset.train_digits=[0,2,4,6,8,10]",
            "dataset.label_map=[0,1,0,1,0,1,0,1,0,1]",
        ],
        r"dataset.train_digits=\[0,2,4,6,8,10\]: dataset=digits has no digit 10 \(its classes are 0 to 9\); "
        r"e.g. dataset.train_digits=\[0,1,2,3,4,5\]",
    ),
    (
        ["dataset=mnist5k", "dataset.split=disjoint", "dataset.train_digits=[6,7,8,9,10,11]"],
        r"dataset.train_digits=\[6,7,8,9,10,11\]: dataset=mnist5k has no digits 10, 11 "
        r"\(its classes are 0 to 9\)",
    ),
    (
        [
            "dataset.split=disjoint",
            "dataset.train_digits=[0,2,4,6,8]",
            "dataset.label_map=[0,1,0,1,0,1,0,1,0,1]",
        ],
        r"dataset.train_digits=\[0,2,4,6,8\] under dataset.label_map=\[0,1,0,1,0,1,0,1,0,1\] trains on one "
        r"label; metric learning needs at least 2 training classes .*; "
        r"e.g. dataset.train_digits=\[0,1,2,3,4,5\]",
    ),
    (
        ["dataset.split=disjoint", "dataset.train_digits=[0,1,2,3,4,5,6,7,8,9]"],
        r"dataset.train_digits=\[0,1,2,3,4,5,6,7,8,9\] with dataset.split=disjoint leaves no digit to "
        r"test on",
    ),
    # Issue 37, rule 1: a run's identity is what ran.
    (
        ["dataset.train_digits=[0,1]"],
        r"dataset.train_digits=\[0,1\] is ignored by dataset.split=same_classes \(only "
        r"dataset.split=disjoint reads it\); drop dataset.train_digits, or set dataset.split=disjoint",
    ),
    (
        ["dataset=mnist5k", "dataset.split=disjoint", "dataset.test_fraction=0.2"],
        r"dataset.test_fraction=0.2 is ignored by dataset.split=disjoint",
    ),
    (
        ["experiment=digits/levi2021_even_odd", "dataset.label_map=null"],
        r"experiment=digits/levi2021_even_odd is dataset.label_map=\[0,1,0,1,0,1,0,1,0,1\], but "
        r"dataset.label_map=null was given, which would file another run under the experiment's name "
        r"digits_levi2021 and figure levi2021/digits; drop dataset.label_map=null to run the experiment, or "
        r"label the run as your own with name=<name> report.figure=<paper>/<what>",
    ),
    (
        ["experiment=digits/le2019_noise", "dataset=mnist5k"],
        r"experiment=digits/le2019_noise is dataset=digits, but dataset=mnist5k was given, which would file "
        r"another run under the experiment's name digits_le2019 and figure le2019/digits",
    ),
    (
        ["experiment=digits/levi2021_even_odd", "noise=uniform"],
        r"experiment=digits/levi2021_even_odd is noise=none, but noise=uniform was given",
    ),
    (
        ["experiment=digits/le2019_noise", "noise.seed=3"],
        r"experiment=digits/le2019_noise draws noise.seed from seed \(\$\{seed\}\), but noise.seed=3 "
        r"was given",
    ),
    (
        ["callbacks=knn_detection", "noise.rate=0.2", "callbacks.knn_detection.k=5000"],
        r"callbacks.knn_detection.k=5000: the kNN label vote reads each training sample's k nearest of the "
        r"\d+ others, so it would log nothing",
    ),
    (
        ["callbacks=knn_detection", "+callbacks.knn_detection.batch_size=0"],
        r"callbacks.knn_detection.batch_size=0 must be >= 1",
    ),
    (
        ["dataset=mnist1d", "backbone=cnn1d", "dataset.padding=[60,36]"],
        r"dataset.padding=\[60,36\]: each template is padded with low to high zeros, so low may not "
        r"exceed high",
    ),
    (
        ["dataset=mnist1d", "backbone=cnn1d", "dataset.generation_seed=-1"],
        r"dataset.generation_seed=-1 is outside \[0, 4294967296\)",
    ),
    (
        ["backbone=identity"],
        r"backbone=identity has nothing to train, so loss=triplet and miner=\w+ never run: the run scores "
        r"its inputs",
    ),
    # Every key an experiment's file composes is what the run is, but the seed and where and how it runs.
    (
        ["experiment=noisy_dml/digits_symmetric", "noise.rate=0.5", "seed=0", "optimizer.lr=0.01"],
        r"experiment=noisy_dml/digits_symmetric is optimizer.lr=0.001, but optimizer.lr=0.01 was given, "
        r"which would file another run under the experiment's name noisy_dml_digits_symmetric and figure "
        r"noisy_dml/digits_symmetric; drop optimizer.lr=0.01 to run the experiment, or label the run as "
        r"your own with name=<name> report.figure=<paper>/<what>",
    ),
    # A part's required key removed: Python's TypeError, raised from inside Hydra's instantiate.
    (
        ["~noise.rate"],
        r"noise.rate is required by noisydml.noise.UniformNoise, but the config sets none \(was it removed "
        r"with ~noise.rate\?\); give it, e.g. \+noise.rate=<value>",
    ),
    # Values a library takes without a word: threads beyond the cores only contend; Lightning reads any
    # negative number of sanity steps as all of them; a checkpoint path to nothing failed after the data.
    (["cpu_threads=999"], r"cpu_threads=999: this process may use \d+ CPU cores, and threads beyond them"),
    (
        ["trainer.num_sanity_val_steps=-5"],
        r"trainer.num_sanity_val_steps=-5 must be >= -1; e.g. trainer.num_sanity_val_steps=0",
    ),
    (["ckpt_path=/nonexistent.ckpt"], r"ckpt_path=/nonexistent.ckpt is not a file; give a checkpoint"),
    # One class left of ten: the sampler's fix, data.P=1, was itself refused.
    (
        ["noise=small_cluster", "noise.rate=0.9"],
        r"noise.rate=0.9 dissolves 9 of the 10 training classes and leaves one, which every label would be; "
        r"metric learning needs 2 classes: lower noise.rate",
    ),
    (
        ["ckpt_path={data}/good/features.npz"],
        r"ckpt_path=.*/features.npz is not a checkpoint torch can read \(.*\); give a checkpoint a run wrote",
    ),
    # torch's own advice, to load a file with weights_only=False, runs whatever it holds.
    (
        ["ckpt_path={finished}/results.json"],
        r"ckpt_path=.*/results.json is not a checkpoint torch can read \(it is no file of tensors torch.save "
        r"wrote\); give a checkpoint a run wrote",
    ),
    (
        ["logger=wandb", "logger.wandb.project=a/b"],
        r"logger.wandb.project=a/b is refused by W&B \(Invalid project name 'a/b'.*\); give a name without",
    ),
    # Rule 2: a run writes only into its own folder ({finished}: another run's, finished).
    (
        [
            "seed=1",
            "callbacks.checkpoint.dirpath={finished}/checkpoints",
            "callbacks.select.dirpath={finished}/checkpoints",
        ],
        r"callbacks.checkpoint.dirpath=.*/finished/checkpoints is outside the run's folder .*: every "
        r"folder a run writes lies in its own .*; "
        r"use callbacks.checkpoint.dirpath=\$\{paths.output_dir\}/<folder>",
    ),
    (
        ["callbacks.checkpoint.dirpath=${paths.output_dir}/.."],
        r"callbacks.checkpoint.dirpath=.*/run/.. is above the run's folder",
    ),
    (
        ["logger=[csv,tensorboard]", "logger.tensorboard.save_dir={finished}"],
        r"logger.tensorboard.save_dir=.*/finished is outside the run's folder",
    ),
    (
        ["seed=1", "hydra.run.dir={finished}/checkpoints"],
        r"hydra.run.dir=.*/finished/checkpoints is inside the run folder .*/finished, whose files it would "
        r"mix with",
    ),
    (
        ["seed=1", "hydra.run.dir={finished}/nested"],
        r"hydra.run.dir=.*/finished/nested is inside the run folder",
    ),
    (["hydra.run.dir={finished}/.."], r"hydra.run.dir=.* holds the run .*/finished below it"),
    (
        ["hydra.run.dir={data}"],
        r"hydra.run.dir=.*/features is no run's folder but holds corrupt, good",
    ),
    # Rule 3: only a real result is finished.
    (
        ["+trainer.limit_train_batches=0"],
        r"trainer.limit_train_batches=0 trains no step: the untrained network would be tested and recorded",
    ),
    (["trainer.max_epochs=0"], r"trainer.max_epochs=0 trains no step, but the backbone has weights to train"),
    (
        ["+trainer.limit_val_batches=0"],
        r"trainer.limit_val_batches=0 runs no validation, so optimized_metric=val/recall@1 would select "
        r"nothing .*; drop it, or train without a validation split: data.val_fraction=0",
    ),
    (
        ["optimized_metric=test/recall@1"],
        r"optimized_metric=test/recall@1 is a test-split metric: .* tunes on the test split; choose one of: "
        r"val/recall@1, .*; e.g. optimized_metric=val/recall@1",
    ),
    (["optimized_metric=train/loss"], r"optimized_metric=train/loss is a training metric"),
    (
        ["data.val_fraction=0", "optimized_metric=test_epoch/recall@1"],
        r"optimized_metric=test_epoch/recall@1 is a test-split metric",
    ),
    (
        ["callbacks.early_stop={_target_: pytorch_lightning.callbacks.EarlyStopping, monitor: test/nmi}"],
        r"callbacks.early_stop.monitor=test/nmi watches the test split",
    ),
    # Rule 5: degenerate parameters, with the range.
    (
        ["loss=contrastive", "loss.neg_margin=-1"],
        r"loss.neg_margin=-1 must be >= 0 \(a negative margin is met by every pair, so no pair is ever "
        r"penalised\); e.g. loss.neg_margin=1",
    ),
    (
        ["loss=contrastive_cosine", "loss.neg_margin=-2"],
        r"loss.neg_margin=-2 is outside \[-1, 1\] \(a cosine",
    ),
    (["loss=multi_similarity", "loss.alpha=-2"], r"loss.alpha=-2 must be > 0 .*; e.g. loss.alpha=2"),
    (["loss.distance.p=0"], r"loss.distance.p=0 must be >= 1 \(an Lp norm needs p >= 1"),
    (["miner.distance.power=0"], r"miner.distance.power=0 must be > 0"),
    (
        ["miner=multi_similarity", "miner.epsilon=-0.1"],
        r"miner.epsilon=-0.1 must be >= 0 \(a negative epsilon",
    ),
    (["miner=distance_weighted", "miner.cutoff=-0.5"], r"miner.cutoff=-0.5 must be >= 0"),
    (["scheduler=cosine", "+scheduler.eta_min=-1"], r"scheduler.eta_min=-1 must be >= 0 \(the learning rate"),
    (["loss=marginal", "loss.alpha=-0.2"], r"loss.alpha=-0.2 must be >= 0"),
    (["loss=margin", "loss.nu=-1"], r"loss.nu=-1 must be >= 0"),
    (
        ["loss=fastap", "loss.num_bins=2.5"],
        r"loss.num_bins=2.5 is not an integer; give one, e.g. loss.num_bins=10",
    ),
    (
        ["method=prism/mcl", "loss.margin=1.5"],
        r"loss.margin=1.5 is outside \[-1, 1\] \(a cosine similarity .*\); e.g. loss.margin=0.5",
    ),
    # Issue 45: the selection's direction, and the Trainer's values against each other and the data's length.
    (
        ["callbacks.select.mode=min"],
        r"callbacks.select.mode=min on val/recall@1, which improves as it rises, reads the worst epoch as "
        r"the best; use callbacks.select.mode=max",
    ),
    (
        ["callbacks=early_stopping", "callbacks.early_stopping.mode=min"],
        r"callbacks.early_stopping.mode=min on val/recall@1, which improves as it rises",
    ),
    (
        ["+trainer.val_check_interval=1000"],
        r"trainer.val_check_interval=1000 is more batches than an epoch's [0-9]+, so no epoch would validate",
    ),
    (
        ["+trainer.val_check_interval=0.5"],
        r"trainer.val_check_interval=0.5 validates within an epoch, but a run that holds out a validation "
        r"split selects, records and tests whole epochs; drop it",
    ),
    (["+trainer.limit_val_batches=0.01"], r"trainer.limit_val_batches=0.01 of 1 batch rounds to none"),
    (["+trainer.accumulate_grad_batches=0"], r"trainer.accumulate_grad_batches=0 must be >= 1"),
    (
        ["callbacks=early_stopping", "callbacks.early_stopping.patience=-1"],
        r"callbacks.early_stopping.patience=-1 must be >= 0 \(a negative patience stops .*\); e.g. "
        r"callbacks.early_stopping.patience=3",
    ),
    (
        ["trainer.enable_checkpointing=false"],
        r"trainer.enable_checkpointing=False is not an option; use one of: True \(a run checkpoints to test",
    ),
    (
        ["+trainer.gradient_clip_val=-1"],
        r"trainer.gradient_clip_val=-1 must be >= 0 \(Lightning skips clipping at a negative value",
    ),
    (
        ["+trainer.min_epochs=30", "trainer.max_epochs=2"],
        r"trainer.min_epochs=30 is above trainer.max_epochs=2, so the run cannot do what both say",
    ),
    # Joint constraints: two parameters of one class whose order the objective needs.
    (
        ["loss=contrastive", "loss.pos_margin=2"],
        r"loss.pos_margin=2 is above loss.neg_margin=1.0 \(a pair between the margins would be pulled in "
        r".*\); lower loss.pos_margin or raise loss.neg_margin",
    ),
    (
        ["loss=contrastive_cosine", "loss.pos_margin=0.1", "loss.neg_margin=0.9"],
        r"loss.neg_margin=0.9 is above loss.pos_margin=0.1 ",
    ),
    (
        ["miner=distance_weighted", "miner.cutoff=1.5"],
        r"miner.cutoff=1.5 is at or above miner.nonzero_loss_cutoff=1.4 \(no negative lies between them",
    ),
    (
        ["miner=easy_positive", "miner.negatives=distance_weighted", "miner.cutoff=2"],
        r"miner.nonzero_loss_cutoff=1.4 is not above miner.cutoff=2: no negative lies between them",
    ),
    # Issue 37, rule 4: every key checked by its consumer before the first step.
    (
        ["+optimizer.eps=-1"],
        r"optimizer.eps=-1 is refused by torch.optim.Adam \(Invalid epsilon value: -1\); give a value it "
        r"takes, e.g. its default, optimizer.eps=1e-08",
    ),
    (
        ["optimizer=rmsprop", "+optimizer.alpha=-1"],
        r"optimizer.alpha=-1 is refused by torch.optim.RMSprop \(Invalid alpha value: -1\); "
        r".*optimizer.alpha=0.99",
    ),
    (
        ["optimizer=sgd", "+optimizer.nesterov=true", "optimizer.momentum=0"],
        r"optimizer.nesterov=true is refused by torch.optim.SGD \(Nesterov momentum requires a momentum and "
        r"zero dampening\)",
    ),
    pytest.param(
        ["trainer.devices=-1"],
        r"trainer.devices=-1 is refused by pytorch_lightning.Trainer \(`devices` selected with "
        r"`CPUAccelerator` should be an int > 0.\); give a value it takes, e.g. its default, "
        r"trainer.devices=auto",
        marks=NO_GPU,
    ),
    pytest.param(
        ["trainer.devices=[0]"],
        r"trainer.devices=\[0\] is refused by pytorch_lightning.Trainer \(`devices` selected with",
        marks=NO_GPU,
    ),
    pytest.param(
        ["trainer.accelerator=mps"],
        r"trainer.accelerator=mps is refused by pytorch_lightning.Trainer \(`MPSAccelerator` can not run on "
        r"your system",
        marks=pytest.mark.skipif(torch.backends.mps.is_available(), reason="valid on a Mac"),
    ),
    pytest.param(
        ["+trainer.strategy=deepspeed"],
        r"trainer.strategy=deepspeed is refused by pytorch_lightning.Trainer \(To use the "
        r"`DeepSpeedStrategy`, you must have DeepSpeed installed",
        marks=pytest.mark.skipif(importlib.util.find_spec("deepspeed") is not None, reason="installed"),
    ),
    (
        ["+trainer.gradient_clip_algorithm=foo"],
        r"trainer.gradient_clip_algorithm=foo is refused by pytorch_lightning.Trainer "
        r"\(`gradient_clip_algorithm` foo is invalid. Allowed algorithms: \['value', 'norm'\].\)",
    ),
    (
        ["trainer.num_nodes=2"],
        r"trainer.num_nodes=2, but no cluster is there to start the other nodes .*; run it with "
        r"hydra/launcher=slurm \(or torchrun on each node\), or use trainer.num_nodes=1",
    ),
    pytest.param(
        ["trainer.precision=16-true"],
        r"trainer.precision=16-true: the loss is nan (on the first batch|after the first step) in this "
        r"precision .*; use "
        r"trainer.precision=32-true, or bf16-mixed",
        marks=NO_GPU,
    ),
    (
        ["dataset.split_seed=-1"],
        r"dataset.split_seed=-1 is outside \[0, 4294967296\); e.g. dataset.split_seed=0",
    ),
    (
        ["dataset.test_fraction=0.995"],
        r"dataset.test_fraction=0.995 leaves too few of the 1797 samples on one side for a split of each of "
        r"the 10 classes \(.*\); e.g. dataset.test_fraction=0.3",
    ),
    (
        ["metrics.knn_accuracy_k=100000"],
        r"metrics.knn_accuracy_k=100000: the k-NN vote classifies a test item by its k nearest of the \d+ "
        r"training samples; use k up to \d+, e.g. metrics.knn_accuracy_k=5",
    ),
    (
        ["metrics.nmi_plus_factor=-1"],
        r"metrics.nmi_plus_factor=-1 must be >= 1; e.g. metrics.nmi_plus_factor=2",
    ),
    (
        ["backbone.normalize=maybe"],
        r"backbone.normalize=maybe is not a boolean; give true or false, e.g. backbone.normalize=true",
    ),
    (["loss.swap=maybe"], r"loss.swap=maybe is not a boolean; give true or false, e.g. loss.swap=true"),
    (
        ["trainer.deterministic=maybe"],
        r"trainer.deterministic=maybe is not a boolean; give true or false \(or warn\)",
    ),
    (["data.pin_memory=maybe"], r"data.pin_memory=maybe is not a boolean; give true or false"),
    (
        ["tags=foo"],
        r"tags=foo is not a list; give one, e.g. tags=\[foo\] \(unbracketed, a string would be read",
    ),
    (
        ["logger.csv.save_dir=/proc/noisydml"],
        r"logger.csv.save_dir=/proc/noisydml cannot be written \(.*\); choose a writable folder with "
        r"logger.csv.save_dir=...",
    ),
    (
        ["+logger.csv.flush_logs_every_n_steps=0"],
        r"logger.csv.flush_logs_every_n_steps=0 must be >= 1; e.g. logger.csv.flush_logs_every_n_steps=100",
    ),
    (
        ["NOISYDML_DATA_DIR=/proc/nodir", "noise=instance_dependent"],
        r"noise.cache_dir=/proc/nodir/cache cannot be written \(.*\); choose a writable folder with "
        r"noise.cache_dir=..., or point NOISYDML_DATA_DIR \(now /proc/nodir, which holds it\) at a "
        r"writable one$",
    ),
    (
        ["NOISYDML_DATA_DIR=/proc/nodir", "dataset=extracted"],
        r"dataset.cache_dir=/proc/nodir/cache cannot be written \(.*\); choose a writable folder with "
        r"dataset.cache_dir=..., or point NOISYDML_DATA_DIR \(now /proc/nodir, which holds it\)",
    ),
    (
        ["NOISYDML_DATA_DIR=/proc/nodir", "dataset=mnist", "dataset.download=true"],
        r"dataset.root=/proc/nodir/mnist cannot be written \(.*\); choose a writable folder with "
        r"dataset.root=..., or point NOISYDML_DATA_DIR \(now /proc/nodir, which holds it\)",
    ),
    (
        ["data.filter={keep: true}"],
        r"data.filter={keep: true} has no _target_, the class it builds; give it, e.g. "
        r"'data.filter={_target_: noisydml.data.knn_filter.KnnLabelFilter}'",
    ),
    (
        ["method=reference/knn_filter", "data.filter.k=0"],
        r"data.filter.k=0 must be >= 1; e.g. data.filter.k=10 neighbours",
    ),
    (
        ["callbacks=knn_detection", "callbacks.knn_detection.k=0"],
        r"callbacks.knn_detection.k=0 must be >= 1; e.g. callbacks.knn_detection.k=10 neighbours",
    ),
    (
        ["method=reference/knn_filter", "data.filter.min_per_class=-1"],
        r"data.filter.min_per_class=-1 must be >= 0; e.g. data.filter.min_per_class=\$\{data.K\} \(what a "
        r"batch draws from a class\), or 0 for no floor",
    ),
    (
        ["dataset=features", "dataset.root={data}/named", "backbone.trunk.in_features=8"],
        r"features: .*/named/features.npz holds labels of type <U\d+ \('a', 'a', 'a', ...\); labels are "
        r"class numbers: save them as integers",
    ),
    # Issue 45: a key nothing reads, and a value a library refuses only once the run has started.
    (
        ["+loss.triplets_per_anchor=5"],
        r"loss.triplets_per_anchor=5 is read only when the loss draws its own tuples, but the miner "
        r"\(RandomSemihardMiner\) supplies them and TripletMarginLoss then ignores it; drop "
        r"loss.triplets_per_anchor, or use miner=none to let the loss draw them",
    ),
    (
        ["loss=margin", "miner=distance_weighted", "+loss.triplets_per_anchor=10"],
        r"loss.triplets_per_anchor=10 is read only .*\(DistanceWeightedMiner\) .*MarginLoss then ignores",
    ),
    (
        ["module.loss_lr=0.01"],
        r"module.loss_lr=0.01 is the learning rate of the loss's own parameters, but the loss "
        r"\(TripletMarginLoss\) has none, "
        r"so nothing reads it; drop module.loss_lr",
    ),
    (
        ["callbacks=early_stopping", "+callbacks.early_stopping.check_on_train_epoch_end=true"],
        r"callbacks.early_stopping.check_on_train_epoch_end=true reads val/recall@1 at each training "
        r"epoch's end, but validation runs every 5 epochs \(trainer.check_val_every_n_epoch=5\), so it "
        r"would read a metric not yet logged, or a stale one; drop "
        r"callbacks.early_stopping.check_on_train_epoch_end",
    ),
    (
        ["logger=wandb", "logger.wandb.id=a/b"],
        r"logger.wandb.id=a/b is refused by W&B \(Run ID cannot contain the characters: .*\); give an id "
        r"of letters, digits, '-' and '_', e.g. logger.wandb.id=run_1, or logger.wandb.id=null",
    ),
    (
        ["WANDB_MODE=disabeld", "logger=wandb"],
        r"WANDB_MODE=disabeld is not a mode W&B takes \(one of: online, offline, .*\); e.g. "
        r"WANDB_MODE=disabled, or unset WANDB_MODE",
    ),
    pytest.param(
        ["logger=mlflow", "logger.mlflow.tracking_uri=file:./mlruns"],
        r"logger.mlflow.tracking_uri=file:./mlruns is a file store, which MLflow \S+ refuses .*; use one, "
        r"e.g. logger.mlflow.tracking_uri=sqlite:///outputs/mlflow.db, or set the environment variable "
        r"MLFLOW_ALLOW_FILE_STORE to true",
        marks=pytest.mark.skipif(not _refuses_file_store(), reason="this MLflow takes a file store"),
    ),
    pytest.param(
        ["logger=mlflow", "logger.mlflow.experiment_name=''"],
        r"logger.mlflow.experiment_name='' is refused by MLflow \(Invalid experiment name: ''\); give a "
        r"name, e.g. logger.mlflow.experiment_name=noisydml",
        marks=pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="MLflow not installed"),
    ),
    # Port 9 (discard) has no server: MLflow's client retried it for minutes before the run failed.
    pytest.param(
        ["MLFLOW_TRACKING_URI=http://127.0.0.1:9", "logger=mlflow"],
        r"logger.mlflow.tracking_uri=http://127.0.0.1:9 \(the environment variable MLFLOW_TRACKING_URI\) "
        r"does not answer \(.*\), and MLflow would retry it for minutes while the run waits; start the "
        r"server there, set MLFLOW_TRACKING_URI to one that answers, or unset it",
        marks=pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="MLflow not installed"),
    ),
]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """Feature files of 8-d rows, 4 classes x 6: good, with two NaN rows, cut short, and with one class."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(24, 8)).astype(np.float32)
    labels, split = (
        np.repeat(np.arange(4), 6),
        np.tile(["train", "train", "train", "test", "test", "test"], 4),
    )
    for name in ("good", "nan", "corrupt", "one_class", "named", "no_test"):
        (tmp_path / "features" / name).mkdir(parents=True)
    np.savez(tmp_path / "features" / "good" / "features.npz", features=features, labels=labels, split=split)
    one = tmp_path / "features" / "one_class" / "features.npz"
    np.savez(one, features=features, labels=np.zeros_like(labels), split=split)
    no_test = tmp_path / "features" / "no_test" / "features.npz"
    np.savez(no_test, features=features, labels=labels, split=np.full(len(labels), "train"))
    named = tmp_path / "features" / "named" / "features.npz"
    np.savez(named, features=features, labels=np.array(list("abcd")).repeat(6), split=split)
    features[[3, 7]] = np.nan
    np.savez(tmp_path / "features" / "nan" / "features.npz", features=features, labels=labels, split=split)
    good = (tmp_path / "features" / "good" / "features.npz").read_bytes()
    (tmp_path / "features" / "corrupt" / "features.npz").write_bytes(good[: len(good) // 2])
    return tmp_path / "features"


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    """Another run's folder, finished: its record, Hydra's and its checkpoints."""
    run = tmp_path / "finished"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("[]\n")
    (run / "checkpoints").mkdir()
    for name in ("best.ckpt", "last.ckpt"):
        (run / "checkpoints" / name).write_bytes(name.encode())
    (run / "results.json").write_text(json.dumps({"status": "finished", "metrics": {"test/recall@1": 0.9}}))
    return run


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()} | {
        str(p.relative_to(folder)): b"" for p in folder.rglob("*") if p.is_dir()
    }


@pytest.mark.parametrize(
    ("overrides", "message"), BAD_INPUTS, ids=lambda v: " ".join(v) if isinstance(v, list) else ""
)
def test_bad_input_is_refused_before_training_with_key_value_and_fix(
    compose_config, data, finished, monkeypatch, overrides, message
):
    given = [o.replace("{data}", str(data)).replace("{finished}", str(finished)) for o in overrides]
    # An environment variable (WANDB_MODE=...) is set for the run, as the shell would.
    for variable in [o for o in given if ENVIRONMENT.match(o)]:
        monkeypatch.setenv(*variable.split("=", 1))
    given = [o for o in given if not ENVIRONMENT.match(o)]
    run_dir = [o.split("=", 1)[1] for o in given if o.startswith("hydra.run.dir=")]
    # An experiment's run shortened by conftest's TINY would be another run than the experiment's.
    tiny = not any(o.startswith("experiment=") for o in given)
    cfg = compose_config(*(o for o in given if not o.startswith("hydra.run.dir=")), tiny=tiny)
    if run_dir:
        with open_dict(cfg):
            cfg.paths.output_dir = run_dir[0]
    before = _files(finished)
    with pytest.raises(BadInput, match=message):
        train(cfg)
    assert _files(finished) == before, "another run's folder was touched"
    if not run_dir:
        assert_nothing_trained(cfg)


def _documented_inputs() -> list[tuple[str, ...]]:
    """The input column of docs/reference/bad-input.md's table, each row's overrides in order."""
    page = (Path(__file__).parents[1] / "docs" / "reference" / "bad-input.md").read_text()
    rows = re.findall(r"^\| (`.*?`) \| ", page, re.M)
    return [tuple(re.findall(r"`([^`]+)`", row)) for row in rows]


def test_the_documented_bad_inputs_are_the_ones_tested():
    tested = []
    for case in BAD_INPUTS:
        overrides = case.values[0] if hasattr(case, "values") else case[0]
        tested.append(
            tuple(o.replace("{data}", "<data>").replace("{finished}", "<finished run>") for o in overrides)
        )
    assert len(tested) >= 30
    documented = _documented_inputs()
    assert [t for t in tested if t not in documented] == [], "tested, not in docs/reference/bad-input.md"
    assert [d for d in documented if d not in tested and d[0] != "input"] == [], "documented, not tested"


def test_a_layout_missing_a_file_names_it_and_the_layout(compose_config, tmp_path):
    root = make_cub(tmp_path / "data")
    (root / "image_class_labels.txt").unlink()
    cfg = compose_config("dataset=cub", f"paths.data_dir={tmp_path / 'data'}")
    with pytest.raises(BadInput, match=r"image_class_labels.txt not found[\s\S]*Expected layout"):
        train(cfg)
    assert_nothing_trained(cfg)


def test_an_unreadable_image_is_named_before_training(compose_config, tmp_path):
    root = make_cub(tmp_path / "data")
    broken = sorted((root / "images").rglob("*.jpg"))[0]
    broken.write_bytes(b"not a jpeg")
    cfg = compose_config("dataset=cub", f"paths.data_dir={tmp_path / 'data'}")
    with pytest.raises(BadInput, match=rf"cannot read image {broken}.*dataset.skip_unreadable=true"):
        train(cfg)
    assert_nothing_trained(cfg)


class NaNAfter(TripletMarginLoss):
    """The triplet loss until step 2 of training, then NaN: a run that diverges. Training steps are
    counted (the pre-flight batch runs without gradients)."""

    calls = 0

    def forward(self, *args, **kwargs):
        NaNAfter.calls += torch.is_grad_enabled()
        loss = super().forward(*args, **kwargs)
        return loss * torch.nan if NaNAfter.calls > 4 else loss


@pytest.mark.slow
def test_a_nan_loss_stops_the_run_naming_the_step_and_keeps_the_last_checkpoint(compose_config):
    NaNAfter.calls = 0
    cfg = compose_config(
        "loss._target_=test_bad_input.NaNAfter", "trainer.max_epochs=3", "data.batches_per_epoch=2"
    )
    # One line, printed by Hydra without the training loop's traceback (a CompactHydraException).
    with pytest.raises(Diverged, match=r"loss NaNAfter is nan at epoch 3, step 4"):
        train(cfg)
    checkpoint = Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt"
    assert torch.load(checkpoint, weights_only=True)["global_step"] == 4


# Refused by the command line before Hydra starts (no torch is loaded, nothing is written).
CLI_BAD_INPUTS = [
    (
        "loss=tripplet",
        "loss=tripplet is not an option; did you mean loss=triplet? (options: adapted_triplet, ",
    ),
    ("dataset=cubb", "dataset=cubb is not an option; did you mean dataset=cub? (options: "),
    ("miner=semihard", "miner=semihard is not an option; did you mean miner="),
    ("noise=uniform,unifrom", "noise=unifrom is not an option; did you mean noise=uniform?"),
    (
        "experiment=le2019/fig2_cb",
        "experiment=le2019/fig2_cb is not an option; did you mean experiment=le2019/fig2_cub? (options: the ",
    ),
    ("experiment=nope", "experiment=nope is not an option (options: the "),
    ("name=\u00e9", "name=\u00e9 cannot be read (LexerNoViableAltException: name=\u00e9); quote a value"),
    ("name=" + "x" * 300, "is longer than the 255 bytes a folder name may have"),
    ("hydra.run.dir=/proc/noisydml/run", "hydra.run.dir=/proc/noisydml/run cannot be written (No such file"),
    # Issue 37, rule 6: a search is a sweep, with a budget and a direction.
    (
        "hparams_search=rdml_eta",
        "hparams_search=rdml_eta is a search, a study of many runs: run it as a sweep with -m",
    ),
    ("hydra.sweeper.n_trials=0", "hydra.sweeper.n_trials=0 is not a number of trials; give one >= 1"),
    (
        "hydra.sweeper.params.loss.eta=choice(1,2)",
        "hydra.sweeper.params.loss.eta=choice(1,2): a search's space is given on the key it searches, not "
        "below hydra.sweeper.params",
    ),
    ("hydra.sweeper.direction=up", "hydra.sweeper.direction=up is not an option; use one of: maximize"),
    # A key the config lacks, without +: Hydra printed its exception over five lines, with no closest key.
    (
        "noise.rat=0.2",
        "noise.rat=0.2: noise has no key rat (noise=uniform); did you mean noise.rate=0.2? (its keys: rate, "
        "seed)",
    ),
    ("nois.rate=0.2", "nois.rate=0.2: the config has no key nois; did you mean noise.rate=0.2? (its keys: "),
    (
        "trainer.max_epoch=3",
        "trainer.max_epoch=3: trainer has no key max_epoch (trainer=default); did you mean ",
    ),
    # A sweep's values without -m: Hydra's refusal named three readings over four lines.
    (
        "noise.rate=0.2,0.3",
        "noise.rate=0.2,0.3 is a sweep over noise.rate's values, which runs only with -m: ",
    ),
    ("seed=range(0,3)", "seed=range(0,3) is a sweep over seed's values, which runs only with -m: "),
    # A deletion of a key the config lacks: Hydra's "Could not delete", with no closest key.
    (
        "~noise.rat",
        "~noise.rat: noise has no key rat (noise=uniform), so there is nothing to delete; did you mean "
        "~noise.rate? (its keys: rate, seed)",
    ),
    # Issue 45: what Hydra's grammar cannot read, with the fix its form calls for (a space splits the
    # arguments, as the shell splits them).
    (
        "optimizer.betas=(0.9,0.99)",
        "optimizer.betas=(0.9,0.99) cannot be read (Error parsing override 'optimizer.betas=(0.9,0.99)'); "
        "Hydra writes a sequence as a list: optimizer.betas=[0.9,0.99]",
    ),
    (
        "metrics.recall_ks=[1, 2, 4]",
        "the shell split 'metrics.recall_ks=[1, 2, 4]' at its spaces; write it without them, "
        "metrics.recall_ks=[1,2,4], or quote the whole argument",
    ),
    ("metrics.recall_ks=[1,", "it opens a list or node it does not close; e.g. metrics.recall_ks=[1]"),
]


@pytest.mark.parametrize(("override", "message"), CLI_BAD_INPUTS, ids=lambda v: v[:40])
def test_unknown_options_and_unusable_folders_are_refused_by_the_cli_in_one_line(tmp_path, override, message):
    exe = Path(sys.executable).with_name("noisydml")
    out = subprocess.run(
        [str(exe), *override.split(" ")], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 1
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize(
    ("experiment", "methods"),
    [
        # The default config lacks the key, whichever method comes first: refused before Hydra starts.
        ([], "prism/prism,le2019/triplet_random_semihard"),
        # The experiment's own method (PRISM) has it, a later job's does not: refused by the sweeper, before
        # the sweep's folder is written (the run labelled as the user's own, which its first job is).
        (
            ["experiment=noisy_dml/digits_symmetric", "name=mine", "report.figure=mine/memory"],
            "prism/prism,le2019/triplet_random_semihard",
        ),
    ],
)
def test_a_sweep_with_a_key_some_job_lacks_is_refused_before_anything_is_written(
    tmp_path, experiment, methods
):
    exe = Path(sys.executable).with_name("noisydml")
    sweep = ["-m", *experiment, f"method={methods}", "loss.memory_size=10", "trainer.max_epochs=1"]
    out = subprocess.run([str(exe), *sweep], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "loss.memory_size=10: loss has no key memory_size (loss=triplet) (its keys: margin, " in out.stderr
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        # A value its class's constructor refuses (the noise model, built early), a later job's.
        (
            ["noise=uniform", "noise.rate=0.2,1.2"],
            "job 1 (noise=uniform noise.rate=1.2), before any job of the sweep ran: "
            "noise.rate=1.2 is outside [0, 1)",
        ),
        # A seed, which jobs otherwise alike share one check for.
        (
            ["seed=0,1,-1"],
            "job 2 (seed=-1), before any job of the sweep ran: seed=-1 is outside [0, 4294967296); e.g. "
            "seed=0",
        ),
        # An experiment's identity: a value off its sweep's.
        (
            ["experiment=digits/levi2021_even_odd", "seed=0", "loss.margin=0.2,0.3"],
            "job 1 (method=levi2021/triplet seed=0 experiment=digits/levi2021_even_odd loss.margin=0.3), "
            "before any job of the sweep ran: experiment=digits/levi2021_even_odd is loss.margin=0.2, but "
            "loss.margin=0.3 was given",
        ),
        # What only the data can refuse, in a job the basic launcher would run here: K against the classes'
        # sizes, a Recall@K against the neighbours, a proxy loss given a triplet miner's tuples.
        (
            ["data.K=2,500"],
            "job 1 (data.K=500), before any job of the sweep ran: data.K=500 is larger than every class of "
            "the training set",
        ),
        (
            ["metrics.recall_ks=[1],[1,1000]"],
            "job 1 (metrics.recall_ks=[1,1000]), before any job of the sweep ran: "
            "metrics.recall_ks=[1,1000]: Recall@1000 needs more than",
        ),
        (
            ["loss=triplet,proxy_anchor", "miner=batch_hard"],
            "job 1 (loss=proxy_anchor miner=batch_hard), before any job of the sweep ran: loss=proxy_anchor "
            "with miner=batch_hard fails on the first batch",
        ),
        # A logger's key its service checks only as its run starts (checked without building the logger).
        (
            ["logger=wandb", "logger.wandb.project=ok,a/b"],
            "job 1 (logger=wandb logger.wandb.project=a/b), before any job of the sweep ran: "
            "logger.wandb.project=a/b is refused by W&B",
        ),
    ],
)
def test_a_sweeps_bad_value_in_any_job_is_refused_before_the_first_job_runs(tmp_path, sweep, message):
    exe = Path(sys.executable).with_name("noisydml")
    # No job trains: each is refused before the first.
    out = subprocess.run([str(exe), "-m", *sweep], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    assert out.stderr.strip().startswith(message), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "outputs").exists()


def test_a_sweep_whose_job_folder_name_no_file_system_takes_is_refused_before_any_job(tmp_path):
    exe = Path(sys.executable).with_name("noisydml")
    long = "x" * 140
    # Each job's folder is named "data.batches_per_epoch=1,name=...,tags=[...],trainer.max_epochs=1".
    sweep = ["-m", f"name={long}", f"tags=[{long}]", "trainer.max_epochs=1", "data.batches_per_epoch=1"]
    out = subprocess.run([str(exe), *sweep], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "a sweep job's folder is named by its overrides, and the longest would be 339 bytes, more than the "
        "255 a folder name may have; name the job folders by number with "
        "'hydra.sweep.subdir=${hydra.job.num}', or shorten the overrides"
    )
    assert not (tmp_path / "outputs").exists()


def _report(*args: str) -> str:
    from noisydml.report.cli import main

    with pytest.raises(SystemExit) as stopped:
        main([*args, "--no-wandb"])
    return str(stopped.value.code)


def _dashboard(*args: str) -> str:
    from noisydml.dashboard.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(list(args))
    return str(stopped.value.code)


def test_the_other_commands_refuse_bad_folders_stores_and_values_in_one_line(tmp_path):
    """Issue 37, rule 6: noisydml-report and noisydml-dashboard, as docs/reference/bad-input.md lists them."""
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    (tmp_path / "runs").mkdir()
    cases = [
        (_report(str(tmp_path / "nope")), f"noisydml-report: {tmp_path / 'nope'} does not exist; give sweep"),
        (_report(str(a_file)), f"noisydml-report: {a_file} is not a folder; give sweep directories"),
        (
            _report(str(tmp_path / "runs"), "--name", "../elsewhere"),
            "noisydml-report: --name '../elsewhere' is not a folder name (the report goes in "
            "<--out>/<--name>)",
        ),
        (
            _report(str(tmp_path / "runs"), "--out", "/proc/noisydml"),
            "noisydml-report: --out=/proc/noisydml cannot be written",
        ),
        (
            _report(str(tmp_path / "runs"), "--name", ".."),
            "noisydml-report: --name '..' is not a folder name (the report goes in <--out>/<--name>)",
        ),
        (_report(str(tmp_path / "runs")), f"noisydml-report: no runs under {tmp_path / 'runs'}"),
        (
            _dashboard(str(tmp_path), "--port", "99999"),
            "noisydml-dashboard: --port 99999 is not a port; give one in 1-65535, or 0 for a free one",
        ),
        (
            _dashboard(str(tmp_path), "--store", str(a_file)),
            f"noisydml-dashboard: --store={a_file} cannot be written",
        ),
        (_dashboard(str(tmp_path / "nope")), f"noisydml-dashboard: {tmp_path / 'nope'}: no such folder"),
    ]
    for said, expected in cases:
        assert said.startswith(expected) and "\n" not in said, said


def test_a_report_of_a_metric_no_run_logged_is_refused_naming_the_closest(small_sweep, tmp_path):
    # argparse takes --metric for --metrics: a typo of the metric gave a report whose column was empty.
    said = _report(str(small_sweep), "--metric", "test/recall@3", "--out", str(tmp_path / "reports"))
    assert said.startswith(f"noisydml-report: --metrics test/recall@3: no run under {small_sweep} logged it")
    assert "; did you mean --metrics test/recall@" in said and "\n" not in said
    assert not (tmp_path / "reports").exists()


def test_a_batch_wider_than_the_training_split_names_data_p_not_the_validation_split(compose_config):
    # The validation split leaves 10 classes as the whole split has 10: data.P=200 is the cause, not it.
    with pytest.raises(
        ValueError, match=r"^data.P=200 x 1 process\(es\) is larger than the 10 training classes"
    ):
        train(compose_config("data.P=200"))
