"""Adapted triplet loss of Yu et al. 2018 (Eq. 15) and its semi-supervised matching term (Eq. 18-20).

The triplet loss is trained on the *selected* triplets D_S (a miner's output), while the target is the
set D_T of *all* triplets of the batch (Eq. 6). Yu et al. measure the selection bias on the
"triplet-induced data" (Eq. 9): the multiset of points met when listing every triplet's anchor, positive
and negative, so a point counts once per role per triplet it appears in. The matching loss (Eq. 12) is

    L_match = sum_y || Phi^S_y - Phi^T_y ||^2,

with Phi^S_y, Phi^T_y the class-y means of the induced data of D_S and D_T (Eq. 13, 14), each point
weighted by its multiplicity there.

What "all triplets" gives, derived (checked against enumeration in the tests): in a batch of N points
with n_c points of class c, a point of class y appears

    as an anchor   (n_y - 1)(N - n_y) times   (its positives times its negatives),
    as a positive  (n_y - 1)(N - n_y) times   (every anchor of its class, times that anchor's negatives),
    as a negative  sum_{c != y} n_c (n_c - 1) times   (every ordered positive pair of another class).

The count depends on the point's class only, so Phi^T_y is the plain mean of the batch's class-y points
(in a P x K batch every point has the same count, 3 K (K - 1)(P - 1); the paper's total of
k(k-1)c^2(c-1) triplets, Sec. 3.2, times 3 points, over PK points). Phi^S_y by contrast weights points
by how often the miner picked them.

The semi-supervised term (Sec. 3.4) matches the selected triplets' class means against unlabeled data:
the class ratios theta of the unlabeled data solve Eq. 18 (least squares with sum theta = 1), and

    L_semi = || sum_y theta_y Phi^S_y - Phi^T2 ||^2                         (Eq. 20)

with Phi^T2 the mean embedding of an unlabeled batch.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from pytorch_metric_learning.distances import BaseDistance, LpDistance
from pytorch_metric_learning.losses import TripletMarginLoss
from pytorch_metric_learning.reducers import BaseReducer, MeanReducer
from pytorch_metric_learning.utils import loss_and_miner_utils as lmu
from torch.utils.data import Dataset
from torch.utils.data.dataloader import default_collate

from noisydml.core.hooks import HookContext, TrainingHooks, TrainingSet

IndexTriplets = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def induced_counts(triplets: IndexTriplets, num_points: int, dtype: torch.dtype) -> torch.Tensor:
    """How often each of ``num_points`` points occurs in the data induced by ``triplets`` (Eq. 9)."""
    return torch.bincount(torch.cat(triplets), minlength=num_points).to(dtype)


def all_triplets_counts(labels: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """How often each point occurs in the data induced by every triplet of the batch (Eq. 6, 9).

    The closed form derived in the module docstring: ``2 (n_y - 1)(N - n_y) + sum_{c != y} n_c (n_c - 1)``
    for a point of class y, so no N^3 list of triplets is built.
    """
    _, inverse, sizes = torch.unique(labels, return_inverse=True, return_counts=True)
    sizes = sizes.to(dtype)
    ordered_pairs = sizes * (sizes - 1)
    per_class = 2 * (sizes - 1) * (len(labels) - sizes) + ordered_pairs.sum() - ordered_pairs
    return per_class[inverse]


def class_means(
    points: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted class-conditional means (Eq. 13, 14) of every class in ``labels``, in ``torch.unique``
    order, and a mask of the classes with a non-zero total weight (the others' means are 0)."""
    _, inverse = torch.unique(labels, return_inverse=True)
    num_classes = int(inverse.max()) + 1
    sums = torch.zeros(num_classes, points.shape[1], dtype=points.dtype, device=points.device)
    sums = sums.index_add(0, inverse, weights.unsqueeze(1) * points)
    totals = torch.zeros(num_classes, dtype=points.dtype, device=points.device).index_add(0, inverse, weights)
    present = totals > 0
    return sums / totals.clamp_min(torch.finfo(points.dtype).tiny).unsqueeze(1), present


def matching_loss(points: torch.Tensor, labels: torch.Tensor, triplets: IndexTriplets) -> torch.Tensor:
    """``sum_y || Phi^S_y - Phi^T_y ||^2`` (Eq. 12) over the classes the selected triplets touch.

    A class of the batch that no selected triplet touches has no Phi^S_y (P^S(Y = y) = 0): there is no
    conditional distribution to match, so it adds nothing.
    """
    _, inverse = torch.unique(labels, return_inverse=True)
    num_classes = int(inverse.max()) + 1
    selected = induced_counts(triplets, len(points), points.dtype)
    every = all_triplets_counts(labels, points.dtype)
    selected_totals = selected.new_zeros(num_classes).index_add(0, inverse, selected)
    every_totals = every.new_zeros(num_classes).index_add(0, inverse, every)
    # Each point's weight in Phi^S_y minus its weight in Phi^T_y (0 in untouched classes): one weighted
    # sum of the points per class is then Phi^S_y - Phi^T_y, O(N d) operations in a handful of calls.
    weights = torch.where(
        (selected_totals > 0)[inverse],
        selected / selected_totals[inverse].clamp_min(1) - every / every_totals[inverse],
        0,
    )
    differences = points.new_zeros(num_classes, points.shape[1])
    return (differences.index_add(0, inverse, weights[:, None] * points) ** 2).sum()


def class_ratios(class_means: torch.Tensor, target_mean: torch.Tensor) -> torch.Tensor:
    """The theta of Eq. 18: ``argmin || sum_y theta_y Phi_y - target ||^2`` subject to ``sum theta = 1``.

    Eq. 19 as printed, ``theta_{1:} = (A^T A)^{-1} A^T B`` with ``B = Phi^T2``, is a misprint: substituting
    ``theta_0 = 1 - sum theta_{1:}`` turns the objective into ``|| A theta_{1:} - (B - Phi_0) ||^2``, so the
    right-hand side is ``B - Phi_0``. (Class means e1, e2, e3 in R^3 and target 0.2 e1 + 0.3 e2 + 0.5 e3:
    the printed formula gives theta = (0.867, -0.033, 0.167), the corrected one (0.2, 0.3, 0.5).) The
    pseudo-inverse replaces ``(A^T A)^{-1} A^T`` so that coincident class means (rank-deficient A) give
    the minimum-norm solution instead of failing. As in the paper, theta is not constrained to be >= 0.
    """
    if len(class_means) == 1:
        return torch.ones(1, dtype=class_means.dtype, device=class_means.device)
    first = class_means[0]
    differences = (class_means[1:] - first).T
    rest = torch.linalg.pinv(differences) @ (target_mean - first)
    return torch.cat([(1 - rest.sum()).unsqueeze(0), rest])


class AdaptedTripletLoss(TripletMarginLoss, TrainingHooks):
    """``L_triplet + match_weight * L_match`` (Yu et al. Eq. 15), plus ``unlabeled_weight * L_semi``.

    PML's interface: ``loss(embeddings, labels, indices_tuple)``, where ``indices_tuple`` are the
    selected triplets D_S. Yu et al. draw, for every anchor-positive pair, one negative at random with
    ``d2_ap <= d2_an < d2_ap + alpha`` on squared distances (Sec. 3.2, Eq. 7):
    :class:`noisydml.miners.SemihardPerPairMiner` (``miner=semihard_per_pair``); PML's
    ``TripletMarginMiner`` (``miner=facenet_semihard``) keeps every such negative. All triplets D_T come
    from the labels alone. Without ``indices_tuple`` the triplet loss uses every triplet, D_S = D_T, and
    L_match is 0.

    ``L_triplet`` is PML's ``TripletMarginLoss`` on the same triplets (squared L2 on the unit sphere by
    default, Eq. 4, 8), reduced by the reducer: ``MeanReducer`` by default (Eq. 8's sum over D_S divided
    by |D_S|), :class:`noisydml.losses.BatchSizeReducer` for the sum divided by the batch size, Caffe's
    normalisation under which the paper's lambda values were set (``method=yu2018/adapted_triplet``).
    With ``match_weight=0`` the value and gradient are exactly PML's. Both class means carry gradient:
    the loss moves the embeddings so that the selected points' class means follow the batch's.

    ``unlabeled_weight > 0`` adds Eq. 20 through :meth:`regularizer`: each step it embeds a random batch of
    ``unlabeled_batch_size`` samples whose labels the data module hid (``data.unlabeled_fraction``), so
    the gradient reaches both sides of Eq. 20 and nothing is stale. Eq. 18 fits only the classes that the
    step's selected triplets touch, so it needs batches holding every class (``data.P`` = the number of
    classes, as on MNIST); with fewer, the unlabeled mean is fitted by a subset of the classes, and a
    warning says so. theta is computed without gradient: at the optimum of Eq. 18 the derivative of the
    objective with respect to theta vanishes, so the gradient of Eq. 20 is the same either way.

    ``on_train_epoch_end`` logs the epoch's mean ``match_loss`` (unweighted Eq. 12, the measured bias) and,
    when on, ``unlabeled_match_loss`` (unweighted Eq. 20).
    """

    def __init__(
        self,
        margin: float = 0.2,
        match_weight: float = 2.0,
        unlabeled_weight: float = 0.0,
        unlabeled_batch_size: int = 60,
        distance: BaseDistance | None = None,
        reducer: BaseReducer | None = None,
        **kwargs,
    ):
        if match_weight < 0:
            raise ValueError(f"loss.match_weight={match_weight} must be >= 0 (lambda of Eq. 15)")
        if unlabeled_weight < 0:
            raise ValueError(f"loss.unlabeled_weight={unlabeled_weight} must be >= 0 (0 turns Eq. 20 off)")
        if unlabeled_batch_size < 1:
            raise ValueError(f"loss.unlabeled_batch_size={unlabeled_batch_size} must be >= 1")
        super().__init__(margin=margin, distance=distance, reducer=reducer, **kwargs)
        self.match_weight = match_weight
        self.unlabeled_weight = unlabeled_weight
        self.unlabeled_batch_size = unlabeled_batch_size
        self.add_to_recordable_attributes(list_of_names=["match_weight", "unlabeled_weight"], is_stat=False)
        self.unlabeled: Dataset | None = None
        self.num_classes: int | None = None
        self._selected_means: torch.Tensor | None = None
        self._warned_missing_classes = False
        # Epoch sums kept on the device, so logging them costs no synchronisation per step.
        self._sums: dict[str, torch.Tensor] = {}
        self._counts: dict[str, int] = {}

    def get_default_distance(self) -> BaseDistance:
        return LpDistance(normalize_embeddings=True, p=2, power=2)

    def get_default_reducer(self) -> BaseReducer:
        return MeanReducer()

    def _sub_loss_names(self) -> list[str]:
        return ["loss", "match_loss"]

    def _points(self, embeddings: torch.Tensor) -> torch.Tensor:
        """The embeddings the distance sees: Yu et al. L2-normalise before the loss (Sec. 4.1)."""
        return F.normalize(embeddings, dim=1) if self.distance.normalize_embeddings else embeddings

    def compute_loss(self, embeddings, labels, indices_tuple, ref_emb, ref_labels):
        if ref_emb is not embeddings:
            raise ValueError(
                "AdaptedTripletLoss got ref_emb: all triplets D_T are built within one batch; "
                "call loss(embeddings, labels, indices_tuple) without ref_emb"
            )
        if labels is None:
            raise ValueError("AdaptedTripletLoss needs labels: all triplets D_T (Eq. 6) come from them")
        triplets = lmu.convert_to_triplets(indices_tuple, labels, ref_labels, self.triplets_per_anchor)
        losses = super().compute_loss(embeddings, labels, triplets, ref_emb, ref_labels)
        self._selected_means = None
        if len(triplets[0]) == 0:
            return losses
        points = self._points(embeddings)
        match = matching_loss(points, labels, triplets)
        self._accumulate("match_loss", match)
        if self.unlabeled_weight > 0:
            means, touched = class_means(points, labels, induced_counts(triplets, len(points), points.dtype))
            self._selected_means = means[touched]
        losses["match_loss"] = {
            "losses": self.match_weight * match,
            "indices": None,
            "reduction_type": "already_reduced",
        }
        return losses

    def reads_unlabeled(self) -> bool:
        return self.unlabeled_weight > 0

    def setup(self, train_set: TrainingSet) -> None:
        if self.unlabeled_weight > 0 and (train_set.unlabeled is None or len(train_set.unlabeled) == 0):
            raise ValueError(
                f"loss.unlabeled_weight={self.unlabeled_weight} needs unlabeled training samples, but the "
                "data module hides no labels: set data.unlabeled_fraction in (0, 1), e.g. 0.5"
            )
        self.unlabeled = train_set.unlabeled
        self.num_classes = train_set.num_classes

    def regularizer(self, context: HookContext) -> torch.Tensor | None:
        """``unlabeled_weight * L_semi`` (Eq. 20) against the class means of the last loss call."""
        if self.unlabeled_weight == 0:
            return None
        if self.unlabeled is None:
            raise RuntimeError("AdaptedTripletLoss.regularizer before setup(): no unlabeled samples known")
        selected, self._selected_means = self._selected_means, None
        if selected is None:
            # No selected triplet this step: no class means to fit the unlabeled mean with.
            return None
        count = min(self.unlabeled_batch_size, len(self.unlabeled))
        # torch's global generator, seeded by seed_everything, so the draws are reproducible.
        positions = torch.randperm(len(self.unlabeled))[:count].tolist()
        inputs = default_collate([self.unlabeled[i][0] for i in positions]).to(context.device)
        target = self._points(context.embed(inputs)).mean(dim=0)
        missing = self.num_classes is not None and len(selected) < self.num_classes
        if missing and not self._warned_missing_classes:
            self._warned_missing_classes = True
            warnings.warn(
                f"loss.unlabeled_weight: Eq. 18 fits the unlabeled mean with {len(selected)} of "
                f"{self.num_classes} class means (the classes of this batch's selected triplets); set "
                "data.P to the number of classes for the paper's estimate",
                stacklevel=2,
            )
        theta = class_ratios(selected.detach(), target.detach())
        semi = ((theta @ selected - target) ** 2).sum()
        self._accumulate("unlabeled_match_loss", semi)
        return self.unlabeled_weight * semi

    def _accumulate(self, name: str, value: torch.Tensor) -> None:
        self._sums[name] = self._sums.get(name, 0) + value.detach()
        self._counts[name] = self._counts.get(name, 0) + 1

    def on_train_epoch_end(self, context: HookContext) -> dict[str, float]:
        logs = {name: (total / self._counts[name]).item() for name, total in self._sums.items()}
        self._sums.clear()
        self._counts.clear()
        return logs
