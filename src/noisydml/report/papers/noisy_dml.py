"""The project's comparison of the papers' methods under protocols none of the papers ran (PRISM's noise
models and rates, conf/experiment/noisy_dml/): no paper's claim is about these runs, so none is checked;
each method is set against its own paper's baseline instead (:mod:`noisydml.report.comparisons`)."""

from __future__ import annotations

from noisydml.report.papers import Paper

PAPER = Paper(
    key="noisy_dml",
    title="The papers' methods under PRISM's noise protocols",
    order=7,
    compares=True,
    about="every method above under one noise protocol",
    reproduced="CUB, Cars196, SOP; digits, MNIST-5k",
)
