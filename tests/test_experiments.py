"""Every experiment config composes and trains for two steps at a tiny scale, so no config rots."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import torchvision
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from omegaconf import OmegaConf

import layouts
from hydra_plugins.noisydml_sweeper.noisydml_sweeper import NoisydmlSweeper
from noisydml import CONFIG_DIR
from noisydml.report import registry
from noisydml.report.papers import le2019
from noisydml.run.train import train

EXPERIMENTS = sorted(
    str(p.relative_to(CONFIG_DIR / "experiment").with_suffix(""))
    for p in (CONFIG_DIR / "experiment").rglob("*.yaml")
)
# Tiny images: no pretrained weights, small inputs.
TINY_IMAGES = [
    "dataset.image_size=32",
    "dataset.resize=36",
    "backbone.trunk.pretrained=false",
]
# dataset.name -> (write a tiny folder of its layout under the data root, the overrides it needs), with
# enough classes for a 2 x 2 batch.
GENERATORS = {
    "cub": (lambda root: layouts.make_cub(root, size=40), TINY_IMAGES),
    "cars196": (lambda root: layouts.make_cars(root, size=40), TINY_IMAGES),
    "cars98n": (lambda root: layouts.make_cars98n(root, size=40), TINY_IMAGES),
    "sop": (lambda root: layouts.make_sop(root, size=40), TINY_IMAGES),
    "inshop": (lambda root: layouts.make_inshop(root, size=40), TINY_IMAGES),
    "flowers102": (lambda root: layouts.make_flowers(root, size=40), TINY_IMAGES),
    "mnist": (lambda root: layouts.make_mnist(root, per_class=3), []),
    "fashion_mnist": (lambda root: layouts.make_mnist(root, per_class=3, fashion=True), []),
    # Levi et al.'s Omniglot experiments train an ImageNet ResNet50.
    "omniglot": (
        lambda root: layouts.make_omniglot(root, characters=(3, 3), per_character=3),
        ["backbone.trunk.pretrained=false"],
    ),
    # BDML's k-NN accuracy needs every test class in training, its Table 3 one flip rate per CIFAR-10
    # class, and its heaviest flips (60% of 4) leave each class the 2 items of a batch's K.
    "features": (lambda root: layouts.make_features(root, classes=10, per_class=6, test_per_class=2), []),
}


def test_there_are_experiments():
    assert "digits/le2019_noise" in EXPERIMENTS and "le2019/fig2_cub" in EXPERIMENTS


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_composes_and_resolves(compose_config, experiment):
    # The quick loop's guard against rot (the slow test below trains each): every key resolves, and
    # the experiment names its run and its report's figure.
    resolved = OmegaConf.to_container(compose_config(f"experiment={experiment}"), resolve=True)
    assert resolved["name"] and resolved["report"]["figure"].split("/")[0] in experiment


@pytest.mark.slow
@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_trains_two_steps(compose_config, tmp_path, monkeypatch, experiment):
    # torchvision checks Omniglot's release zips by checksum, which a generated folder cannot match.
    monkeypatch.setattr(torchvision.datasets.Omniglot, "_check_integrity", lambda self: True)
    cfg = compose_config(f"experiment={experiment}")
    overrides = [
        f"experiment={experiment}",
        # A tiny stand-in (no pretrained weights, a few generated images) is another run than the
        # experiment's: it carries labels of its own.
        "name=tiny",
        "report.figure=tests/tiny",
        "trainer.max_steps=2",
        "data.batches_per_epoch=2",
        "data.num_workers=0",
        "data.pin_memory=false",
        "metrics.recall_ks=[1,2]",
    ]
    name, source = cfg.dataset.get("name"), "dataset"
    if name == "extracted":
        name, source = cfg.dataset.source.get("name"), "dataset.source"
        # The generated layouts hold a few features, fewer than an experiment's PCA keeps.
        overrides.append("dataset.pca_dim=2")
    if name in GENERATORS:
        make, extra = GENERATORS[name]
        make(tmp_path / "data")
        if name == "features":
            # An experiment names its own .npz; the generated one is features.npz.
            overrides.append(f"{source}.file=features.npz")
        overrides += [f"paths.data_dir={tmp_path / 'data'}", "data.P=2", "data.K=2", *extra]
        # A few samples of a few classes: none to spare for a validation split (digits experiments keep it).
        overrides.append("data.val_fraction=0")
        if "knn_detection" in (cfg.get("callbacks") or {}):
            # The kNN vote's k is checked against the training samples (10 of a few would log nothing).
            overrides.append("callbacks.knn_detection.k=1")
    else:
        # Where a noise model caches (the instance-dependent classifier's softmax): not the working folder.
        overrides.append(f"paths.data_dir={tmp_path / 'data'}")
    if "epochs" in cfg.noise:
        # The instance-dependent noise's classifier: one epoch trains it as well as twenty for this test.
        overrides.append("noise.epochs=1")
    metrics = train(compose_config(*overrides))
    assert metrics and all(0.0 <= value <= 1.0 for value in metrics.values())


# A published table's experiment runs its paper's protocol: every training class trained on (no validation
# split carved from them) and the paper's checkpoint, the last one, and for Roth et al.'s framework
# (Levi et al.) its best test epoch beside it (test_best_epoch/..., the test split scored at every epoch).
WHOLE_TRAINING_SPLIT = {
    "yu2018/table1_cub": [],
    "le2019/fig2_cub": [],
    "levi2021/table2_cub": ["test_epoch"],
    "zhang2023/table1_cub": [],
    "zhang2023/table2_cub": [],
}


@pytest.mark.parametrize("experiment", WHOLE_TRAINING_SPLIT)
def test_paper_experiments_train_on_the_whole_training_split(compose_config, tmp_path, experiment):
    # 20 training classes: a 10% class-disjoint hold-out would keep 2 of them out of training.
    layouts.make_cub(tmp_path / "data", classes=40, per_class=3, size=8)
    overrides = [f"paths.data_dir={tmp_path / 'data'}", "data.P=2", "data.K=2", *TINY_IMAGES]
    cfg = compose_config(f"experiment={experiment}", *overrides)
    datamodule = instantiate(cfg.data, _partial_=True)(
        dataset=instantiate(cfg.dataset), noise=instantiate(cfg.noise)
    )
    datamodule.setup("fit")
    assert datamodule.val_set is None
    assert sorted(datamodule.noisy.indices) == list(range(len(datamodule.splits.train)))
    assert np.unique(datamodule.noisy.true).tolist() == list(range(1, 21))
    assert datamodule.validation_stages == WHOLE_TRAINING_SPLIT[experiment]


# Zhang et al. and BDML tune on a hold-out ("10% of training data as a hold-out set for validation", BDML
# Sec. 4); their tables' runs, and their CPU analogues', train on the whole training split and test the last
# epoch: a hold-out scored once at the end would select nothing.
TUNED_TABLES = [e for e in EXPERIMENTS if e.startswith(("zhang2023/table", "bdml/table"))]
TUNED_ANALOGUES = [
    f"{scale}/{name}" for scale in ("digits", "mnist5k") for name in ("zhang2023_noise", "bdml_noise")
]


@pytest.mark.parametrize("experiment", TUNED_TABLES + TUNED_ANALOGUES)
def test_tuned_tables_hold_out_in_the_trials_only(compose_config, experiment):
    cfg = compose_config(f"experiment={experiment}", tiny=False)
    assert cfg.data.val_fraction == 0
    assert cfg.tune.trials > 0 and cfg.tune.at["data.val_fraction"] == 0.1


def _header(experiment: str) -> str:
    """The experiment file's leading comment block, as one line."""
    lines = (CONFIG_DIR / "experiment" / f"{experiment}.yaml").read_text().splitlines()[1:]
    block = itertools.takewhile(lambda line: line.startswith("#"), lines)
    return " ".join(line.removeprefix("#").strip() for line in block)


@pytest.mark.parametrize("experiment", TUNED_ANALOGUES)
def test_tuned_analogues_say_they_train_on_every_training_item(experiment):
    header = _header(experiment)
    assert re.search(r"train on every training (?:digit|image)", header), header
    assert "left after the hold-out" not in header


# The CPU analogues that select nothing train on every training image, as their papers; Yu et al.'s keep a
# hold-out, which chooses lambda. Zhang et al.'s GoogLeNet keeps BatchNorm frozen (our choice, header).
WHOLE_ANALOGUES = [
    f"{scale}/{name}" for scale in ("digits", "mnist5k") for name in ("le2019_noise", "levi2021_even_odd")
]


@pytest.mark.parametrize("experiment", [*WHOLE_ANALOGUES, "mnist5k/le2019_noise_disjoint"])
def test_analogues_that_select_nothing_hold_nothing_out(compose_config, experiment):
    assert compose_config(f"experiment={experiment}", tiny=False).data.val_fraction == 0


def test_yu_analogues_hold_out_to_choose_lambda_and_zhang_freezes_batchnorm(compose_config):
    for scale in ("digits", "mnist5k"):
        cfg = compose_config(f"experiment={scale}/yu2018_lambda", tiny=False)
        assert cfg.data.val_fraction == 0.1 and cfg.optimized_metric == "val/ncm_accuracy"
    assert compose_config("experiment=zhang2023/table1_inshop", tiny=False).backbone.freeze_bn


# Zhang et al. say only that they built on Musgrave et al.'s package (pytorch-metric-learning): a header
# that has the paper run their benchmark's setup states our choice as the paper's.
ZHANG_CONFIGS = sorted(
    p for p in CONFIG_DIR.rglob("*.yaml") if "zhang2023" in p.relative_to(CONFIG_DIR).as_posix()
)
PAPER_RAN = re.compile(r"\b(?:the paper|it|they)\s+(?:ran|used|followed|trained)\b", re.IGNORECASE)


def test_no_zhang_header_says_the_paper_ran_musgraves_benchmark():
    assert len(ZHANG_CONFIGS) > 10
    for path in ZHANG_CONFIGS:
        lines = path.read_text().splitlines()
        comments = " ".join(line.split("#", 1)[1] for line in lines if "#" in line)
        for clause in re.split(r"[.;()]", comments):
            if re.search(r"benchmark|musgrave", clause, re.IGNORECASE):
                assert not PAPER_RAN.search(clause), f"{path.relative_to(CONFIG_DIR)}: {clause.strip()}"


NOISE_MODELS = ("symmetric", "small_cluster")
# Instance-dependent noise (issue 36) on every CPU-scale data set; MNIST-1D under every noise model.
NEW_SETTINGS = ("digits_instance_dependent", "mnist5k_instance_dependent") + tuple(
    f"mnist1d_{noise}" for noise in (*NOISE_MODELS, "instance_dependent")
)
# Methods a noisy_dml sweep may leave out: the same methods batched for other data sets (MS-Celeb, CIFAR-10).
OTHER_BATCHING = {"bdml/bdml_msceleb", "bdml/dml_cifar10"}


@pytest.mark.slow
def test_noisy_dml_sweeps_run_every_method_of_the_five_papers_and_prism():
    methods = {
        str(p.relative_to(CONFIG_DIR / "method").with_suffix(""))
        for p in (CONFIG_DIR / "method").rglob("*.yaml")
    }
    swept = {}
    digits = [f"digits_{noise}" for noise in (*NOISE_MODELS, "instance_dependent")]
    images = [f"{ds}_{noise}" for ds in ("mnist5k", "cub", "cars196", "sop") for noise in NOISE_MODELS]
    # MNIST-1D's comparison overrides the backbone (backbone=cnn1d), which BDML's four choose themselves.
    images += [s for s in NEW_SETTINGS if not s.startswith("digits")]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        for experiment in (*digits, *images):
            cfg = compose("config", [f"experiment=noisy_dml/{experiment}"], return_hydra_config=True)
            sweeper = OmegaConf.to_container(cfg.hydra.sweeper)
            swept[experiment] = {
                dict(o.split("=", 1) for o in job)["method"]
                for job in NoisydmlSweeper.expand_sweeper(sweeper, [])
            }
    GlobalHydra.instance().clear()
    for experiment in digits:
        assert swept[experiment] == methods - OTHER_BATCHING, experiment
    # BDML's MLPs take its PCA features, not images: the digits comparison runs them on the pixels.
    # (MNIST-1D's replaces their MLPs with its CNN.)
    bdml = {method for method in methods if method.startswith("bdml/")}
    for experiment in images:
        assert swept[experiment] == methods - bdml, experiment


# A header's count of its sweep: "# 29 methods x 2 rates x 5 seeds = 290 jobs".
JOBS_LINE = re.compile(r"^# .*= ([\d,]+) jobs", re.MULTILINE)
STATED_JOBS = {
    experiment: int(found[1].replace(",", ""))
    for experiment in EXPERIMENTS
    if (found := JOBS_LINE.search((CONFIG_DIR / "experiment" / f"{experiment}.yaml").read_text()))
}


def test_some_headers_count_their_jobs():
    assert len(STATED_JOBS) >= 8


@pytest.mark.parametrize("experiment", sorted(STATED_JOBS))
def test_a_header_counts_the_jobs_its_sweep_launches(experiment):
    """A sweep inherits its seeds and methods from the experiment it extends; the header's count of its
    jobs (what a user budgets by) is what the sweep launches."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", [f"experiment={experiment}"], return_hydra_config=True)
    GlobalHydra.instance().clear()
    sweeper = OmegaConf.to_container(cfg.hydra.sweeper)
    assert len(NoisydmlSweeper.expand_sweeper(sweeper, [])) == STATED_JOBS[experiment]


# The CPU reproductions (make reproduce-*): each registers its confirmatory seeds in its file before it runs.
REPRODUCTIONS = [
    e
    for e in EXPERIMENTS
    if e.startswith(("digits/", "mnist5k/"))
    or e.startswith(("noisy_dml/digits_", "noisy_dml/mnist1d_", "noisy_dml/mnist5k_"))
]


@pytest.mark.parametrize("experiment", REPRODUCTIONS)
def test_a_reproduction_registers_its_seeds_apart_from_the_pilot_that_sized_them(compose_config, experiment):
    cfg = compose_config(f"experiment={experiment}", tiny=False)
    seeds, pilot = list(cfg.report.seeds), list(cfg.report.pilot or [])
    assert seeds and not set(seeds) & set(pilot), (seeds, pilot)
    found = registry.registrations()[cfg.report.figure]
    assert (found.experiment, list(found.seeds), list(found.pilot)) == (experiment, seeds, pilot)
    # A claims reproduction runs its registered seeds; a comparison its focused methods at them and the
    # rest at some of them (its grids), or only some of them where the budget traded its focused run.
    comparison = experiment.startswith("noisy_dml/") and set(found.swept) <= set(seeds)
    assert list(found.swept) == seeds or comparison


# The comparisons whose sweep splits its methods: the focused ones at the registered seeds, the others at 5.
GRIDDED = [e for e in REPRODUCTIONS if e.startswith(("noisy_dml/mnist1d_", "noisy_dml/mnist5k_"))]


@pytest.mark.parametrize("experiment", GRIDDED)
def test_a_comparison_runs_its_focused_methods_at_the_registered_seeds_and_the_others_at_five(
    experiment,
):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", [f"experiment={experiment}"], return_hydra_config=True)
    GlobalHydra.instance().clear()
    grids = OmegaConf.to_container(cfg.hydra.sweeper.grids)
    registered = [str(s) for s in cfg.report.seeds]
    exploratory = grids["exploratory"]
    assert exploratory["seed"].split(",") == registered[:5]
    if grids["focused"] is None:
        # Traded (its header says so): every comparison of the sweep is exploratory.
        return
    focused = grids["focused"]
    assert focused["seed"].split(",") == registered
    assert not set(focused["method"].split(",")) & set(exploratory["method"].split(","))
    # The reference every method is set beside is focused: exploratory methods pair with it on their seeds.
    assert "reference/knn_filter" in focused["method"].split(",")


@pytest.mark.parametrize("experiment", ["digits/le2019_noise", "mnist5k/le2019_noise"])
def test_le_analogues_run_the_rate_the_guarantee_names(experiment):
    rates = NoisydmlSweeper.expand({"noise.rate": _swept(experiment, "noise.rate")}, [])
    assert [f"noise.rate={le2019.GUARANTEE_RATE}"] in rates


def _swept(experiment: str, key: str) -> str:
    text = (CONFIG_DIR / "experiment" / f"{experiment}.yaml").read_text()
    return re.search(rf"\n\s+{re.escape(key)}: ([^\n]+)\n", text)[1]
