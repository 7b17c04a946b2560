"""Config groups from outside the package (issue 46): a method, a loss config and the loss's code in a
user's own folder and package, found through Hydra's search path (``hydra.searchpath``, ``--config-dir``)
by every check that lists options or composes an experiment, as the package's own are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NOISYDML = str(Path(sys.executable).with_name("noisydml"))
TINY = ["trainer.max_epochs=1", "data.batches_per_epoch=2", "logger=csv"]


@pytest.fixture
def user(tmp_path: Path) -> tuple[Path, dict]:
    """A user's config folder (a method of their lab and its loss) and their package (the loss's code)."""
    conf, code = tmp_path / "myconf", tmp_path / "code"
    (conf / "method" / "mylab").mkdir(parents=True)
    (conf / "loss").mkdir()
    code.mkdir()
    (code / "mylab_losses.py").write_text(
        "from pytorch_metric_learning.losses import TripletMarginLoss\n\n\n"
        "class WideTriplet(TripletMarginLoss):\n"
        "    def __init__(self, margin: float = 0.5, **kwargs):\n"
        "        super().__init__(margin=margin, **kwargs)\n"
    )
    (conf / "loss" / "wide_triplet.yaml").write_text("_target_: mylab_losses.WideTriplet\nmargin: 0.5\n")
    (conf / "method" / "mylab" / "wide_triplet.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /loss: wide_triplet\n"
        "  - override /miner: random_semihard\nreport:\n  method: Wide triplet\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return conf, env


def _run(arguments: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [NOISYDML, *arguments], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _results(cwd: Path, name: str = "default") -> dict:
    (found,) = (cwd / "outputs" / "runs" / name).rglob("results.json")
    return json.loads(found.read_text())


def test_a_method_from_the_search_path_runs_with_its_own_code_and_label(user, tmp_path):
    conf, env = user
    out = _run(["method=mylab/wide_triplet", f"hydra.searchpath=[file://{conf}]", *TINY], tmp_path, env)
    assert out.returncode == 0, out.stderr[-2000:]
    results = _results(tmp_path)
    assert results["status"] == "finished" and results["report"]["method"] == "Wide triplet"
    assert results["config"]["loss"]["_target_"] == "mylab_losses.WideTriplet"


def test_a_config_dir_adds_options_as_the_search_path_does(user, tmp_path):
    conf, env = user
    out = _run(["--config-dir", str(conf), "loss=wide_triplet", *TINY], tmp_path, env)
    assert out.returncode == 0, out.stderr[-2000:]


def test_an_option_from_the_search_path_misspelt_is_named_with_the_closest(user, tmp_path):
    conf, env = user
    out = _run(["method=mylab/wide_triplt", f"hydra.searchpath=[file://{conf}]"], tmp_path, env)
    assert out.returncode == 1
    assert out.stderr.startswith(
        "method=mylab/wide_triplt is not an option; did you mean method=mylab/wide_triplet?"
    )


def test_a_users_method_in_an_experiment_runs_under_its_own_labels(user, tmp_path):
    conf, env = user
    experiment = [
        "experiment=noisy_dml/digits_symmetric",
        "method=mylab/wide_triplet",
        "noise.rate=0.5",
        "seed=0",
    ]
    searchpath = f"hydra.searchpath=[file://{conf}]"
    refused = _run([*experiment, searchpath, *TINY], tmp_path, env)
    assert refused.returncode == 1 and "but method=mylab/wide_triplet was given" in refused.stderr
    out = _run([*experiment, searchpath, "name=mylab", "report.figure=mylab/digits", *TINY], tmp_path, env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert _results(tmp_path, "mylab")["report"]["method"] == "Wide triplet"


@pytest.mark.parametrize("where", ["searchpath", "config_dir"])
def test_a_users_method_with_one_of_its_groups_replaced_is_refused_as_the_packages_are(user, tmp_path, where):
    """``method=`` is its file's groups wherever the file is: replacing its miner would record another
    method's run under its name."""
    conf, env = user
    path = [f"hydra.searchpath=[file://{conf}]"] if where == "searchpath" else ["--config-dir", str(conf)]
    out = _run([*path, "method=mylab/wide_triplet", "miner=fixed_semihard", *TINY], tmp_path, env)
    assert out.returncode == 1
    refusal = "method=mylab/wide_triplet is miner=random_semihard, but miner=fixed_semihard was given"
    assert refusal in out.stderr, out.stderr[-2000:]
