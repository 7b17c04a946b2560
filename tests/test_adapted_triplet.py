"""Yu et al. 2018's adapted triplet loss: hand values, brute force over triplets, gradcheck, and the
semi-supervised term with the data module's hidden labels, end to end on digits."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from pytorch_metric_learning.distances import LpDistance
from pytorch_metric_learning.losses import TripletMarginLoss
from pytorch_metric_learning.reducers import MeanReducer
from pytorch_metric_learning.utils import loss_and_miner_utils as lmu

from noisydml.core.hooks import TrainingSet
from noisydml.data import Digits, MetricDataModule
from noisydml.losses import AdaptedTripletLoss
from noisydml.losses.adapted_triplet import (
    all_triplets_counts,
    class_ratios,
    induced_counts,
    matching_loss,
)
from noisydml.noise import NoNoise, UniformNoise
from noisydml.run.train import train
from training_sets import hook_context

# The five 2-d embeddings of test_losses.py; x1 = (0, 3) is (0, 1) once normalised.
EMBEDDINGS = torch.tensor([[1.0, 0.0], [0.0, 3.0], [0.6, 0.8], [0.8, 0.6], [-1.0, 0.0]])
LABELS = torch.tensor([0, 0, 1, 1, 1])
TRIPLETS = (torch.tensor([0, 0, 2, 3, 0]), torch.tensor([1, 1, 3, 2, 1]), torch.tensor([2, 3, 0, 1, 4]))
# Triplet term, squared distances, mean over the 5 triplets (test_losses.py): (1.4 + 1.8) / 5 = 0.64.
TRIPLET_MEAN = 0.64
# Induced data of the selected triplets (Eq. 9), counting each role:
#   x0: anchor 3x + negative 1x = 4;  x1: positive 3x + negative 1x = 4;  x2, x3: 3 each;  x4: 1
#   Phi^S_0 = (4 (1, 0) + 4 (0, 1)) / 8 = (0.5, 0.5)
#   Phi^S_1 = (3 (.6, .8) + 3 (.8, .6) + (-1, 0)) / 7 = (3.2 / 7, 4.2 / 7) = (0.457143, 0.6)
# All 18 triplets (n_0 = 2, n_1 = 3, N = 5): a class-0 point occurs 2 (1)(3) + 3 (2) = 12 times, a
# class-1 point 2 (2)(2) + 2 (1) = 10 times (12 * 2 + 10 * 3 = 54 = 3 * 18), uniform within a class:
#   Phi^T_0 = (0.5, 0.5);  Phi^T_1 = ((.6, .8) + (.8, .6) + (-1, 0)) / 3 = (0.133333, 0.466667)
# L_match = 0 + (3.2/7 - 0.4/3)^2 + (0.6 - 1.4/3)^2 = (6.8/21)^2 + (0.4/3)^2 = 0.104853 + 0.017778
MATCH = (6.8 / 21) ** 2 + (0.4 / 3) ** 2  # 0.122630


def pml_triplet() -> TripletMarginLoss:
    return TripletMarginLoss(margin=0.2, distance=LpDistance(power=2), reducer=MeanReducer())


def semihard(embeddings: torch.Tensor, labels: torch.Tensor):
    """Eq. 7 by brute force: every triplet with d2_ap < d2_an <= d2_ap + 0.2 on the unit sphere."""
    x = F.normalize(embeddings.detach().double(), dim=1)
    d2 = torch.cdist(x, x) ** 2
    a, p, n = lmu.get_all_triplets_indices(labels)
    keep = (d2[a, n] > d2[a, p]) & (d2[a, n] <= d2[a, p] + 0.2)
    return a[keep], p[keep], n[keep]


def brute_force_means(points: torch.Tensor, labels: torch.Tensor, triplets) -> dict[int, torch.Tensor]:
    """Class means of the induced data built literally: list every triplet's three points (Eq. 9)."""
    members: dict[int, list[torch.Tensor]] = {}
    for triplet in zip(*triplets, strict=True):
        for i in triplet:
            members.setdefault(int(labels[i]), []).append(points[i])
    return {y: torch.stack(xs).mean(0) for y, xs in members.items()}


def test_loss_equals_hand_value():
    assert matching_loss(F.normalize(EMBEDDINGS), LABELS, TRIPLETS).item() == pytest.approx(MATCH, abs=1e-6)
    plain = AdaptedTripletLoss(match_weight=0)(EMBEDDINGS, LABELS, TRIPLETS).item()
    adapted = AdaptedTripletLoss(match_weight=2)(EMBEDDINGS, LABELS, TRIPLETS).item()
    assert plain == pytest.approx(TRIPLET_MEAN, abs=1e-6)
    assert adapted == pytest.approx(TRIPLET_MEAN + 2 * MATCH, abs=1e-6)  # 0.885261


def test_zero_weight_is_exactly_pml_triplet_loss():
    torch.manual_seed(0)
    labels = torch.arange(5).repeat_interleave(4)
    x = torch.randn(20, 8)
    triplets = semihard(x, labels)
    assert len(triplets[0]) > 10
    grads, values = [], []
    for loss in (AdaptedTripletLoss(match_weight=0.0), pml_triplet()):
        embeddings = x.clone().requires_grad_()
        value = loss(embeddings, labels, triplets)
        value.backward()
        values.append(value)
        grads.append(embeddings.grad)
    assert torch.equal(values[0], values[1]) and torch.equal(grads[0], grads[1])
    # The matching term is not zero here, so the equality is not a coincidence of an unbiased batch.
    assert matching_loss(F.normalize(x), labels, triplets).item() > 1e-3


@pytest.mark.parametrize("sizes", [[3, 2, 1], [4, 4, 4], [5, 2, 2, 3]])
def test_all_triplets_counts_match_enumeration(sizes):
    labels = torch.arange(len(sizes)).repeat_interleave(torch.tensor(sizes))
    every = lmu.get_all_triplets_indices(labels)
    expected = induced_counts(every, len(labels), torch.float64)
    assert torch.equal(all_triplets_counts(labels, torch.float64), expected)
    if len(set(sizes)) == 1:
        # P x K: every point occurs 3 K (K - 1)(P - 1) times, and there are PK(P-1)K(K-1) triplets.
        P, K = len(sizes), sizes[0]
        assert torch.all(expected == 3 * K * (K - 1) * (P - 1))
        assert len(every[0]) == P * (P - 1) * K * K * (K - 1)
    # Hand count for sizes 3, 2, 1: class 0 2*2*3 + 2 = 14, class 1 2*1*4 + 6 = 14, class 2 0 + 6 + 2 = 8.
    if sizes == [3, 2, 1]:
        assert expected.tolist() == [14, 14, 14, 14, 14, 8]


def test_matching_loss_matches_brute_force_on_a_mined_batch():
    torch.manual_seed(1)
    labels = torch.tensor([0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 5, 5])
    x = torch.randn(len(labels), 6, dtype=torch.float64)
    points = F.normalize(x, dim=1)
    triplets = semihard(x, labels)
    assert len(triplets[0]) > 0
    selected = brute_force_means(points, labels, triplets)
    every = brute_force_means(points, labels, lmu.get_all_triplets_indices(labels))
    expected = sum(((selected[y] - every[y]) ** 2).sum() for y in selected)
    assert matching_loss(points, labels, triplets).item() == pytest.approx(expected.item(), rel=1e-12)
    # Phi^T_y is the plain class mean, as derived in the module docstring.
    for y, mean in every.items():
        assert torch.allclose(mean, points[labels == y].mean(0), atol=1e-12)


def test_gradcheck_float64():
    torch.manual_seed(2)
    labels = torch.arange(4).repeat_interleave(3)
    x = torch.randn(12, 5, dtype=torch.float64)
    triplets = lmu.get_all_triplets_indices(labels)
    # A fixed, biased selection; hinge kinks are avoided by checking the hinge terms are far from 0.
    keep = torch.arange(len(triplets[0])) % 3 == 0
    triplets = tuple(t[keep] for t in triplets)
    d2 = torch.cdist(F.normalize(x), F.normalize(x)) ** 2
    a, p, n = triplets
    assert ((d2[a, p] - d2[a, n] + 0.2).abs() > 1e-3).all()
    loss = AdaptedTripletLoss(match_weight=1.5)
    assert torch.autograd.gradcheck(lambda e: loss(e, labels, triplets), (x.requires_grad_(),))


def test_class_ratios_correct_eq19_misprint():
    # Class means e1, e2, e3 and target 0.2 e1 + 0.3 e2 + 0.5 e3 (module docstring of class_ratios).
    means = torch.eye(3, dtype=torch.float64)
    target = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    assert torch.allclose(class_ratios(means, target), target)
    A = (means[1:] - means[0]).T
    printed = torch.linalg.inv(A.T @ A) @ A.T @ target
    assert torch.allclose(printed, torch.tensor([-0.1, 0.5], dtype=torch.float64) / 3)


def test_class_ratios_is_the_constrained_least_squares():
    torch.manual_seed(3)
    means = torch.randn(5, 16, dtype=torch.float64)
    theta = torch.tensor([0.1, 0.4, 0.2, 0.25, 0.05], dtype=torch.float64)
    assert torch.allclose(class_ratios(means, theta @ means), theta)
    # Off the affine hull: sum-to-one holds, and the residual is orthogonal to every class difference.
    target = torch.randn(16, dtype=torch.float64)
    fitted = class_ratios(means, target)
    residual = fitted @ means - target
    assert fitted.sum().item() == pytest.approx(1.0)
    assert torch.allclose((means[1:] - means[0]) @ residual, torch.zeros(4, dtype=torch.float64), atol=1e-10)


def test_detached_theta_gives_the_full_gradient_of_eq20():
    # Envelope theorem: at the optimum of Eq. 18, d(objective)/d(theta) = 0 on the constraint set.
    torch.manual_seed(4)
    means = torch.randn(4, 10, dtype=torch.float64, requires_grad=True)
    target = torch.randn(10, dtype=torch.float64, requires_grad=True)
    grads = []
    for detach in (True, False):
        theta = class_ratios(means.detach(), target.detach()) if detach else class_ratios(means, target)
        ((theta @ means - target) ** 2).sum().backward()
        grads.append((means.grad.clone(), target.grad.clone()))
        means.grad, target.grad = None, None
    assert torch.allclose(grads[0][0], grads[1][0]) and torch.allclose(grads[0][1], grads[1][1])


def test_no_triplets_gives_a_differentiable_zero():
    embeddings = EMBEDDINGS.clone().requires_grad_()
    empty = tuple(torch.empty(0, dtype=torch.int64) for _ in range(3))
    value = AdaptedTripletLoss()(embeddings, LABELS, empty)
    value.backward()
    assert value.item() == 0 and torch.equal(embeddings.grad, torch.zeros_like(embeddings))


def test_every_triplet_selected_has_no_bias():
    torch.manual_seed(5)
    labels = torch.arange(3).repeat_interleave(4)
    x = torch.randn(12, 4)
    loss = AdaptedTripletLoss(match_weight=5.0)
    assert loss(x, labels).item() == pytest.approx(pml_triplet()(x, labels).item(), abs=1e-6)
    assert loss.on_train_epoch_end(hook_context()) == {"match_loss": pytest.approx(0.0, abs=1e-6)}


def test_weights_are_checked():
    with pytest.raises(ValueError, match="loss.match_weight=-1"):
        AdaptedTripletLoss(match_weight=-1)
    with pytest.raises(ValueError, match="data.unlabeled_fraction"):
        AdaptedTripletLoss(unlabeled_weight=1.0).setup(
            TrainingSet(10, np.arange(10), np.zeros(10), np.zeros(10, bool), 2, 1)
        )


# The semi-supervised part: hidden labels in the data module, Eq. 20 through the regularizer hook.


def test_regularizer_equals_hand_value_and_reaches_both_sides():
    # Selected class means of the hand batch: Phi^S_0 = (0.5, 0.5), Phi^S_1 = (3.2/7, 0.6); their
    # difference is (-3, 7) / 70. The unlabeled mean (1, 0) is off that line: with B - Phi^S_0 = (0.5, -0.5),
    # L_semi = 0.5 - (0.5 * 10 / sqrt(58))^2 = 0.5 - 25/58 = 2/29 = 0.068966 (theta = (7.03, -6.03), not
    # constrained to [0, 1], as in Eq. 18).
    unlabeled = torch.tensor([[2.0, 0.0], [1.0, 0.0]], requires_grad=True)
    embeddings = EMBEDDINGS.clone().requires_grad_()
    loss = AdaptedTripletLoss(match_weight=0.0, unlabeled_weight=3.0, unlabeled_batch_size=10)
    loss.setup(
        TrainingSet(
            5,
            np.arange(5),
            LABELS.numpy(),
            np.zeros(5, bool),
            2,
            1,
            [(u, -1, i) for i, u in enumerate(unlabeled)],
        )
    )
    loss(embeddings, LABELS, TRIPLETS)
    value = loss.regularizer(hook_context())
    assert value.item() == pytest.approx(3 * 2 / 29, abs=1e-6)
    value.backward()
    assert embeddings.grad.abs().sum() > 0 and unlabeled.grad.abs().sum() > 0
    assert loss.on_train_epoch_end(hook_context())["unlabeled_match_loss"] == pytest.approx(2 / 29, abs=1e-6)
    # Consumed: a step without a new loss call has no class means, hence no term.
    assert loss.regularizer(hook_context()) is None


def digits_module(fraction: float, noise=None, seed: int = 0) -> MetricDataModule:
    module = MetricDataModule(Digits(), noise or NoNoise(), P=10, K=6, seed=seed, unlabeled_fraction=fraction)
    module.setup("fit")
    return module


def test_hidden_labels_are_stratified_seeded_and_leave_the_batches():
    noise = UniformNoise(rate=0.4, seed=0)
    full, half = digits_module(0.0, noise), digits_module(0.5, noise)
    hidden = half.unlabeled_set
    hidden_indices = hidden.noisy.indices
    assert np.intersect1d(hidden_indices, half.noisy.indices).size == 0
    assert np.array_equal(np.union1d(hidden_indices, half.noisy.indices), full.noisy.indices)
    # Stratified by true class: half of each class's 124-128 samples, rounded half to even.
    per_class = np.bincount(hidden.noisy.true, minlength=10)
    expected = np.rint(np.bincount(full.noisy.true) * 0.5).astype(int)
    assert np.array_equal(per_class, expected)
    # The noise is drawn before hiding: the samples still labelled keep their noisy labels.
    kept = np.isin(full.noisy.indices, half.noisy.indices)
    assert np.array_equal(full.noisy.observed[kept], half.noisy.observed)
    assert all(item[1] == -1 for item in (hidden[0], hidden[len(hidden) - 1]))
    batched = {half.train_set[i][2] for batch in half.sampler for i in batch}
    assert len(batched) > 100 and not batched & set(hidden_indices.tolist())
    train_set = half.training_set()
    assert train_set.unlabeled is hidden and np.array_equal(train_set.indices, half.noisy.indices)
    assert half.noise_summary()["num_unlabeled"] == len(hidden) == 630
    assert np.array_equal(digits_module(0.5, noise).unlabeled_set.noisy.indices, hidden_indices)
    assert not np.array_equal(digits_module(0.5, noise, seed=1).unlabeled_set.noisy.indices, hidden_indices)
    assert full.unlabeled_set is None and full.training_set().unlabeled is None


def test_unlabeled_fraction_is_checked():
    with pytest.raises(ValueError, match=r"data.unlabeled_fraction=1.0 is outside \[0, 1\)"):
        MetricDataModule(Digits(), NoNoise(), P=10, K=6, unlabeled_fraction=1.0)


def test_facenet_semihard_config_mines_eq7(compose_config):
    cfg = compose_config("loss=adapted_triplet", "miner=facenet_semihard")
    miner, loss = instantiate(cfg.miner), instantiate(cfg.loss)
    assert isinstance(loss, AdaptedTripletLoss) and (loss.margin, loss.match_weight) == (0.2, 2.0)
    assert loss.distance.power == 2 and miner.distance.power == 2
    torch.manual_seed(6)
    labels = torch.arange(4).repeat_interleave(5)
    x = torch.randn(20, 8)
    mined = {tuple(t) for t in torch.stack(miner(x, labels), 1).tolist()}
    assert mined == {tuple(t) for t in torch.stack(semihard(x, labels), 1).tolist()} and mined


def test_semi_config_takes_the_match_weight(compose_config):
    cfg = compose_config("loss=semi_adapted_triplet", "loss.match_weight=0.5")
    loss = instantiate(cfg.loss)
    assert (loss.match_weight, loss.unlabeled_weight, loss.unlabeled_batch_size) == (0.5, 0.5, 60)


def finite(metrics: dict[str, float]) -> bool:
    return all(np.isfinite(v) for v in metrics.values())


@pytest.mark.slow
def test_adapted_triplet_trains_on_digits_with_lenet(compose_config):
    cfg = compose_config("loss=adapted_triplet", "miner=facenet_semihard", "backbone=lenet")
    metrics = train(cfg)
    assert finite(metrics) and metrics["test/recall@1"] > 0.3
    header = (Path(cfg.paths.output_dir) / "csv" / "metrics.csv").read_text().splitlines()[0]
    assert "train/match_loss" in header


@pytest.mark.slow
def test_semi_adapted_triplet_trains_on_digits(compose_config):
    cfg = compose_config("loss=semi_adapted_triplet", "miner=facenet_semihard", "data.unlabeled_fraction=0.5")
    metrics = train(cfg)
    assert finite(metrics) and metrics["test/recall@1"] > 0.3
    run_dir = Path(cfg.paths.output_dir)
    header = (run_dir / "csv" / "metrics.csv").read_text().splitlines()[0]
    assert "train/regularizer" in header and "train/unlabeled_match_loss" in header
    # Half of each class of the 1,131 training digits left after the 10% validation hold-out.
    with open(run_dir / "unlabeled.csv") as f:
        assert len(list(csv.DictReader(f))) == 565
    assert json.loads((run_dir / "results.json").read_text())["noise"]["num_unlabeled"] == 565


def test_semi_adapted_triplet_needs_hidden_labels(compose_config):
    with pytest.raises(ValueError, match="data.unlabeled_fraction"):
        train(compose_config("loss=semi_adapted_triplet", "miner=facenet_semihard"))
