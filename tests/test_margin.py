"""The margin loss with a learnable beta per class (Wu et al. 2017, as Levi et al. 2021 use it), against
values worked by hand and PML."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from pytorch_metric_learning.losses import MarginLoss

import batches
from batches import (
    CIRCLE,
    CIRCLE_LABELS,
    CIRCLE_TRIPLETS,
)
from configs import load, margin_with_betas
from noisydml.core.hooks import TrainingHooks
from noisydml.losses import ClassBetaMarginLoss
from training_sets import of_classes

SEEDS = range(4)
# float64 so that no distance lands on a rule's boundary by rounding.
random_batch = functools.partial(batches.random_batch, dtype=torch.float64)


# ---------------------------------------------------------------------------------------------------
# Margin loss with a learnable beta per class
# ---------------------------------------------------------------------------------------------------

# Margin loss, alpha .2, beta [1.2, .7] (class 0, class 1): [d_ap - beta + .2]_+ + [beta - d_an + .2]_+
#   (0,1,2) beta 1.2: [.632 - 1]_+ = 0,    [1.4 - 1.414214]_+ = 0
#   (0,1,3) beta 1.2: 0,                   1.4 - .894427 = .505573
#   (2,3,1) beta .7:  .632456 - .5 = .132456,   .9 - .894427 = .005573
#   (3,2,0) beta .7:  .132456,                  .9 - d30 (.894427) = .005573
# Five non-zero pair terms: (.505573 + 2 * .132456 + 2 * .005573) / 5 = 0.156326
MARGIN_HAND = (1.4 - math.sqrt(0.8) + 2 * (math.sqrt(0.4) - 0.5) + 2 * (0.9 - math.sqrt(0.8))) / 5


def test_margin_config_is_wu_with_a_beta_per_class():
    loss = load("loss", "margin")
    assert isinstance(loss, ClassBetaMarginLoss) and isinstance(loss, TrainingHooks)
    assert (loss.margin, loss.nu, loss.beta.item()) == (0.2, 0.0, pytest.approx(1.2))
    loss.setup(of_classes(7))
    params = list(loss.parameters())
    assert len(params) == 1 and params[0] is loss.beta
    assert loss.beta.shape == (7,) and torch.allclose(loss.beta, torch.full((7,), 1.2))


def test_margin_loss_equals_hand_value_and_pml():
    loss = margin_with_betas(1.2, 0.7)
    assert loss(CIRCLE, CIRCLE_LABELS, CIRCLE_TRIPLETS).item() == pytest.approx(MARGIN_HAND, abs=1e-6)
    pml = MarginLoss(margin=0.2, beta=1.2, learn_beta=True, num_classes=2)
    with torch.no_grad():
        pml.beta.copy_(torch.tensor([1.2, 0.7]))
    assert pml(CIRCLE, CIRCLE_LABELS, CIRCLE_TRIPLETS).item() == pytest.approx(MARGIN_HAND, abs=1e-6)


def test_margin_beta_gradient_reaches_only_the_anchor_classes():
    # Anchors of classes 0 and 2 only: class 1's beta gets no gradient.
    loss = margin_with_betas(1.2, 0.7, 0.9)
    labels = torch.tensor([0, 0, 1, 2, 2])
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    triplets = (torch.tensor([0, 3]), torch.tensor([1, 4]), torch.tensor([2, 2]))
    loss(x, labels, triplets).backward()
    assert loss.beta.grad[1] == 0 and (loss.beta.grad[[0, 2]] != 0).all()


def test_margin_global_beta_when_asked():
    loss = load("loss", "margin", "per_class_beta=false")
    loss.setup(of_classes(5))
    assert loss.beta.shape == (1,)
