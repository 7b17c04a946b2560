"""Checking in one room (noisydml.run.checks): one walk of the config, one rule type, one table of keys,
each key checked in one place; a class's ranges and joint constraints where the class is, and a noise
model's rate read by the model. What each rule refuses is in docs/reference/bad-input.md's table
(tests/test_bad_input.py); here, that the room stays one."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from hydra.utils import get_object

from configs import options
from noisydml.losses import MarginalLoss
from noisydml.miners import EasyPositiveMiner, RandomSemihardMiner
from noisydml.noise.models import UniformNoise
from noisydml.noise.small_cluster import SmallClusterNoise
from noisydml.run.checks.classes import ORDERS, RANGES, _declared
from noisydml.run.checks.config import KEYS, check_config
from noisydml.run.checks.walk import given_nodes, given_overrides, target_nodes
from noisydml.run.train import train
from noisydml.utils.checks import BadValue
from noisydml.utils.errors import BadInput

PACKAGE = Path(__file__).parents[1] / "src" / "noisydml"


def _config_walkers() -> list[str]:
    """Every function of the package that walks a config's object nodes: it names ``_target_`` and
    calls itself."""
    found = []
    for module in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            body = ast.unparse(node)
            calls = {
                c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
            }
            if "_target_" in body and node.name in calls:
                found.append(f"{module.relative_to(PACKAGE)}:{node.name}")
    return found


def test_one_walk_of_the_config():
    assert _config_walkers() == ["run/checks/walk.py:target_nodes"]


def test_every_check_of_a_run_is_in_the_room():
    # ARCHITECTURE.md: every rule a run's input obeys is in run/checks/.
    outside = [
        f"{module.name}:{node.name}"
        for module in sorted((PACKAGE / "run").glob("*.py"))
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name.lstrip("_").startswith("check")
    ]
    assert outside == []


def test_the_class_tables_hold_only_library_classes():
    # This package's classes check their own parameters in their constructors.
    own = [path for path in [*RANGES, *ORDERS] if path.split(".")[0] == "noisydml"]
    assert own == []


@pytest.mark.parametrize(
    "override",
    [f"loss={o}" for o in options("loss")] + [f"miner={o}" for o in options("miner")] + ["scheduler=cosine"],
)
def test_no_key_is_checked_in_two_places(compose_choices, override):
    """A key the table checks is not also a parameter whose range its class declares."""
    cfg, _ = compose_choices(override)
    ranged = {
        f"{path}.{name}"
        for path, node in target_nodes(cfg)
        for name in _declared(get_object(node["_target_"]))
    }
    assert ranged & {rule.key for rule in KEYS} == set()


@pytest.mark.parametrize(
    "override", [f"loss={o}" for o in options("loss")] + [f"miner={o}" for o in options("miner")]
)
def test_every_shipped_loss_and_miner_passes_its_checks(compose_choices, override):
    check_config(*compose_choices(override))


def test_the_memory_contrastive_margin_is_checked_once_as_a_similarity(compose_choices):
    # A cosine-similarity margin may be negative; it was refused by a second, distance-minded rule.
    check_config(*compose_choices("method=prism/mcl", "loss.margin=-0.5"))
    with pytest.raises(BadInput, match=r"^loss.margin=1.5 is outside \[-1, 1\] \(a cosine similarity"):
        check_config(*compose_choices("method=prism/mcl", "loss.margin=1.5"))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: MarginalLoss(alpha=-1), r"^alpha=-1 must be >= 0 \(a negative margin .*\); e.g. alpha=0.2$"),
        (lambda: RandomSemihardMiner(margin=-0.1), r"^margin=-0.1 must be >= 0"),
        (
            lambda: EasyPositiveMiner(epsilon=-1),
            r"^epsilon=-1 must be >= 0 \(a negative epsilon keeps no negative\)",
        ),
        (
            lambda: EasyPositiveMiner(negatives="distance_weighted", cutoff=1.5, nonzero_loss_cutoff=1.0),
            r"^nonzero_loss_cutoff=1.0 is not above cutoff=1.5",
        ),
    ],
)
def test_the_package_classes_check_their_own_parameters_from_python_too(build, message):
    with pytest.raises(BadValue, match=message):
        build()


def test_a_constructor_refusal_names_the_key_where_the_config_holds_it(compose_choices):
    with pytest.raises(BadInput, match=r"^miner.margin=-1 must be >= 0 .*; e.g. miner.margin=0.2$"):
        check_config(*compose_choices("miner=random_semihard", "miner.margin=-1"))


def test_a_noise_model_reads_its_own_rate():
    # Uniform flips must leave the true class the most frequent label: (C-1)/C with C classes.
    labels = [c for c in range(4) for _ in range(10)]
    with pytest.raises(
        BadInput, match=r"^noise.rate=0.8: with 4 training classes .* use noise.rate < 0.750$"
    ):
        UniformNoise(0.8, seed=0).apply(labels)
    # Small-cluster noise dissolves classes: 2 of 4 at 0.5 leaves two to merge them into; 3 of 4 at 0.8
    # would leave one, every label the same class.
    noisy = SmallClusterNoise(0.5, seed=0).apply(labels)
    assert len(set(noisy.observed.tolist())) == 2
    with pytest.raises(
        ValueError, match=r"^noise.rate=0.8 dissolves 3 of the 4 training classes and leaves one"
    ):
        SmallClusterNoise(0.8, seed=0).apply(labels)


def test_a_noise_model_without_flips_is_not_held_to_the_flip_bound(compose_config):
    # Topline noise keeps a clean 10% of the digits: no label is wrong, whatever the rate.
    cfg = compose_config("noise=topline", "noise.rate=0.9", "data.K=4", "data.val_fraction=0")
    train(cfg)
    results = json.loads((Path(cfg.paths.output_dir) / "results.json").read_text())
    assert results["status"] == "finished"


def test_an_interpolation_given_as_a_value_is_read_as_typed(compose_config):
    # The fix nearest_class noise prints, noise.backbone=${backbone}: read resolved, it failed in Hydra's
    # grammar as a Python dict's text, naming no key.
    compose_config("noise=nearest_class", "noise.features=backbone", "noise.backbone=${backbone}")
    assert "noise.backbone=${backbone}" in given_overrides()
    assert given_nodes() == {}
