"""Zhang et al. 2023, BSPML (balanced self-paced metric learning): against the baselines of its
Table 2, across noise rates and embedding sizes, and the sample weights of its Eq. 14 (MAW, SDAW) as its
age lambda and balance weight mu grow."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from noisydml.report.claims.verdicts import (
    NOT_EVALUATED,
    Claim,
    Outcome,
    compare,
    compare_columns,
    gap_grows,
    outcome,
)
from noisydml.report.collect import canonical
from noisydml.report.pairing import RECALL, by_seed, gap, is_number, mean, pairs, rows_where, varies
from noisydml.report.papers import Axis, Cite, Departure, Diagnostic, Paper
from noisydml.report.tables import Group, Row, Table, pivot

TITLE = "Zhang et al. 2023 (BSPML)"


# Table 2's baselines by loss (conf/method/zhang2023/); SPMS shares BSPML's loss and is told by its label.
ZHANG_BASELINES = (
    "multi_similarity",
    "contrastive",
    "contrastive_cosine",
    "triplet_smooth",
    "margin",
    "fastap",
    "rdml",
    "proxy_anchor",
    "snr",
)
SPMS = "SPMS"


def _bspml_vs(
    key: str, require_varied: bool, baselines: Callable[[Table], list[Row]], needs: str
) -> Callable[[Group], Outcome | None]:
    """BSPML against every row ``baselines`` finds, at every value of ``key``."""

    def check(group: Group) -> Outcome | None:
        if require_varied and not varies(group, key):
            return None
        table = pivot(group, key)
        bspml = [row for row in rows_where(table, loss="bspml") if row.method != SPMS]
        others = baselines(table)
        if not bspml and not others:
            return None
        # Other methods of the group may vary the key (a BLMNN's embedding size is its input's).
        if require_varied and len({canonical(r.value(key)) for row in bspml + others for r in row.runs}) < 2:
            return None
        if not bspml or not others:
            return Outcome(NOT_EVALUATED, "no runs of " + ("loss=bspml" if not bspml else needs))
        return outcome(*compare_columns(table, pairs(bspml, others), RECALL))

    return check


# The robust baselines the paper's sentence names as "still sensitive to large noise ratios".
ROBUST_BASELINES = ("proxy_anchor", "rdml")


def _bspml_lead_over_robust_baselines(group: Group) -> Outcome | None:
    table = pivot(group, "noise.rate")
    bspml = [row for row in rows_where(table, loss="bspml") if row.method != SPMS]
    robust = {loss: rows_where(table, loss=loss) for loss in ROBUST_BASELINES}
    if not bspml or not any(robust.values()):
        return None
    # The sentence is about both: BSPML's lead over one of them alone would hold half of it.
    absent = [f"loss={loss}" for loss, rows in robust.items() if not rows]
    if absent:
        return Outcome(NOT_EVALUATED, f"no runs of {' or '.join(absent)}")
    rates = [c for c in table.columns if is_number(c)]
    if len(rates) < 2:
        return Outcome(NOT_EVALUATED, f"needs two noise rates; the runs have {rates}")
    baselines = [row for rows in robust.values() for row in rows]
    return gap_grows(table, bspml, baselines, RECALL, min(rates), max(rates))


def _table2_baselines(table: Table) -> list[Row]:
    return rows_where(table, loss=lambda loss: loss in ZHANG_BASELINES)


def _ms_and_spms(table: Table) -> list[Row]:
    spms = [row for row in rows_where(table, loss="bspml") if row.method == SPMS]
    return rows_where(table, loss="multi_similarity") + spms


def _bspml_trend(key: str, metric: str, increasing: bool) -> Callable[[Group], Outcome | None]:
    def check(group: Group) -> Outcome | None:
        if not any(key in r.overrides for r in group.runs) or not varies(group, key):
            return None
        table = pivot(group, key)
        rows = rows_where(table, loss="bspml")
        if not rows:
            return None
        done, gaps = [], []
        for row in rows:
            values = [(c, by_seed(row, c, metric)) for c in table.columns if is_number(c)]
            known = [(c, v) for c, v in values if v]
            gaps += [gap(row, c, key) for c, v in values if not v]
            if len(known) < 2:
                continue
            (first, at_first), (last, at_last) = known[0], known[-1]
            if not set(at_first) & set(at_last):
                gaps.append(f"{row.label} at {key}={first} and {key}={last}: no seed in common")
                continue
            ends = ((last, at_last), (first, at_first))
            larger, smaller = ends if increasing else ends[::-1]
            trail = ", ".join(f"{c}: {mean(v):.3f}" for c, v in known)
            done.append(
                compare(
                    f"{row.label} ({trail})",
                    metric,
                    larger[1],
                    smaller[1],
                    (f"{key}={larger[0]}", f"{key}={smaller[0]}"),
                )
            )
        return outcome(done, gaps)

    return check


# BSPML's advantage is its weights' (Eq. 14): where they do not single out the flipped labels, a verdict on
# BSPML against the baselines says nothing of the mechanism the paper credits.
WEIGHTS_BLIND = Departure(
    ("zhang2023/digits", "zhang2023/mnist5k"),
    "on an analogue where BSPML's weights do not see the noise: they rank the flipped labels barely below "
    "the clean ones (train/flipped_auc, their ROC AUC, .54-.57 at the tuned λ∞: the headers of "
    "conf/experiment/digits/zhang2023_noise.yaml and mnist5k/zhang2023_noise.yaml), so the comparison is of "
    "its loss, not of its weighting",
)


def _without_rdml(rows: list[dict]) -> bool:
    """Whether a committed claims.csv's rows of the claim compare BSPML with Proxy-Anchor alone."""
    return not any("RDML" in row["comparison"] for row in rows)


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "zhang2023-noise",
        TITLE,
        "BSPML beats every baseline of Table 2 at every noise rate (Tables 1-2)",
        "Recall@1(BSPML) > Recall@1 of each Table 2 baseline that ran (MS, Contrastive, Triplet, Margin, "
        "FastAP, RDML, Proxy-Anchor, SNR) at every noise rate",
        "loss=bspml and the Table 2 baselines (conf/method/zhang2023/)",
        _bspml_vs("noise.rate", False, _table2_baselines, "a Table 2 baseline"),
        quote="These results show that our BSPML obviously achieves better performance than non-robust DML "
        "algorithms. Compared with robust DML algorithms, our BSPML also has sufficient advantages.",
        rests_on=(WEIGHTS_BLIND,),
    ),
    Claim(
        "zhang2023-large-noise",
        TITLE,
        'Robust baselines are "still sensitive to large noise ratios": BSPML\'s lead over Proxy-Anchor and '
        "over RDML grows from 10% to 30% noise (Table 2: on all three data sets over Proxy-Anchor; over RDML "
        "on CUB and Cars, its In-Shop lead narrowing from 8.9 to 8.1 points)",
        "(BSPML - Proxy-Anchor) and (BSPML - RDML) Recall@1 at the highest noise rate > at the lowest, "
        "paired by seed; not evaluated without runs of both",
        "loss=bspml, loss=proxy_anchor and loss=rdml at two noise rates or more",
        _bspml_lead_over_robust_baselines,
        quote="Proxy-Anchor loss and RDML loss attempt to reduce the influence of noisy samples, "
        "but they are "
        "still sensitive to large noise ratios.",
        rests_on=(
            WEIGHTS_BLIND,
            Departure(
                ("zhang2023/digits", "zhang2023/mnist5k"),
                "over Proxy-Anchor alone: the runs were judged before RDML, which the sentence names too, "
                "was compared",
                applies=_without_rdml,
            ),
        ),
    ),
    Claim(
        "zhang2023-embedding",
        TITLE,
        "BSPML beats multi-similarity and SPMS at every embedding size (Fig. 5)",
        "Recall@1(BSPML) > Recall@1(MS) and > Recall@1(SPMS) at every backbone.embedding_size",
        "loss=bspml, loss=multi_similarity and SPMS over several backbone.embedding_size",
        _bspml_vs("backbone.embedding_size", True, _ms_and_spms, "loss=multi_similarity or SPMS"),
        quote="Benefiting from the balance regularization term, our BSPML achieves the best performance.",
    ),
    Claim(
        "zhang2023-maw",
        TITLE,
        "A larger age lambda gives larger sample weights (Fig. 3)",
        "MAW (train/maw, last epoch) at the largest loss.age_max > at the smallest",
        "loss=bspml swept over loss.age_max",
        _bspml_trend("loss.age_max", "train/maw", increasing=True),
        quote="Fig. 3 clearly reveals that with the increase of λ , our BSPML tends to assign samples larger "
        "weights and thus allows hard samples with larger losses to join the training.",
    ),
    Claim(
        "zhang2023-sdaw",
        TITLE,
        "A larger balance weight mu balances the class-average weights (Fig. 4)",
        "SDAW (train/sdaw, last epoch) at the largest loss.mu < at the smallest",
        "loss=bspml swept over loss.mu",
        _bspml_trend("loss.mu", "train/sdaw", increasing=False),
        quote="Moreover, as shown in Fig. 4, the average sample weights of classes are balanced as much as "
        "possible when μ is set to a large value.",
    ),
)

PAPER = Paper(
    key="zhang2023",
    title=TITLE,
    order=5,
    subtitle="Denoising multi-similarity formulation",
    about="self-paced, balanced multi-similarity",
    reproduced="Tables 1-2, Figs. 3-5",
    claims=CLAIMS,
    cites=(
        Cite("noise.rate", "test/recall@1", "BSPML Table 2"),
        Cite("loss.age_max", "train/maw", "BSPML Fig. 3"),
        Cite("loss.age_max", "train/sdaw", "BSPML Fig. 4"),
        Cite("loss.mu", "train/maw", "BSPML Fig. 3"),
        Cite("loss.mu", "train/sdaw", "BSPML Fig. 4"),
        Cite("backbone.embedding_size", "test/recall@1", "BSPML Fig. 5"),
    ),
    axes={
        "loss.age_max": Axis("λ∞ (loss.age_max)", ("train/maw", "train/sdaw", "test/recall@1")),
        "loss.mu": Axis("μ (loss.mu)", ("train/maw", "train/sdaw", "test/recall@1")),
    },
    # Eq. 14's weights, and how well they rank the flipped labels last.
    diagnostics=(
        Diagnostic("train/maw", "MAW (mean of class-average weights)"),
        Diagnostic("train/sdaw", "SDAW (std of class-average weights)"),
        Diagnostic("train/flipped_auc", detection=("auc", "BSPML's weights")),
    ),
    published=Path(__file__).with_suffix(".csv"),
)
