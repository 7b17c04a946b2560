"""Random and fixed semi-hard mining of Le & Odobez 2019 (Eq. 28, 29): one negative per positive pair."""

from __future__ import annotations

import torch
from pytorch_metric_learning.distances import BaseDistance, LpDistance
from pytorch_metric_learning.miners import BaseMiner
from pytorch_metric_learning.utils import loss_and_miner_utils as lmu

from noisydml.miners.draw import draw_one
from noisydml.utils.checks import NONNEGATIVE_MARGIN, check_value

IndexTriplets = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


class _OneToOneMiner(BaseMiner):
    """The paper's 1-1 sampling scheme: for every ordered positive pair (a, p), a != p, one negative.

    Subclasses say which negatives are candidates for a pair and how one of them is picked. A pair
    with no candidate is dropped rather than given a negative outside the rule: the count of such
    pairs in the last call is ``num_pairs_without_negative`` (also a PML recordable stat).
    """

    def __init__(self, distance: BaseDistance | None = None, **kwargs):
        # None: PML's LpDistance(normalize_embeddings=True, p=2, power=1), Euclidean on the unit sphere.
        super().__init__(distance=distance, **kwargs)
        self.num_pairs_without_negative = 0
        self.add_to_recordable_attributes(name="num_pairs_without_negative", is_stat=True)

    def pick(self, d_ap: torch.Tensor, d_an: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The chosen negative of each pair and whether the pair has one: ``d_ap`` is (pairs, 1),
        ``d_an`` (pairs, N) the anchor's distances, +inf where the item is not a negative (the
        method may overwrite it, it is the pair's own copy). Rows without a candidate may get any index."""
        raise NotImplementedError

    def mine(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor,
        ref_emb: torch.Tensor,
        ref_labels: torch.Tensor,
    ) -> IndexTriplets:
        dist = self.distance(embeddings, ref_emb)
        if self.distance.is_inverted:
            # A similarity: negated, it orders pairs like a distance and Eq. 28-29 apply unchanged.
            dist = -dist
        is_positive, is_negative = lmu.get_matches_and_diffs(labels, ref_labels)
        anchors, positives = torch.where(is_positive)
        d_ap = dist[anchors, positives].unsqueeze(1)
        # Same-class items infinitely far: no rule below takes them, and the (pairs x N) matrix is
        # gathered once, with no mask of the same size beside it.
        d_an = dist.masked_fill(~is_negative.bool(), torch.inf)[anchors]
        negatives, has_negative = self.pick(d_ap, d_an)
        self.num_pairs_without_negative = int((~has_negative).sum())
        return anchors[has_negative], positives[has_negative], negatives[has_negative]


class RandomSemihardMiner(_OneToOneMiner):
    """Random semi-hard mining (Le & Odobez 2019, Eq. 28).

    For every ordered positive pair (a, p), one negative drawn uniformly at random among those with
    ``d_ap - d_an + margin > 0``, i.e. among the negatives whose triplet has a non-zero hinge loss.
    The draw uses torch's global generator, so ``torch.manual_seed`` (or Lightning's
    ``seed_everything``) makes it reproducible.

    A positive pair whose every negative already satisfies the margin is dropped: any triplet it
    could form has zero loss, so keeping one would change only the averaging denominator of the
    loss. There is no fallback to the hardest negative: that is a different miner (batch hard).
    The number of dropped pairs of the last call is ``num_pairs_without_negative``.
    """

    def __init__(self, margin: float = 0.2, distance: BaseDistance | None = None, **kwargs):
        check_value(NONNEGATIVE_MARGIN.at("margin", "margin=0.2"), margin)
        super().__init__(distance=distance, **kwargs)
        self.margin = margin
        self.add_to_recordable_attributes(name="margin", is_stat=False)

    def pick(self, d_ap: torch.Tensor, d_an: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        negatives = draw_one(d_ap - d_an + self.margin > 0)
        return negatives, negatives < d_an.shape[1]


class FixedSemihardMiner(_OneToOneMiner):
    """Fixed semi-hard mining (Le & Odobez 2019, Eq. 29).

    For every ordered positive pair (a, p), the negative closest to the anchor among those farther
    than the positive (``d_an > d_ap``): the hardest negative whose triplet loss is below the margin.
    Ties go to the lowest batch index.

    A positive pair whose every negative is at least as close as the positive is dropped, as in the
    paper's 1-1 scheme only semi-hard negatives are allowed; falling back to the hardest negative
    would be a different miner (batch hard). The number of dropped pairs of the last call is
    ``num_pairs_without_negative``.
    """

    def pick(self, d_ap: torch.Tensor, d_an: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # argmin returns the first minimum, so ties go to the lowest index; a pair without a
        # negative farther than its positive is left with only +inf entries.
        farther = d_an.masked_fill_(d_an <= d_ap, torch.inf)
        negatives = farther.argmin(dim=1)
        return negatives, farther.gather(1, negatives.unsqueeze(1)).squeeze(1) < torch.inf


class SemihardPerPairMiner(_OneToOneMiner):
    """FaceNet's semi-hard selection as Yu et al. 2018 state it (Sec. 3.2, Eq. 7): every ordered positive
    pair (a, p), a != p, with **one** negative drawn uniformly at random among those with
    ``d_ap <= d_an < d_ap + margin``, on the squared Euclidean distance of the normalised embeddings by
    default (Eq. 4). PML's ``TripletMarginMiner(type_of_triplets="semihard")`` keeps every such negative
    instead, so a pair enters the loss and the matching term of Eq. 12 once per semi-hard negative.

    A pair with no negative in the band is dropped (``num_pairs_without_negative``): Eq. 7 gives it none.
    The draw uses torch's global generator.
    """

    def __init__(self, margin: float = 0.2, distance: BaseDistance | None = None, **kwargs):
        check_value(NONNEGATIVE_MARGIN.at("margin", "margin=0.2"), margin)
        super().__init__(distance=distance, **kwargs)
        self.margin = margin
        self.add_to_recordable_attributes(name="margin", is_stat=False)

    def get_default_distance(self) -> BaseDistance:
        return LpDistance(normalize_embeddings=True, p=2, power=2)

    def pick(self, d_ap: torch.Tensor, d_an: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Same-class items are at +inf, never below d_ap + margin.
        negatives = draw_one((d_an >= d_ap) & (d_an < d_ap + self.margin))
        return negatives, negatives < d_an.shape[1]
