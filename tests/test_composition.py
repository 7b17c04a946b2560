"""A sweep's jobs composed from the configs merged once per set of group choices
(hydra_plugins.noisydml_sweeper.composition) are the configs Hydra composes for them from the files: the same
YAML to the last key, flags and records included, whatever kind of override a job gives, in whatever order
the jobs come, and the same error where Hydra refuses one."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.utils import create_config_search_path
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.noisydml_sweeper.composition import ComposedOnce
from noisydml.run.cli import CONFIG_DIR
from noisydml.utils.errors import BadInput

EXPERIMENT = "experiment=noisy_dml/digits_symmetric"


def master(*hydra_overrides: str) -> tuple[ConfigLoaderImpl, DictConfig]:
    """A sweep's loader and its master config, as ``noisydml -m`` composes them."""
    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(str(CONFIG_DIR)))
    config = loader.load_configuration("config", [*hydra_overrides, "seed=0,1"], run_mode=RunMode.MULTIRUN)
    return loader, config


def composed(cfg: DictConfig) -> tuple[str, dict]:
    """What a job receives: every key as written (interpolations unresolved) and the flags set on the root
    and on the ``hydra`` node."""
    flags = {
        node: {flag: cfg_node._get_node_flag(flag) for flag in ("struct", "readonly")}
        for node, cfg_node in (("root", cfg), ("hydra", cfg.hydra))
    }
    return OmegaConf.to_yaml(cfg), flags


JOBS = [
    # Jobs of one comparison, in a sweep's order: methods change, values change under the same choices.
    [EXPERIMENT, "method=le2019/triplet_random_semihard", "noise=uniform", "noise.rate=0.25", "seed=0"],
    [EXPERIMENT, "method=prism/prism", "noise=uniform", "noise.rate=0.25", "seed=0"],
    [EXPERIMENT, "method=le2019/triplet_random_semihard", "noise=uniform", "noise.rate=0.5", "seed=7"],
    [EXPERIMENT, "method=prism/prism", "noise=small_cluster", "noise.rate=0.5", "seed=3"],
    [EXPERIMENT, "method=le2019/triplet_random_semihard", "noise=uniform", "noise.rate=0.25", "seed=0"],
    # Every kind of value override: added, forced, deleted, a mapping, a list, null, an interpolation.
    [EXPERIMENT, "method=prism/prism", "+data.extra=1", "++noise.rate=0.3", "~data.test_at_validation"],
    [EXPERIMENT, "method=prism/prism", "data={P: 4, K: 3}", "trainer.max_epochs=2", "seed=${data.P}"],
    [EXPERIMENT, "method=prism/prism", "callbacks.knn_detection.k=3", "report.seeds=[0]", "data.filter=null"],
    # Choices given in another order, or none, and a group chosen with a value of one of its keys.
    ["noise.rate=0.2", "seed=4", "miner=fixed_semihard", "loss=triplet"],
    ["seed=5"],
    ["loss=contrastive", "loss.pos_margin=0.1", "seed=5"],
]


@pytest.mark.parametrize("order", ["as given", "reversed"])
def test_each_job_is_composed_as_hydra_composes_it_from_the_files(order):
    # A sweep's own hydra. override, with an interpolation only the launcher can resolve.
    loader, config = master("hydra.sweep.subdir=${hydra.job.num}")
    once = ComposedOnce(loader)
    for job in JOBS if order == "as given" else JOBS[::-1]:
        expected = loader.load_sweep_config(config, list(job))
        assert composed(once.load_sweep_config(config, list(job))) == composed(expected), job
    assert len(once._merged) < len(JOBS)


def test_a_job_hydra_refuses_is_refused_with_hydras_error():
    """Hydra's own refusal of a + on a key the config has, as Hydra words it; a key the config lacks, set
    without + or deleted with ~, is refused in one line (below)."""
    loader, config = master()
    once = ComposedOnce(loader)
    once.load_sweep_config(config, [EXPERIMENT, "method=prism/prism", "seed=0"])
    for job in ([EXPERIMENT, "method=prism/prism", "+noise.rate=0.3"],):
        with pytest.raises(HydraException) as expected:
            loader.load_sweep_config(config, job)
        with pytest.raises(type(expected.value)) as got:
            once.load_sweep_config(config, job)
        assert str(got.value) == str(expected.value)


def test_a_users_groups_from_the_search_path_are_choices_as_the_packages_are(tmp_path: Path):
    """A method in a user's folder (``hydra.searchpath``) is a group choice, not a value: composed from the
    user's file, as Hydra composes it."""
    conf = tmp_path / "myconf"
    (conf / "method" / "mylab").mkdir(parents=True)
    (conf / "method" / "mylab" / "wide.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /loss: triplet\nloss:\n  margin: 0.7\n"
    )
    loader, config = master(f"hydra.searchpath=[file://{conf}]")
    once = ComposedOnce(loader)
    for seed in (0, 1):
        job = [EXPERIMENT, "method=mylab/wide", f"seed={seed}"]
        got = once.load_sweep_config(config, job)
        assert composed(got) == composed(loader.load_sweep_config(config, job))
        assert got.loss.margin == 0.7 and got.hydra.runtime.choices.method == "mylab/wide"
    assert len(once._merged) == 1


def test_a_job_that_overrides_hydra_is_composed_by_hydra_whole():
    loader, config = master()
    once = ComposedOnce(loader)
    job = [EXPERIMENT, "method=prism/prism", "hydra.job.name=other", "seed=1"]
    assert composed(once.load_sweep_config(config, job)) == composed(loader.load_sweep_config(config, job))
    assert once._merged == {}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "noise.rat=0.3",
            "noise.rat=0.3: noise has no key rat (noise=uniform); did you mean noise.rate=0.3? (its keys: "
            "rate, seed)",
        ),
        # A key its class does not take: adding it with + would be refused as well.
        (
            "noise=none noise.rate=0.3",
            "noise.rate=0.3: noise has no key rate (noise=none) (its keys: seed); NoNoise takes no rate, so "
            "+noise.rate would be refused too; choose an option of noise= that has it",
        ),
        # A class that takes any key: one's own is added with +.
        (
            "logger=wandb logger.wandb.entity_x=a",
            "logger.wandb.entity_x=a: logger.wandb has no key entity_x (logger=wandb) (its keys: project, "
            "save_dir, group, name, job_type, id, resume, tags, extra_tags); a key of your own is added with "
            "+logger.wandb.entity_x=...",
        ),
        # The section itself misspelt: the closest section, the rest of the key kept.
        (
            "nois.rate=0.3",
            "nois.rate=0.3: the config has no key nois; did you mean noise.rate=0.3? (its keys: ",
        ),
        # Nothing close: the keys there.
        ("data.zzz=1", "data.zzz=1: data has no key zzz (its keys: "),
        # A deletion of a key the config lacks: Hydra said "Could not delete from config".
        (
            "~noise.rat",
            "~noise.rat: noise has no key rat (noise=uniform), so there is nothing to delete; did you mean "
            "~noise.rate? (its keys: rate, seed)",
        ),
    ],
)
def test_an_override_on_a_key_the_config_lacks_is_refused_naming_the_closest(override, message):
    loader, config = master()
    once = ComposedOnce(loader)
    with pytest.raises(BadInput) as refused:
        once.load_sweep_config(config, [EXPERIMENT, "method=prism/prism", *override.split()])
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("swept", "values"),
    [
        # A float range's binary steps: 0.30000000000000004 named its job and filed another setting than 0.3,
        # and Hydra's range gave its stop, 0.4, as a fourth value.
        ("noise.rate=range(0.1,0.4,0.1)", ["0.1", "0.2", "0.3"]),
        ("noise.rate=range(0.4,0,-0.1)", ["0.4", "0.3", "0.2", "0.1"]),
        ("seed=range(0,3)", ["0", "1", "2"]),
        # Values as typed stay as typed.
        ("noise.rate=0.1,0.30000000000000004", ["0.1", "0.30000000000000004"]),
    ],
)
def test_a_sweeps_range_gives_the_values_a_user_reads_in_it(swept, values):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.noisydml_sweeper.noisydml_sweeper import sweep_values

    assert sweep_values(OverridesParser.create().parse_overrides([swept])[0]) == values
