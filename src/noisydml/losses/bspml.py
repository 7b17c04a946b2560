"""Balanced self-paced metric learning, BSPML (Zhang, Luo & Gu 2023): multi-similarity with sample weights.

Every training sample ``i`` carries a weight ``w_i`` in [0, 1] (Eq. 6), held here for the whole
training set. Algorithm 1 alternates two sub-problems, once per outer iteration, which is one epoch
here:

1. theta with w fixed (Algorithm 2): every step of the epoch minimises the weighted informative
   batch loss of Eq. 7 on the pairs that ``MultiSimilarityMiner`` (Eq. 4-5, epsilon 0.1) selects;
   the module's optimizer takes these steps.
2. w with theta fixed (Algorithm 3), at the end of the epoch: the per-sample multi-similarity terms
   xi+ and xi- of Eq. 3 are computed over the whole training set with the current network, then
   ``weight_sweeps`` x n doubly stochastic projected coordinate gradient updates of Eq. 8 are made
   (n training samples).
3. The age grows: lambda_t = min(c * lambda_{t-1}, lambda_inf) (Algorithm 1, line 5).

Checks and departures (see the tests for the numbers):

- Eq. 7 prints the pair-weight normalisers as ``|P_i|^alpha`` and ``|N_i|^beta``. Eq. 6, which Eq. 7
  is the mini-batch form of, has ``(zeta(c) - w_a) / (N_c - 1) * xi+`` with
  ``xi+ = (1/alpha) log(...)``: the mean weight of the positives times xi+. ``|N_i|^50`` would make the
  negative term vanish, so the exponents are read as products: ``sum_p w_p / (alpha |P_i|)``.
- Eq. 8 was derived again from Eq. 6: with every positive and every class sampled (K >= N_c - 1,
  P >= C - 1) it is exactly dL/dw_a, including the factor 1/N_c and the balance gradient
  ``2 mu (w_bar_c - mean_{k != c} w_bar_k)``.
- The paper gives neither the step size gamma nor the number of coordinate updates of Algorithm 3,
  nor lambda_0 and c; they are parameters here (``weight_lr``, ``weight_sweeps``, ``age_init``,
  ``age_growth``) with the defaults of ``conf/loss/bspml.yaml``. gamma is constant within a weight
  phase (Theorem 1 allows any non-increasing steps below 2 / L_max = min_c N_c^2 / mu).
- The xi of Eq. 8 are those of Eq. 3, over all pairs of the training set (not only a batch's), computed
  on the training samples with the test transform and the observed labels.

What the weights do depends on the age against the scale of xi+, which is at least log(N_c - 1) / alpha.
Where the age is well below 2 mean(xi+) (on digits, N_c ~ 126: xi+ ~ 2.4, so any lambda < ~4.5), the
weights settle near lambda / (2 mean(xi+)) for every sample alike: the per-sample signal in G,
w_bar_c xi+_a, is then far smaller than the sampling noise of G_p, which grows with the spread of the
partners' weights. Near the top of the paper's range (lambda ~ 5) the partners' weights stay near 1,
G_p is nearly noise-free and the flipped samples are the ones that lose weight; hence small steps
over many updates (gamma 10, 30 sweeps). The paper tunes lambda_inf in [1, 5] per data set;
``conf/loss/bspml.yaml`` starts the age at 0.8 lambda_inf and grows it by 1.1, so it reaches lambda_inf
at the fourth weight step.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import torch
from pytorch_metric_learning.distances import BaseDistance, CosineSimilarity
from pytorch_metric_learning.reducers import BaseReducer, MeanReducer
from pytorch_metric_learning.utils import common_functions as c_f
from pytorch_metric_learning.utils import loss_and_miner_utils as lmu
from sklearn.metrics import roc_auc_score

from noisydml.core.hooks import HookContext, TrainingSet
from noisydml.losses.pair import MultiSimilarityLoss
from noisydml.utils.atomic import atomic_write
from noisydml.utils.run_directory import RunDir


class BSPMLLoss(MultiSimilarityLoss):
    """Weighted informative multi-similarity loss (Eq. 7) with the sample weights of Eq. 6.

    Call with the pairs of ``pytorch_metric_learning.miners.MultiSimilarityMiner`` (Eq. 4-5); with no
    pairs it uses every pair of the batch. ``alpha``, ``beta`` and ``rho`` are the multi-similarity
    parameters (PML calls rho ``base``). ``age_init``, ``age_growth`` and ``age_max`` are lambda_0,
    c and lambda_inf of Algorithm 1; ``mu`` weighs the balance term. Algorithm 3 makes
    ``weight_sweeps * n`` coordinate updates of step ``weight_lr`` at each epoch's end (n training
    samples), each from ``weight_samples`` (K) positives and ``weight_classes`` (P) other classes of
    K samples each. ``seed`` fixes those draws.
    """

    def __init__(
        self,
        alpha: float = 2.0,
        beta: float = 50.0,
        rho: float = 1.0,
        age_init: float = 4.0,
        age_growth: float = 1.1,
        age_max: float = 5.0,
        mu: float = 5.0,
        weight_lr: float = 10.0,
        weight_sweeps: float = 30.0,
        weight_classes: int = 16,
        weight_samples: int = 4,
        seed: int = 0,
        distance: BaseDistance | None = None,
        reducer: BaseReducer | None = None,
        **kwargs,
    ):
        super().__init__(alpha=alpha, beta=beta, base=rho, distance=distance, reducer=reducer, **kwargs)
        c_f.assert_distance_type(self, CosineSimilarity)
        rules = [
            ("age_init", age_init, age_init > 0, "> 0"),
            ("age_growth", age_growth, age_growth >= 1, ">= 1"),
            ("age_max", age_max, age_max >= age_init, f">= loss.age_init={age_init}"),
            ("mu", mu, mu >= 0, ">= 0"),
            ("weight_lr", weight_lr, weight_lr > 0, "> 0"),
            ("weight_sweeps", weight_sweeps, weight_sweeps >= 0, ">= 0"),
            ("weight_classes", weight_classes, weight_classes >= 1, ">= 1"),
            ("weight_samples", weight_samples, weight_samples >= 1, ">= 1"),
        ]
        for key, value, ok, rule in rules:
            if not ok:
                raise ValueError(f"loss.{key}={value} is out of range: it must be {rule}")
        self.age_init, self.age_growth, self.age_max = age_init, age_growth, age_max
        self.mu = mu
        self.weight_lr = weight_lr
        self.weight_sweeps = weight_sweeps
        self.weight_classes, self.weight_samples = weight_classes, weight_samples
        self.seed = seed
        # Per data-set index; sized in setup, before a checkpoint's values are loaded into it.
        self.register_buffer("weights", torch.ones(0))
        self.register_buffer("age", torch.tensor(float(age_init), dtype=torch.float64))
        self._train_set: TrainingSet | None = None
        self._batch_indices: torch.Tensor | None = None

    # --- the protocol with the training module -------------------------------------------------

    def setup(self, train_set: TrainingSet) -> None:
        if train_set.num_classes < 2:
            raise ValueError(
                f"loss=bspml needs at least 2 training classes, got {train_set.num_classes}: "
                f"its negative and balance terms compare classes"
            )
        self._train_set = train_set
        self.weights = torch.ones(train_set.num_indices, device=self.weights.device)
        self.age.fill_(self.age_init)

    def begin_batch(self, indices: torch.Tensor) -> None:
        self._batch_indices = indices

    def on_train_epoch_end(self, context: HookContext) -> dict[str, float]:
        """Algorithm 3 on every training sample's weight with the network fixed, then the age step."""
        train_set = self._require_setup()
        embedded = context.embed_training_set()
        # Rows in the order of train_set.indices (the embedded set is in ascending index order).
        rows = np.searchsorted(embedded.indices, train_set.indices).clip(max=len(embedded.indices) - 1)
        if not np.array_equal(embedded.indices[rows], train_set.indices):
            raise RuntimeError(
                f"BSPMLLoss: the training set embedded ({len(embedded.indices)} samples) lacks samples of "
                f"setup(train_set) ({len(train_set.indices)}): the context must embed every sample trained on"
            )
        embeddings = torch.as_tensor(embedded.embeddings[rows], device=self.weights.device)
        labels = torch.as_tensor(train_set.labels, device=embeddings.device)
        xi_pos, xi_neg = sample_terms(embeddings, labels, self.distance, self.alpha, self.beta, self.base)
        rng = np.random.default_rng([self.seed, context.epoch])
        indices = torch.as_tensor(train_set.indices, device=self.weights.device)
        age = float(self.age)
        weights = update_weights(
            self.weights[indices].double().cpu().numpy(),
            train_set.labels,
            xi_pos.double().cpu().numpy(),
            xi_neg.double().cpu().numpy(),
            coordinates=rng.integers(len(indices), size=round(self.weight_sweeps * len(indices))),
            age=age,
            mu=self.mu,
            lr=self.weight_lr,
            num_classes=self.weight_classes,
            num_samples=self.weight_samples,
            rng=rng,
        )
        self.weights[indices] = torch.as_tensor(weights, dtype=self.weights.dtype, device=self.weights.device)
        self.age.fill_(min(self.age_growth * age, self.age_max))
        return {
            "age": age,
            **weight_statistics(weights, train_set.labels, train_set.flipped),
            **super().on_train_epoch_end(context),
        }

    def save(self, run_dir: Path) -> None:
        """``sample_weights.csv``: ``index,weight`` for every sample the run trained on."""
        train_set = self._require_setup()
        weights = self.weights[torch.as_tensor(train_set.indices, device=self.weights.device)]
        with atomic_write(RunDir(run_dir).sample_weights) as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(["index", "weight"])
            writer.writerows(zip(train_set.indices.tolist(), weights.tolist(), strict=True))

    def _require_setup(self) -> TrainingSet:
        if self._train_set is None:
            raise RuntimeError(
                "BSPMLLoss.setup(train_set) was not called: the training module calls it at fit; "
                "outside a Trainer call it with MetricDataModule.training_set()"
            )
        return self._train_set

    # --- Eq. 7 ----------------------------------------------------------------------------------

    def compute_loss(self, embeddings, labels, indices_tuple, ref_emb, ref_labels):
        # The weights are looked up by the batch's own indices; reference embeddings have none.
        c_f.ref_not_supported(embeddings, labels, ref_emb, ref_labels)
        if indices_tuple is not None and len(indices_tuple) == 3:
            raise ValueError(
                "loss=bspml got triplets from the miner; Eq. 7 weighs the informative pairs of Eq. 4-5: "
                "use miner=multi_similarity"
            )
        return super().compute_loss(embeddings, labels, indices_tuple, ref_emb, ref_labels)

    def _compute_loss(self, mat, pos_mask, neg_mask):
        weights = self._batch_weights(len(mat)).to(mat.dtype)
        pos_mask, neg_mask = pos_mask.bool(), neg_mask.bool()
        pos_term = lmu.logsumexp(
            self.alpha * self.distance.margin(mat, self.base), keep_mask=pos_mask, add_one=True
        ).squeeze(1)
        neg_term = lmu.logsumexp(
            self.beta * self.distance.margin(self.base, mat), keep_mask=neg_mask, add_one=True
        ).squeeze(1)
        losses = weights * (
            mean_partner_weight(pos_mask, weights) * pos_term / self.alpha
            + mean_partner_weight(neg_mask, weights) * neg_term / self.beta
        )
        return {
            "loss": {
                "losses": losses,
                "indices": c_f.torch_arange_from_size(mat),
                "reduction_type": "element",
            }
        }

    def _batch_weights(self, batch_size: int) -> torch.Tensor:
        if self._train_set is None and len(self.weights) == 0:
            raise RuntimeError(
                "BSPMLLoss weighs each training sample by its index (Eq. 6-7): call loss.setup(train_set) "
                "once, loss.begin_batch(indices) before each call and loss.on_train_epoch_end(context) after "
                "each epoch (docs/library.md), or train it with noisydml method=zhang2023/bspml"
            )
        if self._batch_indices is None or len(self._batch_indices) != batch_size:
            got = None if self._batch_indices is None else len(self._batch_indices)
            raise RuntimeError(
                f"BSPMLLoss needs the data-set indices of the batch's {batch_size} samples (got {got}): "
                f"call begin_batch(indices) before the loss, as the training module does"
            )
        if len(self.weights) == 0:
            self._require_setup()
        return self.weights[self._batch_indices.to(self.weights.device)]

    def get_default_reducer(self) -> BaseReducer:
        # Eq. 7 averages over all P K anchors, those without informative pairs included.
        return MeanReducer()


def mean_partner_weight(mask: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Per anchor, the mean weight of its partners in ``mask`` (0 with none): Eq. 7's sum_p w_p / |P_i|."""
    return (mask * weights).sum(dim=1) / mask.sum(dim=1).clamp(min=1)


def sample_terms(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    distance: BaseDistance,
    alpha: float,
    beta: float,
    rho: float,
    chunk: int = 1024,
) -> tuple[torch.Tensor, torch.Tensor]:
    """xi+ and xi- of Eq. 3 for every sample, over all its positive and negative pairs in ``embeddings``.

    ``xi+_a = (1/alpha) log(1 + sum_{p != a, y_p = y_a} exp(-alpha (S_ap - rho)))`` and
    ``xi-_a = (1/beta) log(1 + sum_{y_n != y_a} exp(beta (S_an - rho)))``; rows are done ``chunk`` at a
    time so the full similarity matrix is never held.
    """
    xi_pos, xi_neg = [], []
    with torch.no_grad():
        for start in range(0, len(embeddings), chunk):
            rows = slice(start, start + chunk)
            sim = distance(embeddings[rows], embeddings)
            same = labels[rows, None] == labels[None, :]
            rows_here = torch.arange(sim.shape[0], device=labels.device)
            same[rows_here, rows_here + start] = False
            diff = labels[rows, None] != labels[None, :]
            xi_pos.append(lmu.logsumexp(alpha * distance.margin(sim, rho), keep_mask=same).squeeze(1) / alpha)
            xi_neg.append(lmu.logsumexp(beta * distance.margin(rho, sim), keep_mask=diff).squeeze(1) / beta)
    return torch.cat(xi_pos), torch.cat(xi_neg)


def update_weights(
    weights: np.ndarray,
    labels: np.ndarray,
    xi_pos: np.ndarray,
    xi_neg: np.ndarray,
    coordinates: np.ndarray,
    age: float,
    mu: float,
    lr: float,
    num_classes: int,
    num_samples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Algorithm 3: one projected coordinate gradient step of Eq. 8 for each entry of ``coordinates``.

    Arrays are indexed by position (one entry per training sample); ``labels`` are the observed
    classes. Step t updates ``w_a``, ``a = coordinates[t]``, of class c with

        G = (G_p + G_n + G_b - age) / N_c
        G_p = 1/K sum_p w_p (xi+_p + xi+_a)                 over K other samples of class c
        G_n = 1/P sum_k 1/K sum_n w_n (xi-_n + xi-_a)       over P other classes, K samples each
        G_b = 2 mu (w_bar_c - 1/(C-1) sum_{k != c} w_bar_k) w_bar_c: class c's mean weight
        w_a <- clip(w_a - lr G, 0, 1)

    The samples are drawn without replacement (all of them where a class or the set of classes is
    smaller than asked), and every step sees the weights the previous steps left.
    """
    weights = np.array(weights, dtype=np.float64)
    classes, labels = np.unique(labels, return_inverse=True)
    num_total_classes = len(classes)
    if num_total_classes < 2:
        raise ValueError(f"update_weights needs at least 2 classes, got {num_total_classes}")
    sizes = np.bincount(labels)
    order = np.argsort(labels, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order)) - starts[labels[order]]

    coordinates = np.asarray(coordinates, dtype=np.int64)
    if len(coordinates) == 0:
        return weights
    own = labels[coordinates]
    # K other members of the own class: draw among N_c - 1 slots, skip the anchor's own slot.
    slot = _distinct_draws(sizes[own] - 1, num_samples, rng)
    slot = slot + (slot >= rank[coordinates, None])
    positives = np.where(slot >= 0, order[starts[own, None] + np.maximum(slot, 0)], 0)
    pos_coef = np.where(slot >= 0, xi_pos[positives] + xi_pos[coordinates, None], 0.0)
    pos_coef /= np.maximum((slot >= 0).sum(axis=1, keepdims=True), 1)

    # P other classes, then K members of each.
    other = _distinct_draws(np.full(len(coordinates), num_total_classes - 1), num_classes, rng)
    other = other + (other >= own[:, None])
    num_other = min(num_classes, num_total_classes - 1)
    other_sizes = np.where(other >= 0, sizes[np.maximum(other, 0)], 0)
    member = _distinct_draws(other_sizes.reshape(-1), num_samples, rng).reshape(*other.shape, -1)
    negatives = np.where(
        member >= 0, order[starts[np.maximum(other, 0)][..., None] + np.maximum(member, 0)], 0
    )
    neg_coef = np.where(member >= 0, xi_neg[negatives] + xi_neg[coordinates, None, None], 0.0)
    neg_coef /= np.maximum((member >= 0).sum(axis=2, keepdims=True), 1) * num_other
    negatives, neg_coef = negatives.reshape(len(coordinates), -1), neg_coef.reshape(len(coordinates), -1)

    class_sum = np.bincount(labels, weights=weights, minlength=num_total_classes)
    mean_sum = float((class_sum / sizes).sum())
    for t, a in enumerate(coordinates):
        c = own[t]
        mean_c = class_sum[c] / sizes[c]
        balance = 2 * mu * (mean_c - (mean_sum - mean_c) / (num_total_classes - 1))
        gradient = (
            weights[positives[t]] @ pos_coef[t] + weights[negatives[t]] @ neg_coef[t] + balance - age
        ) / sizes[c]
        new = min(max(weights[a] - lr * gradient, 0.0), 1.0)
        class_sum[c] += new - weights[a]
        mean_sum += (new - weights[a]) / sizes[c]
        weights[a] = new
    return weights


def _distinct_draws(population: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Row i: min(k, population[i]) distinct integers of [0, population[i]), padded with -1 to k columns.

    Floyd's algorithm, vectorised over rows: each row is a uniformly random subset.
    """
    population = np.asarray(population, dtype=np.int64)
    count = np.minimum(k, population)
    drawn = np.full((len(population), k), -1, dtype=np.int64)
    uniform = rng.random((len(population), k))
    for i in range(k):
        top = population - count + i
        pick = np.minimum((uniform[:, i] * (top + 1)).astype(np.int64), top)
        taken = (drawn[:, :i] == pick[:, None]).any(axis=1)
        drawn[:, i] = np.where(i < count, np.where(taken, top, pick), -1)
    return drawn


def weight_statistics(weights: np.ndarray, labels: np.ndarray, flipped: np.ndarray) -> dict[str, float]:
    """MAW and SDAW of Eq. 14 over the observed classes, and how well 1 - w finds the flipped labels.

    ``flipped_auc`` is the ROC AUC of 1 - w as a score for "this label was flipped" (0.5: no better than
    chance); with no flipped or no clean sample it is undefined and left out, as are the mean weights
    ``weight_flipped`` and ``weight_clean`` of a group that is empty. ``flipped`` is a diagnostic only.
    """
    _, labels = np.unique(labels, return_inverse=True)
    class_means = np.bincount(labels, weights=weights) / np.bincount(labels)
    stats = {"maw": float(class_means.mean()), "sdaw": float(class_means.std())}
    flipped = np.asarray(flipped, dtype=bool)
    if flipped.any():
        stats["weight_flipped"] = float(weights[flipped].mean())
    if not flipped.all():
        stats["weight_clean"] = float(weights[~flipped].mean())
    if flipped.any() and not flipped.all():
        stats["flipped_auc"] = float(roc_auc_score(flipped, 1 - weights))
    return stats
