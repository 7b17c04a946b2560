"""BSPML (Zhang et al. 2023): the weight step against Eq. 8 and Eq. 6, the weighted loss against Eq. 7,
the statistics of Eq. 14, and a digits run in which the flipped samples lose weight."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
from pytorch_metric_learning.distances import CosineSimilarity
from pytorch_metric_learning.losses import MultiSimilarityLoss
from pytorch_metric_learning.miners import MultiSimilarityMiner

from noisydml.losses import BSPMLLoss
from noisydml.losses.bspml import _distinct_draws, sample_terms, update_weights, weight_statistics
from noisydml.run.train import train
from training_sets import training_set

# --- Algorithm 3 / Eq. 8 on five samples, worked by hand --------------------------------------------
# Class 0 = {0, 1, 2} (N_0 = 3), class 1 = {3, 4} (N_1 = 2); lambda 1.5, mu 1, gamma 1. With K = 3 and
# P = 1 every other member of a class and the one other class are taken, so nothing is random.
XI_POS = np.array([0.5, 1.0, 2.0, 0.4, 0.6])
XI_NEG = np.array([0.1, 0.2, 0.3, 0.05, 0.15])
W0 = np.array([1.0, 0.5, 1.0, 1.0, 0.8])
LABELS = np.array([0, 0, 0, 1, 1])
# Step 1, a = 1:
#   G_p = 1/2 [w0 (xi+0 + xi+1) + w2 (xi+2 + xi+1)] = 1/2 [1.5 + 3.0] = 2.25
#   G_n = 1/1 * 1/2 [w3 (xi-3 + xi-1) + w4 (xi-4 + xi-1)] = 1/2 [0.25 + 0.8 * 0.35] = 0.265
#   class means 2.5/3 = 0.833333 and 1.8/2 = 0.9:  G_b = 2 (0.833333 - 0.9) = -0.133333
#   G = 1/3 (2.25 + 0.265 - 0.133333 - 1.5) = 0.293889;  w1 = 0.5 - 0.293889 = 0.206111
# Step 2, a = 2, with the new w1:  class 0 mean (1 + 0.206111 + 1)/3 = 0.735370
#   G_p = 1/2 [1 (0.5 + 2) + 0.206111 (1 + 2)] = 1.559167;  G_n = 1/2 [0.35 + 0.8 * 0.45] = 0.355
#   G_b = 2 (0.735370 - 0.9) = -0.329259;  G = 1/3 (1.559167 + 0.355 - 0.329259 - 1.5) = 0.028302
#   w2 = 1 - 0.028302 = 0.971698
# Step 3, a = 4 (class 1):  class 0 mean (1 + 0.206111 + 0.971698)/3 = 0.725936
#   G_p = w3 (xi+3 + xi+4) = 1.0
#   G_n = 1/3 [1 (.1 + .15) + 0.206111 (.2 + .15) + 0.971698 (.3 + .15)] = 0.253134
#   G_b = 2 (0.9 - 0.725936) = 0.348127;  G = 1/2 (1.0 + 0.253134 + 0.348127 - 1.5) = 0.050631
#   w4 = 0.8 - 0.050631 = 0.749369
HAND_STEPS = [
    ([1], [1.0, 0.206111, 1.0, 1.0, 0.8]),
    ([1, 2], [1.0, 0.206111, 0.971698, 1.0, 0.8]),
    ([1, 2, 4], [1.0, 0.206111, 0.971698, 1.0, 0.749369]),
]


def step(weights, labels, xi_pos, xi_neg, coordinates, age=1.5, mu=1.0, lr=1.0, P=1, K=3, seed=0):
    return update_weights(
        weights,
        labels,
        xi_pos,
        xi_neg,
        coordinates=np.asarray(coordinates),
        age=age,
        mu=mu,
        lr=lr,
        num_classes=P,
        num_samples=K,
        rng=np.random.default_rng(seed),
    )


@pytest.mark.parametrize("coordinates, expected", HAND_STEPS)
def test_weight_steps_equal_eq8_worked_by_hand(coordinates, expected):
    new = step(W0, LABELS, XI_POS, XI_NEG, coordinates)
    np.testing.assert_allclose(new, expected, atol=1e-6)


def test_weight_step_projects_onto_the_unit_interval():
    # a = 0: G = 1/3 (1.625 + 0.175 - 0.133333 - 1.5) = 0.055556 > 0 but a large step overshoots 0;
    # a = 3 with lambda 5: G < 0, and w3 = 1 stays at 1.
    assert step(W0, LABELS, XI_POS, XI_NEG, [0], lr=100.0)[0] == 0.0
    assert step(W0, LABELS, XI_POS, XI_NEG, [3], age=5.0, lr=100.0)[3] == 1.0


def eq6_objective(w, labels, xi_pos, xi_neg, age, mu):
    """Eq. 6 written out, reading its ``sum_k zeta(k) / (C-1) * 1/N_k`` as the mean of the other classes'
    mean weights (the printed 1/N^k stands outside the sum that binds k)."""
    classes = labels.unique()
    C = len(classes)
    sizes = torch.stack([(labels == c).sum() for c in classes]).double()
    zeta = torch.stack([w[labels == c].sum() for c in classes])
    means = zeta / sizes
    total = w.new_zeros(())
    for c in range(C):
        members = torch.where(labels == c)[0]
        other_means = (means.sum() - means[c]) / (C - 1)
        for a in members:
            total = total + w[a] / sizes[c] * (
                (zeta[c] - w[a]) / (sizes[c] - 1) * xi_pos[a] + other_means * xi_neg[a]
            )
    balance = sum((means[c] - means[k]) ** 2 for c in range(C) for k in range(c + 1, C))
    return total - age * means.sum() + mu / (C - 1) * balance


def test_eq8_with_every_sample_drawn_is_the_gradient_of_eq6():
    # Three classes of 3, 2 and 4 samples; K and P large enough to take everything: G is exact.
    gen = torch.Generator().manual_seed(0)
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    xi_pos = torch.rand(9, generator=gen, dtype=torch.float64) * 3
    xi_neg = torch.rand(9, generator=gen, dtype=torch.float64)
    w = (0.2 + 0.6 * torch.rand(9, generator=gen, dtype=torch.float64)).requires_grad_()
    age, mu, lr = 2.0, 3.0, 1e-3
    eq6_objective(w, labels, xi_pos, xi_neg, age, mu).backward()
    for a in range(9):
        new = step(
            w.detach().numpy(), labels.numpy(), xi_pos.numpy(), xi_neg.numpy(), [a], age, mu, lr, P=5, K=5
        )
        gradient = (w[a].item() - new[a]) / lr
        assert gradient == pytest.approx(w.grad[a].item(), rel=1e-9, abs=1e-12)


@pytest.mark.slow
def test_stochastic_eq8_is_unbiased():
    # K = 1 positive and P = 1 class of K = 1: the mean of many one-sample steps is the exact step.
    gen = torch.Generator().manual_seed(1)
    labels = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    xi_pos, xi_neg = np.asarray(torch.rand(9, generator=gen)) * 3, np.asarray(torch.rand(9, generator=gen))
    w = np.full(9, 0.5)
    exact = step(w, labels, xi_pos, xi_neg, [4], 2.0, 3.0, 1e-3, P=5, K=5)[4]
    stochastic = [
        step(w, labels, xi_pos, xi_neg, [4], 2.0, 3.0, 1e-3, P=1, K=1, seed=s)[4] for s in range(3000)
    ]
    assert np.mean(stochastic) == pytest.approx(exact, abs=2e-5)
    assert np.std(stochastic) > 1e-5


def test_distinct_draws_are_distinct_and_in_range():
    rng = np.random.default_rng(0)
    population = np.array([0, 1, 3, 5, 50])
    draws = _distinct_draws(np.repeat(population, 2000), 3, rng)
    for size, rows in zip(population, np.split(draws, len(population)), strict=True):
        valid = rows[rows >= 0].reshape(len(rows), -1)
        assert valid.shape[1] == min(3, size) and (valid < size).all()
        assert all(len(set(row)) == len(row) for row in valid)
        if size:
            # Uniform: every value drawn about equally often.
            counts = np.bincount(valid.ravel(), minlength=size)
            assert counts.min() > 0.8 * counts.mean()


# --- Eq. 3, Eq. 7, Eq. 14 ---------------------------------------------------------------------------


def test_sample_terms_equal_eq3_by_loops():
    torch.manual_seed(0)
    embeddings, labels = torch.randn(7, 3, dtype=torch.float64), torch.tensor([0, 0, 1, 1, 1, 2, 2])
    xi_pos, xi_neg = sample_terms(embeddings, labels, CosineSimilarity(), 2.0, 50.0, 1.0, chunk=3)
    sim = CosineSimilarity()(embeddings)
    for a in range(7):
        pos = [torch.exp(-2 * (sim[a, p] - 1)) for p in range(7) if p != a and labels[p] == labels[a]]
        neg = [torch.exp(50 * (sim[a, n] - 1)) for n in range(7) if labels[n] != labels[a]]
        assert xi_pos[a].item() == pytest.approx(torch.log(1 + sum(pos)).item() / 2, rel=1e-12)
        assert xi_neg[a].item() == pytest.approx(torch.log(1 + sum(neg)).item() / 50, rel=1e-12)


def loss_with_weights(weights: torch.Tensor, batch_indices: torch.Tensor) -> BSPMLLoss:
    loss = BSPMLLoss()
    loss.setup(training_set(np.arange(len(weights)) % 3))
    loss.weights.copy_(weights)
    loss.begin_batch(batch_indices)
    return loss


def brute_force_eq7(embeddings, labels, pairs, weights, alpha=2.0, beta=50.0, rho=1.0) -> float:
    """Eq. 7 by loops, reading |P_i|^alpha as alpha |P_i| (and |N_i|^beta as beta |N_i|)."""
    a1, p, a2, n = (t.tolist() for t in pairs)
    sim = CosineSimilarity()(embeddings)
    total = 0.0
    for i in range(len(embeddings)):
        positives = [q for a, q in zip(a1, p, strict=True) if a == i]
        negatives = [q for a, q in zip(a2, n, strict=True) if a == i]
        term = 0.0
        if positives:
            mean_w = sum(weights[q] for q in positives) / len(positives)
            term += (
                mean_w / alpha * np.log(1 + sum(np.exp(-alpha * (sim[i, q].item() - rho)) for q in positives))
            )
        if negatives:
            mean_w = sum(weights[q] for q in negatives) / len(negatives)
            term += (
                mean_w / beta * np.log(1 + sum(np.exp(beta * (sim[i, q].item() - rho)) for q in negatives))
            )
        total += weights[i] * term
    return total / len(embeddings)


def batch(seed=0, size=12, dim=4):
    gen = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(size, dim, generator=gen, dtype=torch.float64)
    labels = torch.arange(size) % 3
    return embeddings, labels


def test_weighted_loss_equals_eq7_by_loops():
    embeddings, labels = batch()
    # The batch is samples 19, 3, 7, ... of a 20-sample training set with weights in [0, 1].
    indices = torch.tensor([19, 3, 7, 0, 11, 5, 16, 2, 9, 14, 1, 8])
    weights = torch.rand(20, generator=torch.Generator().manual_seed(1))
    pairs = MultiSimilarityMiner(epsilon=0.1)(embeddings, labels)
    assert 0 < len(pairs[0]) < 12 * 3 and 0 < len(pairs[2]) < 12 * 8  # the mining removed some pairs
    value = loss_with_weights(weights, indices)(embeddings, labels, pairs)
    expected = brute_force_eq7(embeddings, labels, pairs, weights[indices].double().numpy())
    assert value.item() == pytest.approx(expected, rel=1e-6)


def test_unit_weights_give_pml_multi_similarity():
    embeddings, labels = batch(seed=2)
    pairs = MultiSimilarityMiner(epsilon=0.1)(embeddings, labels)
    value = loss_with_weights(torch.ones(12), torch.arange(12))(embeddings, labels, pairs)
    expected = MultiSimilarityLoss(alpha=2, beta=50, base=1)(embeddings, labels, pairs)
    assert value.item() == pytest.approx(expected.item(), rel=1e-9)


def test_weighted_loss_gradcheck():
    embeddings, labels = batch(seed=3, size=9, dim=3)
    pairs = MultiSimilarityMiner(epsilon=0.1)(embeddings, labels)
    weights = torch.rand(9, generator=torch.Generator().manual_seed(4))
    loss = loss_with_weights(weights, torch.arange(9))
    embeddings.requires_grad_()
    assert torch.autograd.gradcheck(lambda e: loss(e, labels, pairs), (embeddings,))


def test_triplets_are_refused_with_the_fix():
    embeddings, labels = batch()
    triplets = tuple(torch.tensor([0]) for _ in range(3))
    with pytest.raises(ValueError, match="miner=multi_similarity"):
        loss_with_weights(torch.ones(12), torch.arange(12))(embeddings, labels, triplets)


def test_loss_without_batch_indices_says_what_to_do():
    loss = BSPMLLoss()
    loss.setup(training_set([0, 1, 0, 1]))
    with pytest.raises(RuntimeError, match="begin_batch"):
        loss(torch.randn(4, 3), torch.tensor([0, 1, 0, 1]))


def test_weight_statistics_eq14_and_auc():
    # Class means 0.75 and 0.5: MAW 0.625, SDAW 0.125. 1 - w = [0, .5, 0, .6, .9]; flipped {1, 4}:
    # of the 6 (flipped, clean) pairs, (.5 vs .6) is the one misordered: AUC 5/6.
    weights = np.array([1.0, 0.5, 1.0, 0.4, 0.1])
    labels = np.array([0, 0, 1, 1, 1])
    stats = weight_statistics(weights, labels, np.array([0, 1, 0, 0, 1], bool))
    assert stats == pytest.approx(
        {"maw": 0.625, "sdaw": 0.125, "weight_flipped": 0.3, "weight_clean": 0.8, "flipped_auc": 5 / 6}
    )
    clean = weight_statistics(weights, labels, np.zeros(5, bool))
    assert set(clean) == {"maw", "sdaw", "weight_clean"}


def test_setup_sizes_the_weights_and_they_are_saved(tmp_path: Path):
    loss = BSPMLLoss(age_init=2.0)
    loss.setup(training_set([0, 1, 1], num_indices=10))
    assert loss.weights.shape == (10,) and set(loss.state_dict()) >= {"weights", "age"}
    loss.weights[1] = 0.25
    loss.save(tmp_path)
    with open(tmp_path / "sample_weights.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["index"]), float(r["weight"])) for r in rows] == [(0, 1.0), (1, 0.25), (2, 1.0)]


@pytest.mark.parametrize(
    "key, value", [("age_growth", 0.9), ("age_max", 0.5), ("weight_lr", 0.0), ("weight_samples", 0)]
)
def test_bad_parameters_name_the_key(key, value):
    with pytest.raises(ValueError, match=f"loss.{key}={value}"):
        BSPMLLoss(**{key: value})


# --- end to end -------------------------------------------------------------------------------------


def read_epoch_logs(run_dir: Path) -> list[dict[str, float]]:
    with open(run_dir / "csv" / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("train/maw")]
    return [{k: float(v) for k, v in r.items() if v} for r in rows]


@pytest.mark.parametrize("age_max", [3.0])
def test_digits_schedule_ends_at_lambda_inf_with_mu_equal_to_it(compose_config, age_max):
    # Algorithm 1's age grows to lambda_inf and the paper sets mu = lambda_inf: the digits comparison's
    # 5 epochs must spend their last weight step at the tuned lambda_inf, whatever it is in [1, 5].
    cfg = compose_config(
        "experiment=digits/zhang2023_noise",
        "method=zhang2023/bspml",
        f"loss.age_max={age_max}",
        "data.batches_per_epoch=1",
        "loss.weight_sweeps=0.1",
        "data.val_fraction=0",
        # Shortened (one batch an epoch, a tenth of a sweep): another run than the experiment's.
        "name=schedule",
        "report.figure=tests/schedule",
        tiny=False,
    )
    assert cfg.loss.mu == age_max and cfg.trainer.max_epochs == 5
    train(cfg)
    ages = [log["train/age"] for log in read_epoch_logs(Path(cfg.paths.output_dir))]
    assert len(ages) == 5 and ages[0] < age_max
    assert ages[-1] == pytest.approx(age_max) and ages == sorted(ages)


@pytest.mark.slow
def test_digits_flipped_samples_end_with_lower_weights(compose_config):
    # 30% of every class flipped. A shorter schedule than the default's (age 4 -> 5 over five epochs,
    # 20 epochs of 20 batches): the age starts at its maximum, and three epochs of 8 batches.
    cfg = compose_config(
        "loss=bspml",
        "miner=multi_similarity",
        "noise=exact",
        "noise.rate=0.3",
        "trainer.max_epochs=3",
        "data.batches_per_epoch=8",
        "loss.age_init=5.0",
        # The separation below was measured with every one of the 1,257 training digits trained on.
        "data.val_fraction=0",
    )
    metrics = train(cfg)
    assert all(np.isfinite(v) for v in metrics.values())
    run_dir = Path(cfg.paths.output_dir)
    logs = read_epoch_logs(run_dir)
    assert [log["train/age"] for log in logs] == [5.0, 5.0, 5.0]
    last = logs[-1]
    assert last["train/weight_flipped"] < last["train/weight_clean"] - 0.01
    assert last["train/flipped_auc"] > 0.65
    assert 0.5 < last["train/maw"] <= 1.0 and last["train/sdaw"] < 0.05

    with open(run_dir / "sample_weights.csv") as f:
        saved = {int(r["index"]): float(r["weight"]) for r in csv.DictReader(f)}
    with open(run_dir / "labels.csv") as f:
        flipped = {int(r["index"]): r["true"] != r["observed"] for r in csv.DictReader(f)}
    assert saved.keys() == flipped.keys()
    noisy = np.mean([w for i, w in saved.items() if flipped[i]])
    clean = np.mean([w for i, w in saved.items() if not flipped[i]])
    assert noisy == pytest.approx(last["train/weight_flipped"], abs=1e-6)
    assert clean == pytest.approx(last["train/weight_clean"], abs=1e-6)
