"""noisydml's losses and miners as a pytorch-metric-learning user calls them, in a plain PyTorch loop: each
works from ``loss(embeddings, labels, indices_tuple)`` alone, or refuses in one line naming what to call;
and docs/library.md's code runs as written."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch
from pytorch_metric_learning.losses import TripletMarginLoss

from noisydml import losses, miners

PAGE = Path(__file__).resolve().parents[1] / "docs" / "library.md"
EMBEDDING = 8
# How a PML user builds each loss that trains from the call alone.
LOSSES = {
    "AdaptedTripletLoss": lambda: losses.AdaptedTripletLoss(),
    "BayesianTripletLoss": lambda: losses.BayesianTripletLoss(),
    "ClassBetaMarginLoss": lambda: losses.ClassBetaMarginLoss(),
    "ContrastiveLoss": lambda: losses.ContrastiveLoss(),
    "MarginalLoss": lambda: losses.MarginalLoss(),
    "MemoryContrastiveLoss": lambda: losses.MemoryContrastiveLoss(embedding_size=EMBEDDING, memory_size=32),
    "MultiSimilarityLoss": lambda: losses.MultiSimilarityLoss(),
    "PRISMLoss": lambda: losses.PRISMLoss(embedding_size=EMBEDDING, noise_rate=0.2, memory_size=32),
    "ProxyAnchorLoss": lambda: losses.ProxyAnchorLoss(num_classes=4, embedding_size=EMBEDDING),
    "ProxyNCALoss": lambda: losses.ProxyNCALoss(num_classes=4, embedding_size=EMBEDDING),
    "RescaledHingeTripletLoss": lambda: losses.RescaledHingeTripletLoss(),
    "SignalToNoiseRatioContrastiveLoss": lambda: losses.SignalToNoiseRatioContrastiveLoss(),
    "TrimmedLoss": lambda: losses.TrimmedLoss(TripletMarginLoss(), keep_fraction=0.8),
}
# Refused from the call alone, with the call that makes them work.
REFUSED = {
    "BSPMLLoss": (lambda: losses.BSPMLLoss(), "begin_batch(indices)"),
    "MemoryContrastiveLoss": (lambda: losses.MemoryContrastiveLoss(embedding_size=EMBEDDING), "memory_size="),
    "PRISMLoss": (lambda: losses.PRISMLoss(embedding_size=EMBEDDING, noise_rate=0.2), "memory_size="),
    "ProxyAnchorLoss": (lambda: losses.ProxyAnchorLoss(embedding_size=EMBEDDING), "num_classes="),
}
# Not a loss of embeddings: PML's reducer interface.
NOT_LOSSES = {"BatchSizeReducer"}
# Weighs each training sample by its index: it needs the method protocol's calls (the page's second block).
NEEDS_HOOKS = {"BSPMLLoss"}


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    raw = torch.randn(16, EMBEDDING, generator=generator, requires_grad=True)
    return raw, torch.arange(4).repeat_interleave(4)


def test_every_loss_is_listed():
    assert set(losses.__all__) == set(LOSSES) | NEEDS_HOOKS | NOT_LOSSES


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_each_loss_trains_from_pmls_call_alone(name):
    loss_func = LOSSES[name]()
    raw, labels = _batch()
    parameters = [raw, *loss_func.parameters()]
    optimizer = torch.optim.SGD(parameters, lr=0.1)
    for _ in range(2):  # a second step: the memory losses then compare with a memory that holds the first
        embeddings = torch.nn.functional.normalize(raw, dim=1)
        loss = loss_func(embeddings, labels, None)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.ndim == 0 and math.isfinite(loss.item())
    assert raw.grad is not None and torch.isfinite(raw.grad).all()


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_loss_that_needs_more_says_in_one_line_what_to_call(name):
    make, call = REFUSED[name]
    raw, labels = _batch()
    with pytest.raises((RuntimeError, ValueError)) as refused:
        make()(torch.nn.functional.normalize(raw, dim=1), labels, None)
    message = str(refused.value)
    assert "\n" not in message and call in message, message
    assert "NoneType" not in message


@pytest.mark.parametrize("name", sorted(set(miners.__all__) - {"NegativeRule"}))
def test_each_miner_gives_pml_losses_their_tuples(name):
    raw, labels = _batch()
    embeddings = torch.nn.functional.normalize(raw, dim=1)
    anchors, positives, negatives = getattr(miners, name)()(embeddings, labels)
    assert len(anchors) > 0
    assert (labels[anchors] == labels[positives]).all() and (labels[anchors] != labels[negatives]).all()
    assert math.isfinite(TripletMarginLoss()(embeddings, labels, (anchors, positives, negatives)).item())


def test_the_library_page_runs_as_written(capsys):
    """Every Python block of docs/library.md, in order, in one namespace, as a reader pastes them."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)
    assert len(blocks) == 2
    namespace: dict = {"__name__": "library_page"}
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), namespace)
    printed = capsys.readouterr().out
    assert "Recall@1" in printed and "mean weight of flipped labels" in printed
    # Trained on 20% flipped labels, the embedding still retrieves a clean neighbour far above chance (0.1).
    assert namespace["scores"]["recall@1"] > 0.8
    # BSPML's sample weights moved from their start at 1 (Algorithm 3 ran on the page's loop).
    assert 0 < namespace["logged"]["maw"] < 1
