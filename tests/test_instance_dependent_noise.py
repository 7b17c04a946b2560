"""noise=instance_dependent (Chen et al. AAAI 2021) and noise=nearest_class (Galanakis et al. VISAPP 2024):
the exact rate, each flip to the class the rule names (against brute force on tiny sets), the same labels
for the same seed, the classifier's softmax cached, and end to end on the training split of a run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from noisydml.data import Digits, TensorDataset
from noisydml.models import CNN1D
from noisydml.noise import InstanceDependentNoise, NearestClassNoise, instance_dependent
from noisydml.run.train import train


def tiny_split(seed: int = 0, per_class: tuple[int, ...] = (7, 5, 6, 4)) -> TensorDataset:
    """Gaussian blobs, one per class, overlapping: some samples sit nearer another class."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(len(per_class)), per_class)
    centres = rng.normal(size=(len(per_class), 3))
    inputs = centres[labels] + rng.normal(scale=0.8, size=(len(labels), 3))
    return TensorDataset(torch.tensor(inputs, dtype=torch.float32), labels)


# ------------------------------------------------------------------------------ instance-dependent


def brute_force_flips(labels: np.ndarray, probabilities: np.ndarray, rate: float) -> dict[int, int]:
    """Chen et al.'s rule sample by sample: each one's most likely other class and its probability; the
    round(rate * N) most likely flip (ties: lower index first)."""
    candidates = []
    for i, label in enumerate(labels):
        best = max((p, c) for c, p in enumerate(probabilities[i]) if c != label)
        candidates.append((-best[0], i, best[1]))
    return {i: c for _, i, c in sorted(candidates)[: round(rate * len(labels))]}


@pytest.mark.parametrize("rate", [0.0, 0.1, 0.25, 0.5])
def test_instance_dependent_flips_the_most_likely_wrong_classes_as_brute_force_does(rate):
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(4), 5)
    probabilities = rng.dirichlet(np.ones(4), size=len(labels))
    noisy = InstanceDependentNoise(rate, seed=0).apply(labels, probabilities)
    flips = brute_force_flips(labels, probabilities, rate)
    np.testing.assert_array_equal(noisy.true, labels)
    assert {i: int(noisy.observed[i]) for i in np.flatnonzero(noisy.observed != labels)} == flips
    assert (noisy.observed != labels).sum() == round(rate * len(labels))


def test_instance_dependent_keeps_the_data_sets_class_ids():
    labels = np.array([3, 3, 7, 7, 9, 9])
    probabilities = np.array([[0.1, 0.8, 0.1]] * 6)
    noisy = InstanceDependentNoise(0.5, seed=0).apply(labels, probabilities)
    # Three flips of the four at 0.8 (7 for the 3s and the 9s; the 7s' best other class has 0.1): the tie
    # goes to the lower indices, so the last 9 keeps its label.
    np.testing.assert_array_equal(noisy.observed, [7, 7, 7, 7, 7, 9])


def test_instance_dependent_on_a_trained_classifier_is_exact_deterministic_and_cached(tmp_path, monkeypatch):
    instance_dependent._MEMORY.clear()
    train = Digits().splits().train
    model = InstanceDependentNoise(0.3, seed=0, epochs=2, cache_dir=tmp_path)
    noisy = model.apply_to(train)
    assert model.report["softmax"] == "trained"
    assert (noisy.observed != noisy.true).sum() == round(0.3 * len(train))
    # Flips go to the adjacent class the classifier confuses, not everywhere: far fewer class pairs than
    # the 90 a uniform flip would fill.
    pairs = {(t, o) for t, o in zip(noisy.true, noisy.observed, strict=True) if t != o}
    assert len(pairs) < 60
    # The same labels again, from the cache: in memory, then from disk in a fresh process's place.
    monkeypatch.setattr(InstanceDependentNoise, "_train", lambda *args: pytest.fail("trained again"))
    again = InstanceDependentNoise(0.3, seed=0, epochs=2, cache_dir=tmp_path)
    np.testing.assert_array_equal(again.apply_to(train).observed, noisy.observed)
    assert again.report["softmax"] == "cached in memory"
    instance_dependent._MEMORY.clear()
    from_disk = InstanceDependentNoise(0.3, seed=0, epochs=2, cache_dir=tmp_path)
    np.testing.assert_array_equal(from_disk.apply_to(train).observed, noisy.observed)
    assert (
        from_disk.report["softmax"].startswith("cached in ") and str(tmp_path) in from_disk.report["softmax"]
    )
    # Another rate reads the same softmax: only the count changes; the flips at 10% are among those at 30%.
    fewer = InstanceDependentNoise(0.1, seed=0, epochs=2, cache_dir=tmp_path).apply_to(train)
    assert np.all(
        noisy.observed[fewer.observed != fewer.true] == fewer.observed[fewer.observed != fewer.true]
    )
    monkeypatch.undo()
    # Another seed trains another classifier, whose flips differ.
    other = InstanceDependentNoise(0.3, seed=1, epochs=2).apply_to(train)
    assert not np.array_equal(other.observed, noisy.observed)


def test_a_softmax_cached_under_one_numerics_mode_is_not_read_under_another(tmp_path, monkeypatch):
    """The flips at the boundary follow the softmax's last bits, which the kernels decide: labels drawn
    under numerics=avx2 come from a classifier trained under avx2, never from one a strict run cached."""
    instance_dependent._MEMORY.clear()
    train = Digits().splits().train
    monkeypatch.setattr(instance_dependent, "in_force", lambda: "strict")
    strict = InstanceDependentNoise(0.3, seed=0, epochs=1, cache_dir=tmp_path)
    strict.apply_to(train)
    monkeypatch.setattr(instance_dependent, "in_force", lambda: "avx2")
    avx2 = InstanceDependentNoise(0.3, seed=0, epochs=1, cache_dir=tmp_path)
    avx2.apply_to(train)
    assert (strict.report["softmax"], avx2.report["softmax"]) == ("trained", "trained")
    assert avx2.report["cache_key"] != strict.report["cache_key"]
    assert len(list((tmp_path / "instance_dependent").iterdir())) == 2


def test_instance_dependent_takes_a_configured_trunk():
    signals = torch.randn(40, 1, 40)
    split = TensorDataset(signals, np.repeat(np.arange(4), 10))
    model = InstanceDependentNoise(0.25, seed=0, classifier=CNN1D(), epochs=1)
    assert (model.apply_to(split).observed != split.labels).sum() == 10
    with pytest.raises(ValueError, match="noise.classifier Flatten has no out_features"):
        InstanceDependentNoise(0.2, seed=0, classifier=torch.nn.Flatten())


# ------------------------------------------------------------------------------------ nearest class


@pytest.mark.parametrize("rate", [0.0, 0.2, 0.5])
def test_nearest_class_relabels_to_the_nearest_unchosen_sample_of_another_class(rate):
    split = tiny_split()
    model = NearestClassNoise(rate, seed=3)
    noisy = model.apply_to(split)
    labels, inputs = split.labels, split.inputs.numpy()
    counts = np.bincount(labels)
    flipped = noisy.observed != labels
    # round(rate * n_c) of each class, half to even, none of a class's last sample.
    expected = np.minimum(np.rint(rate * counts), counts - 1)
    np.testing.assert_array_equal(np.bincount(labels[flipped], minlength=len(counts)), expected)
    kept = ~flipped
    for i in np.flatnonzero(flipped):
        others = [j for j in np.flatnonzero(kept) if labels[j] != labels[i]]
        nearest = min(others, key=lambda j: float(((inputs[i] - inputs[j]) ** 2).sum()))
        assert noisy.observed[i] == labels[nearest], i


def test_nearest_class_is_deterministic_given_the_seed():
    split = tiny_split(per_class=(30, 30, 30))
    first = NearestClassNoise(0.3, seed=0).apply_to(split).observed
    np.testing.assert_array_equal(NearestClassNoise(0.3, seed=0).apply_to(split).observed, first)
    assert not np.array_equal(NearestClassNoise(0.3, seed=1).apply_to(split).observed, first)
    with pytest.raises(ValueError, match="noise.features='pixels' is not one of"):
        NearestClassNoise(0.3, seed=0, features="pixels")
    with pytest.raises(ValueError, match="noise.features=backbone embeds the samples with noise.backbone"):
        NearestClassNoise(0.3, seed=0, features="backbone")


# --------------------------------------------------------------------------------------- end to end


@pytest.mark.parametrize(
    "noise", [["noise=instance_dependent", "noise.epochs=1"], ["noise=nearest_class"]], ids=lambda n: n[0]
)
def test_noise_of_the_training_split_is_saved_with_the_run(compose_config, tmp_path, noise):
    cfg = compose_config(*noise, "noise.rate=0.25", f"paths.data_dir={tmp_path / 'data'}")
    train(cfg)
    run = Path(cfg.paths.output_dir)
    with (run / "labels.csv").open() as f:
        rows = list(csv.DictReader(f))
    validation = json.loads((run / "results.json").read_text())["validation"]
    # The whole training split's labels were drawn before the validation split took its 10%: its flips
    # and those trained on add up to the model's exact count.
    flipped = sum(row["true"] != row["observed"] for row in rows)
    held_out = round(validation["num_samples"] * validation["realized_noise_rate"])
    counts = np.bincount(Digits().splits().train.labels)
    exact = round(0.25 * counts.sum()) if "instance" in noise[0] else int(np.rint(0.25 * counts).sum())
    assert flipped + held_out == exact


def test_a_run_trains_alike_whether_its_noise_classifier_is_trained_or_read_from_the_cache(
    compose_config, tmp_path
):
    """The first job of a seed trains the noise's classifier, the next ones read its softmax from the
    cache: their training (here dropout, which draws from torch's global generator) must not tell them
    apart, or a board's numbers depend on which job came first and a fresh clone replays none of them."""
    instance_dependent._MEMORY.clear()
    setting = ("noise=instance_dependent", "noise.epochs=1", "noise.rate=0.25", "backbone.trunk.dropout=0.3")
    metrics = []
    for run in ("trained", "cached"):
        cfg = compose_config(*setting, f"paths.data_dir={tmp_path / 'data'}", run=run)
        train(cfg)
        results = json.loads((Path(cfg.paths.output_dir) / "results.json").read_text())
        assert results["noise"]["details"]["softmax"].startswith(run)
        metrics.append(results["metrics"])
    assert metrics[0] == metrics[1]
