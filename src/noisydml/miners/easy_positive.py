"""Easy positive sampling, EPS (Levi et al. 2021, Sec. 4.3): each anchor's nearest same-class sample.

The negative follows a rule, an object of its own (Sec. 4.3 (a)-(d), Sec. 5.2.3): which samples it
allows and how the miner returns them. ``miner.negatives`` names one of :data:`NEGATIVE_RULES`; a new
base method's rule is a new subclass of :class:`NegativeRule`, not a branch in the miner.
"""

from __future__ import annotations

import inspect

import torch
from pytorch_metric_learning.distances import BaseDistance, CosineSimilarity, LpDistance
from pytorch_metric_learning.miners import BaseMiner
from pytorch_metric_learning.utils import loss_and_miner_utils as lmu

from noisydml.miners.draw import draw_one
from noisydml.utils.checks import NONNEGATIVE_MARGIN, BadValue, check_value, parameter_range
from noisydml.utils.unread import Parts

# What an anchor without a semi-hard negative gets (SemihardNegatives.fallback).
FALLBACKS = ("none", "random")


EPSILON = parameter_range(0, why="a negative epsilon keeps no negative").at("epsilon", "epsilon=0.1")
CUTOFF = parameter_range(0, why="distances are >= 0: a negative cutoff clamps nothing").at(
    "cutoff", "cutoff=0.5"
)


class NegativeRule:
    """How EPS picks each anchor's negative; this base allows every sample of another class.

    ``dist`` is always a distance (the miner negates a similarity), ``d_ap`` each anchor's distance to
    its positive, ``is_positive`` / ``is_negative`` which samples share / do not share its class,
    ``allowed`` the negatives that :meth:`candidates` allows.
    """

    # The rule's ``miner.negatives`` name.
    name: str

    def default_distance(self) -> BaseDistance:
        """The distance the rule's parameters are in: Euclidean on the unit sphere."""
        return LpDistance(normalize_embeddings=True, p=2, power=1)

    def check(self, distance: BaseDistance) -> None:
        """Raise when the rule cannot work with the miner's ``distance``."""

    def candidates(
        self, dist: torch.Tensor, d_ap: torch.Tensor, is_positive: torch.Tensor, is_negative: torch.Tensor
    ) -> torch.Tensor:
        """Which of each anchor's negatives (``is_negative``: of another class) the rule allows."""
        return is_negative

    def weights(self, dist: torch.Tensor, allowed: torch.Tensor, dim: int) -> torch.Tensor:
        """How likely each allowed negative is to be drawn (rows of anchors): uniformly."""
        return allowed

    def tuples(
        self, keep: torch.Tensor, positives: torch.Tensor, allowed: torch.Tensor, dist: torch.Tensor, dim: int
    ) -> tuple[torch.Tensor, ...]:
        """The miner's output for the anchors in ``keep`` (those with a positive and an allowed
        negative): triplets ``(a, p_a, n)``, one negative per anchor drawn by :meth:`weights` from
        torch's global generator; ``dim`` is the embedding size."""
        anchors = torch.nonzero(keep).squeeze(1)
        allowed = allowed[anchors]
        return anchors, positives[anchors], draw_one(self.weights(dist[anchors], allowed, dim))


class RandomNegatives(NegativeRule):
    """A negative uniform among the samples of other classes (EPS + Triplet)."""

    name = "random"


class SemihardNegatives(NegativeRule):
    """A negative uniform among the FaceNet semi-hard ones (Schroff et al. 2015, Sec. 3.2),
    ``d_ap < d_an < d_ap + margin``: farther than the positive but inside the margin (EPS + Trip. +
    SH). Keep ``margin`` equal to the triplet loss's.

    ``fallback`` says what an anchor without a semi-hard negative gets: ``none`` drops it, ``random``
    gives it a negative uniform among all of its negatives, as the semi-hard sampler of Roth et al.'s
    framework does (the one Levi et al. ran; without it, well-separated batches lose most anchors).
    """

    name = "semihard"

    def __init__(self, margin: float = 0.2, fallback: str = "none"):
        if fallback not in FALLBACKS:
            raise ValueError(f"miner.fallback={fallback!r} is not one of {', '.join(FALLBACKS)}")
        self.margin = margin
        self.fallback = fallback

    def candidates(
        self, dist: torch.Tensor, d_ap: torch.Tensor, is_positive: torch.Tensor, is_negative: torch.Tensor
    ) -> torch.Tensor:
        semihard = is_negative & (dist > d_ap) & (dist < d_ap + self.margin)
        if self.fallback == "none":
            return semihard
        return torch.where(semihard.any(dim=1, keepdim=True), semihard, is_negative)


class DistanceWeightedNegatives(NegativeRule):
    """Wu et al. 2017 (Sec. 4), EPS + Dist-Margin: a negative drawn with probability proportional to
    ``q(d_an)^-1``, ``q(d) ~ d^(n-2) (1 - d^2/4)^((n-3)/2)`` the density of distances between uniform
    points on the unit sphere of R^n, ``d`` clamped below at ``cutoff`` and negatives at
    ``d_an >= nonzero_loss_cutoff`` excluded (their margin loss is zero); distances are the anchor's, as
    in the reference code."""

    name = "distance_weighted"

    def __init__(self, cutoff: float = 0.5, nonzero_loss_cutoff: float = 1.4):
        # Unit vectors are at most 2 apart; q(d) vanishes at d = 2.
        if not 0 < cutoff < nonzero_loss_cutoff <= 2:
            raise ValueError(
                f"miner.cutoff={cutoff}, miner.nonzero_loss_cutoff={nonzero_loss_cutoff}: "
                "need 0 < cutoff < nonzero_loss_cutoff <= 2 (distances on the unit sphere)"
            )
        self.cutoff = cutoff
        self.nonzero_loss_cutoff = nonzero_loss_cutoff

    def check(self, distance: BaseDistance) -> None:
        if not _is_unit_sphere_euclidean(distance):
            raise ValueError(
                f"miner.distance={type(distance).__name__} cannot weigh negatives by Wu et al.'s "
                "sphere density: miner.negatives=distance_weighted needs the Euclidean distance on the "
                "unit sphere (LpDistance with normalize_embeddings=true, p=2, power=1, or null)"
            )

    def candidates(
        self, dist: torch.Tensor, d_ap: torch.Tensor, is_positive: torch.Tensor, is_negative: torch.Tensor
    ) -> torch.Tensor:
        return is_negative & (dist < self.nonzero_loss_cutoff)

    def weights(self, dist: torch.Tensor, allowed: torch.Tensor, dim: int) -> torch.Tensor:
        """``q(d)^-1`` of Wu et al. 2017 (Sec. 4) for the allowed entries, 0 elsewhere, row max 1.

        In float64 and scaled by each row's maximum: in 128 dimensions ``log q^-1`` spans about 90
        between d = 0.5 and d = 1.4, which would underflow float32 for whole rows.
        """
        d = torch.where(allowed, dist, self.cutoff).to(torch.float64).clamp(min=self.cutoff)
        log_inverse_q = (2.0 - dim) * torch.log(d) - ((dim - 3.0) / 2.0) * torch.log(1.0 - d.pow(2) / 4)
        log_inverse_q = log_inverse_q.masked_fill(~allowed, -torch.inf)
        return torch.exp(log_inverse_q - log_inverse_q.amax(dim=1, keepdim=True))


class MultiSimilarityNegatives(NegativeRule):
    """EPS + MS (Levi Sec. 5.2.3: "we replace the positive hard-mining method with EPS and use the same
    hard-negative method"): the negatives of Wang et al. 2019's pair mining, unchanged (restated by
    Zhang et al. 2023, Eq. 4): every ``n`` with ``S_an > min_{p in C_a} S_ap - epsilon``, the minimum over
    all of the anchor's positives in the batch (its hardest), so an anchor keeps exactly the negative
    pairs that ``pytorch_metric_learning.miners.MultiSimilarityMiner`` keeps for it. Only the positive
    changes, to the easy one. Returns pairs ``(a1, p, a2, n)``: the easy positive pair once and every
    informative negative pair, which the MS loss weighs jointly. ``epsilon`` is a similarity margin,
    hence the cosine similarity by default."""

    name = "multi_similarity"

    def __init__(self, epsilon: float = 0.1):
        self.epsilon = epsilon

    def default_distance(self) -> BaseDistance:
        return CosineSimilarity()

    def candidates(
        self, dist: torch.Tensor, d_ap: torch.Tensor, is_positive: torch.Tensor, is_negative: torch.Tensor
    ) -> torch.Tensor:
        # S_an > S_ap - epsilon with dist = -S, S_ap the threshold's positive similarity.
        return is_negative & (dist - self.epsilon < self.threshold(dist, d_ap, is_positive))

    def threshold(self, dist: torch.Tensor, d_ap: torch.Tensor, is_positive: torch.Tensor) -> torch.Tensor:
        """The positive distance a negative must come within ``epsilon`` of: the hardest positive's."""
        return torch.where(is_positive, dist, -torch.inf).amax(dim=1, keepdim=True)

    def tuples(
        self, keep: torch.Tensor, positives: torch.Tensor, allowed: torch.Tensor, dist: torch.Tensor, dim: int
    ) -> tuple[torch.Tensor, ...]:
        anchors = torch.nonzero(keep).squeeze(1)
        neg_anchors, negatives = torch.where(allowed & keep.unsqueeze(1))
        return anchors, positives[anchors], neg_anchors, negatives


class EasyThresholdNegatives(MultiSimilarityNegatives):
    """A variant of EPS + MS that the paper does not describe: MS's negative rule thresholded on the
    *easy* positive's similarity, ``S_an > S_ap_easy - epsilon``. The easy positive is the most similar,
    so this keeps a subset of MS mining's negatives, often a small one: kept to measure what that
    reading changes."""

    name = "multi_similarity_easy_threshold"

    def threshold(self, dist: torch.Tensor, d_ap: torch.Tensor, is_positive: torch.Tensor) -> torch.Tensor:
        return d_ap


# The miner's keys that are its rules' parameters.
RULE_PARAMETERS = ("margin", "fallback", "cutoff", "nonzero_loss_cutoff", "epsilon")
# ``miner.negatives=<name>``: the rule of that name, made from the miner's keys that are its parameters.
NEGATIVE_RULES: dict[str, type[NegativeRule]] = {
    rule.name: rule
    for rule in (
        RandomNegatives,
        SemihardNegatives,
        DistanceWeightedNegatives,
        MultiSimilarityNegatives,
        EasyThresholdNegatives,
    )
}


class EasyPositiveMiner(BaseMiner):
    """One tuple per anchor: the positive is ``p_a = argmin_{t in C_a} ||f(t) - f(a)||`` (Sec. 4.3),
    the negative by the rule ``negatives`` (a :class:`NegativeRule`, or a name in
    :data:`NEGATIVE_RULES` made with its parameters among ``margin`` and ``fallback`` (semihard),
    ``cutoff`` and ``nonzero_loss_cutoff`` (distance_weighted) and ``epsilon`` (the two multi_similarity
    rules); a rule object carries its own, so those keys are then ignored).

    Ties among positives go to the lowest batch index; random draws use torch's global generator (seeded
    by Lightning's ``seed_everything``).

    An anchor without a same-class sample in the batch has no positive and yields nothing
    (``num_anchors_without_positive``). One whose negatives all fail the rule yields nothing either
    (``num_anchors_without_negative``, also every anchor of a single-class batch), unless the rule
    falls back (semihard with ``fallback=random``, Roth et al.'s sampler, the framework Levi et al. ran):
    Wu's cutoff leaves out only zero-loss negatives, and an MS anchor without an informative negative is
    skipped with its positive pair, as the MS code of that framework skips it. Both counts are PML
    recordable stats.

    ``distance`` None uses the rule's own: cosine similarity for the multi_similarity rules (``epsilon``
    is a similarity margin), Euclidean distance on the unit sphere otherwise (the units of ``margin``
    and of Wu's cutoffs; Roth et al.'s semi-hard band is on this distance while their triplet loss is on
    its square). A similarity is negated so that "nearest" and the rules read the same for both.
    """

    def __init__(
        self,
        negatives: str | NegativeRule = "semihard",
        margin: float = 0.2,
        fallback: str = "none",
        cutoff: float = 0.5,
        nonzero_loss_cutoff: float = 1.4,
        epsilon: float = 0.1,
        distance: BaseDistance | None = None,
        **kwargs,
    ):
        check_value(NONNEGATIVE_MARGIN.at("margin", "margin=0.2"), margin)
        check_value(EPSILON, epsilon)
        check_value(CUTOFF, cutoff)
        check_value(CUTOFF.at("nonzero_loss_cutoff", "nonzero_loss_cutoff=1.4"), nonzero_loss_cutoff)
        if nonzero_loss_cutoff <= cutoff:
            raise BadValue(
                "nonzero_loss_cutoff",
                f"={nonzero_loss_cutoff} is not above cutoff={cutoff}: no negative lies between them, so "
                "none would be drawn; e.g. nonzero_loss_cutoff=1.4 with cutoff=0.5",
            )
        # The miner's keys that are no parameter of its rule (all of them beside a rule object).
        rule = NEGATIVE_RULES.get(negatives) if isinstance(negatives, str) else None
        taken = inspect.signature(rule.__init__).parameters if rule is not None else ()
        self._unread = [name for name in RULE_PARAMETERS if name not in taken]
        if isinstance(negatives, str):
            negatives = negative_rule(
                negatives,
                margin=margin,
                fallback=fallback,
                cutoff=cutoff,
                nonzero_loss_cutoff=nonzero_loss_cutoff,
                epsilon=epsilon,
            )
        super().__init__(distance=negatives.default_distance() if distance is None else distance, **kwargs)
        negatives.check(self.distance)
        self.negatives = negatives
        self.num_anchors_without_positive = 0
        self.num_anchors_without_negative = 0
        self.add_to_recordable_attributes(
            list_of_names=["num_anchors_without_positive", "num_anchors_without_negative"], is_stat=True
        )

    def unread_keys(self, parts: Parts) -> dict[str, str]:
        """The keys of the rules other than this miner's (:mod:`noisydml.utils.unread`)."""
        rule = self.negatives.name
        return {
            name: f"is a parameter of other negative rules than {{node}}.negatives={rule}, which does not "
            "read it; drop {key}"
            for name in self._unread
        }

    def positives(self, dist: torch.Tensor, is_positive: torch.Tensor) -> torch.Tensor:
        """Each anchor's positive, the easy one: its nearest same-class sample (any index when it has
        none). argmin returns the first minimum, so ties go to the lowest index."""
        return torch.where(is_positive, dist, torch.inf).argmin(dim=1)

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
        positives = self.positives(dist, is_positive).clamp(max=dist.shape[1] - 1)
        d_ap = dist.gather(1, positives.unsqueeze(1))
        allowed = self.negatives.candidates(dist, d_ap, is_positive, is_negative)
        keep = has_positive & allowed.any(dim=1)
        self.num_anchors_without_positive = int((~has_positive).sum())
        self.num_anchors_without_negative = int((has_positive & ~keep).sum())
        return self.negatives.tuples(keep, positives, allowed, dist, embeddings.size(1))


class RandomPositiveMiner(EasyPositiveMiner):
    """The baselines of Levi et al. (Table 1's "Triplet", Tables 2-4's "Trip. + SH"): one tuple per anchor
    as :class:`EasyPositiveMiner`, with the positive drawn uniformly among the anchor's same-class
    samples instead of the nearest one, as Roth et al.'s samplers draw it. With the same negative rule,
    a baseline and its EPS variant differ only in the positive (Levi Sec. 4.3, 5.2.3)."""

    def positives(self, dist: torch.Tensor, is_positive: torch.Tensor) -> torch.Tensor:
        return draw_one(is_positive)


def negative_rule(name: str, **parameters: float) -> NegativeRule:
    """The rule ``miner.negatives=name``, given those of ``parameters`` that it takes."""
    if name not in NEGATIVE_RULES:
        raise ValueError(f"miner.negatives={name!r} is not one of {', '.join(NEGATIVE_RULES)}")
    rule = NEGATIVE_RULES[name]
    own = inspect.signature(rule.__init__).parameters
    return rule(**{key: value for key, value in parameters.items() if key in own})


def _is_unit_sphere_euclidean(distance: BaseDistance) -> bool:
    return (
        isinstance(distance, LpDistance)
        and distance.normalize_embeddings
        and distance.p == 2
        and distance.power == 1
    )
