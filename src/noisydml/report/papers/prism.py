"""PRISM (Liu et al. CVPR 2021), ranking-based instance selection on the memory contrastive loss: no
claim of it is checked, and it prints no number the report matches; its runs log, every epoch, how many
samples it keeps and how well its selection finds the flipped labels."""

from __future__ import annotations

from noisydml.report.papers import Diagnostic, Paper

PAPER = Paper(
    key="prism",
    title="PRISM (Liu et al. 2021)",
    order=6,
    subtitle="Noise-resistant deep metric learning with ranking-based instance selection",
    about="ranking-based instance selection; CARS-98N",
    reproduced="CARS-98N",
    diagnostics=(
        Diagnostic("train/prism_kept"),
        Diagnostic("train/prism_auc", detection=("auc", "PRISM's score")),
        Diagnostic("train/prism_precision", detection=("precision", "PRISM's dropped samples")),
        Diagnostic("train/prism_recall", detection=("recall", "PRISM's dropped samples")),
    ),
)
