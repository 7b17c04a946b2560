"""What a metric's name means, the same in ``results.json``, ``csv/metrics.csv``, W&B, MLflow and TensorBoard.

- ``val/...``: the validation split, scored at every validation; a logger's latest value (W&B's summary,
  MLflow's table) is the last epoch's.
- ``selected_val/...``: the validation scores of the epoch whose weights ``test/...`` scored (the selected
  epoch, else the last validated one), logged once after testing; ``results.json`` holds these.
- ``test/...``, ``test_last/...``: the test split scored with the selected and with the last epoch's weights.
"""

from __future__ import annotations

from collections.abc import Mapping

VALIDATION = "val/"
SELECTED = "selected_val/"


def better(name: str) -> str:
    """Which way ``name`` improves, as a callback's ``mode`` says it: ``min`` for a loss, ``max`` for every
    score the evaluation computes (Recall@K, NMI, MAP@R, accuracies, AUCs)."""
    return "min" if "loss" in name.rsplit("/", 1)[-1] else "max"


def selected(name: str) -> str:
    """The name of the selected epoch's value of ``name``: ``val/recall@1`` -> ``selected_val/recall@1``;
    a name of another split is its own."""
    return SELECTED + name.removeprefix(VALIDATION) if name.startswith(VALIDATION) else name


def with_selected_names(metrics: Mapping[str, object]) -> dict[str, object]:
    """A ``results.json``'s metrics under today's names: a record written before ``selected_val/`` existed
    held the selected epoch's validation scores as ``val/...``."""
    if any(key.startswith(SELECTED) for key in metrics):
        return dict(metrics)
    return {selected(key): value for key, value in metrics.items()}
