"""Every number a paper prints is set beside some experiment's runs: its data set, method, metric (of the
paper's checkpoint), noise rate and conditions are those of at least one job that an experiment's sweep
runs, or the row says why it is not reproduced (another paper's number the paper cites, a method this
project does not implement). Read from the composed experiment configs, no training."""

from __future__ import annotations

import csv
import itertools
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from noisydml import CONFIG_DIR
from noisydml.report.collect import collect
from noisydml.report.published import Published, find_published, load_published, not_reproduced
from noisydml.report.records import lookup, noise_rate
from noisydml.report.tables import group_runs, metric_tables, pivot, write_cells_csv

EXPERIMENTS = sorted(
    str(p.relative_to(CONFIG_DIR / "experiment").with_suffix(""))
    for p in (CONFIG_DIR / "experiment").rglob("*.yaml")
)


def logged_metrics(cfg: DictConfig) -> set[str]:
    """The metric names a run of ``cfg`` writes to results.json: the evaluator's names under each stage
    the data module and the checkpoint rule score (``noisydml.run.selection``)."""
    m = cfg.metrics
    names = {f"recall@{k}" for k in m.recall_ks}
    names |= {"nmi"} if m.nmi else set()
    names |= {"nmi+"} if m.nmi_plus_factor else set()
    names |= {"map@r"} if m.map_at_r else set()
    names |= {"map"} if m.map_full else set()
    names |= {"ncm_accuracy"} if m.ncm_accuracy else set()
    names |= {f"knn_accuracy@{m.knn_accuracy_k}"} if m.knn_accuracy_k else set()
    stages = {"test"}
    if cfg.data.val_fraction > 0:
        stages.add("test_last")
    if cfg.data.test_at_validation:
        stages.add("test_best_epoch")
    if cfg.data.score_train:
        stages |= {"test_train"} | ({"test_last_train"} if cfg.data.val_fraction > 0 else set())
    return {f"{stage}/{name}" for stage in stages for name in names}


@dataclass(frozen=True)
class Job:
    """The jobs of one method on one data set in an experiment's sweep: what the report matches a
    published row on (``config``: the composed config as plain values; ``swept``: the values each other
    swept key takes)."""

    experiment: str
    figure: str
    dataset: str
    method: str
    metrics: frozenset[str]
    config: dict
    swept: dict[str, list[Any]]

    def values(self, key: str) -> list[Any]:
        if key in self.swept:
            return self.swept[key]
        if key == "noise.rate" and "noise.rates" in self.swept:
            # Class-conditional noise (BDML Table 3): a run's noise.rate is its per-class vector.
            return [tuple(v) for v in self.swept["noise.rates"]]
        value = lookup(self.config, key)
        return [noise_rate(self.config) if value is None and key == "noise.rate" else value]


@cache
def jobs(experiment: str) -> tuple[Job, ...]:
    """A :class:`Job` for each method and data set the experiment's sweep runs: composed once, the
    method's label read from its file (a method sets no metric or data key), the data set's name from its
    option."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", [f"experiment={experiment}"], return_hydra_config=True)
    GlobalHydra.instance().clear()
    params = OmegaConf.to_container(cfg.hydra.sweeper.params or {})
    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()])
    swept = {
        o.key_or_group: list(o.sweep_iterator()) if o.is_sweep_override() else [o.value()] for o in parsed
    }
    report = OmegaConf.to_container(cfg.report, resolve=False)
    # report.figure is the experiment's name (${hydra:runtime.choices.experiment}) or its own.
    figure = experiment if "${" in str(report["figure"]) else str(report["figure"])
    methods = [_label(m) for m in swept.get("method", [])] or [report.get("method") or ""]
    datasets = [report.get("dataset") or d for d in swept.get("dataset", [])] or [
        report.get("dataset") or cfg.dataset.get("name")
    ]
    rest = {k: v for k, v in swept.items() if k not in ("method", "dataset", "seed")}
    metrics = frozenset(logged_metrics(cfg))
    plain = OmegaConf.to_container(cfg, resolve=False)
    return tuple(
        Job(experiment, figure, str(d), str(m), metrics, plain, rest) for m in methods for d in datasets
    )


def _label(method: str) -> str:
    """``report.method`` of a method file, or of the method its defaults list extends."""
    node = OmegaConf.load(CONFIG_DIR / "method" / f"{method}.yaml")
    label = OmegaConf.select(node, "report.method", default=None)
    parents = [d for d in node.get("defaults", []) if isinstance(d, str) and d != "_self_"]
    return str(label) if label else next((_label(p) for p in parents), "")


def jobs_of(paper: str) -> list[Job]:
    """The jobs of the paper's own experiments (conf/experiment/<paper>/; the CPU analogues run data sets
    no paper prints)."""
    return [
        job
        for experiment in EXPERIMENTS
        if experiment.startswith(f"{paper}/")
        for job in jobs(experiment)
        if job.figure.split("/")[0] == paper
    ]


def matches(row: Published, job: Job) -> bool:
    """Whether some job of the sweep (any of its swept values) is the row's cell."""
    if row.metric not in job.metrics:
        return False
    keys = ["noise.rate"] + [c.partition("=")[0].strip() for c in row.param.split(";") if c.strip()]
    for values in itertools.product(*(job.values(k) for k in keys)):
        value_of = dict(zip(keys, values, strict=True)).get
        found = find_published(
            [row],
            paper=row.paper,
            dataset=job.dataset,
            method=job.method,
            metric=row.metric,
            value_of=value_of,
        )
        if found is row:
            return True
    return False


PUBLISHED = load_published()


@pytest.mark.parametrize("paper", sorted({row.paper for row in PUBLISHED}))
@pytest.mark.slow
def test_every_published_row_is_matched_by_an_experiment_or_says_why_not(paper: str) -> None:
    rows = [row for row in PUBLISHED if row.paper == paper]
    jobs_ = jobs_of(paper)
    unmatched = []
    for row in rows:
        why = not_reproduced(row)
        found = sorted({job.experiment for job in jobs_ if matches(row, job)})
        if why:
            assert not found, f"{row} is listed as not reproduced ({why}) but {found} run it"
        elif not found:
            unmatched.append(f"{row.table} {row.dataset} {row.method} {row.metric} p={row.noise} {row.param}")
    assert not unmatched, f"{len(unmatched)} of {paper}'s rows no experiment runs:\n" + "\n".join(unmatched)


def write_levi_runs(
    root: Path,
    experiment: str = "levi2021/table2_cub",
    dataset: str = "cub",
    metrics: dict[str, float] | None = None,
    method: str = "Triplet + semi-hard",
) -> None:
    """Levi et al.'s runs of one method, two seeds, as Roth et al.'s framework is run; by default its
    Table 2's triplet + semi-hard (CUB): the last epoch (test/) at 50%, the best test epoch
    (test_best_epoch/) at 60%."""
    for seed in (0, 1):
        run = root / f"seed{seed}"
        (run / ".hydra").mkdir(parents=True)
        config = {
            "name": "levi",
            "seed": seed,
            "report": {"figure": experiment, "method": method, "dataset": dataset},
            "dataset": {"name": dataset.partition("_")[0]},
            "backbone": {"embedding_size": 128},
            "noise": {"_target_": "noisydml.noise.NoNoise"},
        }
        choices = {"loss": "triplet", "miner": "random_positive", "experiment": experiment}
        (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"seed={seed}"]))
        (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
        (run / ".hydra" / "hydra.yaml").write_text(
            yaml.safe_dump({"hydra": {"runtime": {"choices": choices}}})
        )
        metrics = metrics or {"test/recall@1": 0.50, "test_best_epoch/recall@1": 0.60}
        results = {"status": "complete", "metrics": metrics, "config": config, "seed": seed}
        (run / "results.json").write_text(json.dumps(results))


def test_levis_numbers_sit_beside_the_best_test_epoch_its_framework_reports(tmp_path: Path) -> None:
    write_levi_runs(tmp_path / "runs")
    (group,) = group_runs(collect([tmp_path / "runs"]))
    table = pivot(group)
    write_cells_csv([table], PUBLISHED, tmp_path / "cells.csv")
    with (tmp_path / "cells.csv").open() as f:
        beside = {row["metric"]: row["published"] for row in csv.DictReader(f)}
    # Table 2, "Trip. + SH †" on CUB: R@1 61.5, the framework's best test epoch.
    assert beside == {"test_best_epoch/recall@1": "0.615", "test/recall@1": ""}
    text = metric_tables(table, PUBLISHED)
    assert "paper 61.50, Δ −1.50" in text
    assert "The paper's numbers beside its checkpoint: the best test epoch (test_best_epoch/)." in text
    assert "The paper's numbers are beside test_best_epoch/recall@1, its checkpoint" in text


def test_levis_training_set_table_says_its_checkpoint_is_not_the_test_tables(tmp_path: Path) -> None:
    # Tables 3 and 4 score the same models (Sec. 5.2.6), but the runs score the training images only with
    # the last epoch's weights while Table 3's numbers sit beside the best test epoch: each table says so.
    metrics = {"test/recall@1": 0.50, "test_best_epoch/recall@1": 0.60, "test_train/recall@1": 0.70}
    write_levi_runs(tmp_path / "runs", "levi2021/table3_omniglot", "omniglot_letters", metrics)
    (group,) = group_runs(collect([tmp_path / "runs"]))
    sections = metric_tables(pivot(group), PUBLISHED).split("### ")
    train = next(s for s in sections if s.startswith("test_train/recall@1"))
    best = next(s for s in sections if s.startswith("test_best_epoch/recall@1"))
    # Table 4, letters, triplet + semi-hard: R@1 70.3; Table 3: 49.4.
    assert "paper 70.30" in train and "paper 49.40" in best
    assert (
        "The paper's other numbers from these runs sit beside other weights: test_best_epoch/ at the best "
        "test epoch." in train
    )
    assert "sit beside other weights: test_train/ at the selected checkpoint, the last epoch" in best
    # Table 1's test and training digits share the last epoch: nothing to say.
    metrics = {"test/recall@1": 0.40, "test_best_epoch/recall@1": 0.45, "test_train/recall@1": 0.50}
    write_levi_runs(
        tmp_path / "even_odd", "levi2021/table1_mnist_even_odd", "mnist_even_odd", metrics, "Triplet"
    )
    (group,) = group_runs(collect([tmp_path / "even_odd"]))
    text = metric_tables(pivot(group), PUBLISHED)
    assert "paper 42.00" in text and "paper 35.20" in text and "other weights" not in text
