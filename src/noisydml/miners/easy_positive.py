"""Easy positive sampling, EPS (Levi et al. 2021, Sec. 4.3): each anchor's nearest same-class sample."""

from __future__ import annotations

import torch
from pytorch_metric_learning.distances import BaseDistance, CosineSimilarity, LpDistance
from pytorch_metric_learning.miners import BaseMiner
from pytorch_metric_learning.utils import loss_and_miner_utils as lmu

from noisydml.miners.draw import draw_one

NEGATIVES = ("random", "semihard", "distance_weighted", "multi_similarity")


class EasyPositiveMiner(BaseMiner):
    """One tuple per anchor: the positive is ``p_a = argmin_{t in C_a} ||f(t) - f(a)||`` (Sec. 4.3).

    The negative follows the base method the paper pairs EPS with (Sec. 4.3 (a)-(d), Sec. 5.2.3):

    - ``random``: uniform among the samples of other classes.
    - ``semihard``: uniform among the FaceNet semi-hard negatives (Schroff et al. 2015, Sec. 3.2),
      ``d_ap < d_an < d_ap + margin``: farther than the easy positive but inside the margin.
    - ``distance_weighted``: Wu et al. 2017 (Sec. 4), drawn with probability proportional to
      ``q(d_an)^-1``, ``q(d) ~ d^(n-2) (1 - d^2/4)^((n-3)/2)`` the density of distances between
      uniform points on the unit sphere of R^n, ``d`` clamped below at ``cutoff`` and negatives at
      ``d_an >= nonzero_loss_cutoff`` excluded (their margin loss is zero); distances are the
      anchor's, as in the reference code.
    - ``multi_similarity``: Wang et al. 2019's informative negatives (restated by Zhang et al. 2023,
      Eq. 4), every ``n`` with ``S_an > S_ap - epsilon``: the minimum over positives is the single
      easy positive once EPS replaces MS's positive mining (Levi Sec. 5.2.3). Returns pairs
      ``(a1, p, a2, n)``: the easy positive pair once and every informative negative pair, which the
      MS loss weighs jointly.

    The first three return triplets ``(a, p_a, n)``. Ties among positives go to the lowest batch
    index; random draws use torch's global generator (seeded by Lightning's ``seed_everything``).

    An anchor without a same-class sample in the batch has no EPS positive and yields nothing
    (``num_anchors_without_positive``). One whose negatives all fail the strategy's rule yields nothing
    either (``num_anchors_without_negative``, also every anchor of a single-class batch): semi-hard
    mining leaves out the negatives closer than the positive on purpose and those past the margin
    have zero loss, Wu's cutoff leaves out only zero-loss negatives, and an MS anchor without an
    informative negative is skipped with its positive pair, as the MS code of the framework Levi et al.
    ran (Roth et al. 2020) skips it. That framework's semi-hard sampler instead falls back to a random
    negative; a negative outside the rule is a different miner, and the project's other semi-hard
    miners drop such tuples too. Both counts are PML recordable stats.

    ``distance`` None uses the strategy's own: cosine similarity for ``multi_similarity`` (its
    ``epsilon`` is a similarity margin), Euclidean distance on the unit sphere otherwise (the units of
    ``margin`` and of Wu's cutoffs; keep it equal to the loss's distance). A similarity is negated so
    that "nearest" and the rules above read the same for both.
    """

    def __init__(
        self,
        negatives: str = "semihard",
        margin: float = 0.2,
        cutoff: float = 0.5,
        nonzero_loss_cutoff: float = 1.4,
        epsilon: float = 0.1,
        distance: BaseDistance | None = None,
        **kwargs,
    ):
        if negatives not in NEGATIVES:
            raise ValueError(f"miner.negatives={negatives!r} is not one of {', '.join(NEGATIVES)}")
        if distance is None:
            distance = (
                CosineSimilarity()
                if negatives == "multi_similarity"
                else LpDistance(normalize_embeddings=True, p=2, power=1)
            )
        super().__init__(distance=distance, **kwargs)
        if negatives == "distance_weighted" and not _is_unit_sphere_euclidean(self.distance):
            raise ValueError(
                f"miner.distance={type(self.distance).__name__} cannot weigh negatives by Wu et al.'s "
                "sphere density: miner.negatives=distance_weighted needs the Euclidean distance on the "
                "unit sphere (LpDistance with normalize_embeddings=true, p=2, power=1, or null)"
            )
        # Unit vectors are at most 2 apart; q(d) vanishes at d = 2.
        if not 0 < cutoff < nonzero_loss_cutoff <= 2:
            raise ValueError(
                f"miner.cutoff={cutoff}, miner.nonzero_loss_cutoff={nonzero_loss_cutoff}: "
                "need 0 < cutoff < nonzero_loss_cutoff <= 2 (distances on the unit sphere)"
            )
        self.negatives = negatives
        self.margin = margin
        self.cutoff = cutoff
        self.nonzero_loss_cutoff = nonzero_loss_cutoff
        self.epsilon = epsilon
        self.num_anchors_without_positive = 0
        self.num_anchors_without_negative = 0
        self.add_to_recordable_attributes(
            list_of_names=["margin", "cutoff", "nonzero_loss_cutoff", "epsilon"], is_stat=False
        )
        self.add_to_recordable_attributes(
            list_of_names=["num_anchors_without_positive", "num_anchors_without_negative"], is_stat=True
        )

    def mine(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor,
        ref_emb: torch.Tensor,
        ref_labels: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        dist = self.distance(embeddings, ref_emb)
        if self.distance.is_inverted:
            dist = -dist
        is_positive, is_negative = (m.bool() for m in lmu.get_matches_and_diffs(labels, ref_labels))
        has_positive = is_positive.any(dim=1)
        # argmin returns the first minimum, so ties go to the lowest index.
        positives = torch.where(is_positive, dist, torch.inf).argmin(dim=1)
        d_ap = dist.gather(1, positives.unsqueeze(1))
        allowed = is_negative & self.candidates(dist, d_ap)
        keep = has_positive & allowed.any(dim=1)
        self.num_anchors_without_positive = int((~has_positive).sum())
        self.num_anchors_without_negative = int((has_positive & ~keep).sum())

        anchors = torch.nonzero(keep).squeeze(1)
        if self.negatives == "multi_similarity":
            neg_anchors, negatives = torch.where(allowed & keep.unsqueeze(1))
            return anchors, positives[anchors], neg_anchors, negatives
        allowed = allowed[anchors]
        if self.negatives == "distance_weighted":
            weights = self.sphere_weights(dist[anchors], allowed, embeddings.size(1))
        else:
            weights = allowed
        return anchors, positives[anchors], draw_one(weights)

    def candidates(self, dist: torch.Tensor, d_ap: torch.Tensor) -> torch.Tensor:
        """Which samples the strategy allows as each anchor's negative (class aside)."""
        if self.negatives == "semihard":
            return (dist > d_ap) & (dist < d_ap + self.margin)
        if self.negatives == "distance_weighted":
            return dist < self.nonzero_loss_cutoff
        if self.negatives == "multi_similarity":
            # S_an > S_ap - epsilon, with dist = -S.
            return dist - self.epsilon < d_ap
        return torch.ones_like(dist, dtype=torch.bool)

    def sphere_weights(self, dist: torch.Tensor, allowed: torch.Tensor, dim: int) -> torch.Tensor:
        """``q(d)^-1`` of Wu et al. 2017 (Sec. 4) for the allowed entries, 0 elsewhere, row max 1.

        In float64 and scaled by each row's maximum: in 128 dimensions ``log q^-1`` spans about 90
        between d = 0.5 and d = 1.4, which would underflow float32 for whole rows.
        """
        d = torch.where(allowed, dist, self.cutoff).to(torch.float64).clamp(min=self.cutoff)
        log_inverse_q = (2.0 - dim) * torch.log(d) - ((dim - 3.0) / 2.0) * torch.log(1.0 - d.pow(2) / 4)
        log_inverse_q = log_inverse_q.masked_fill(~allowed, -torch.inf)
        return torch.exp(log_inverse_q - log_inverse_q.amax(dim=1, keepdim=True))


def _is_unit_sphere_euclidean(distance: BaseDistance) -> bool:
    return (
        isinstance(distance, LpDistance)
        and distance.normalize_embeddings
        and distance.p == 2
        and distance.power == 1
    )
