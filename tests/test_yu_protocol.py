"""Yu et al. 2018 as the paper states its selection (Sec. 3.2, Eq. 7: each anchor-positive pair with one
random semi-hard negative) and its reduction (Eq. 8's sum, normalised as Caffe does, by the batch size)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from PIL import Image
from pytorch_metric_learning.reducers import MeanReducer
from torchvision.transforms import functional

import layouts
from batches import as_list
from configs import compose_node
from noisydml.data.cub import CUB200
from noisydml.data.transforms import IMAGENET_MEAN, IMAGENET_STD
from noisydml.losses import AdaptedTripletLoss, BatchSizeReducer
from noisydml.miners import SemihardPerPairMiner

# Yu et al.'s Table 1 batches: 20 classes x 6 images.
LABELS = torch.arange(20).repeat_interleave(6)


def batch(seed: int, dim: int = 16) -> torch.Tensor:
    return torch.randn(len(LABELS), dim, generator=torch.Generator().manual_seed(seed))


def squared(x: torch.Tensor) -> torch.Tensor:
    unit = torch.nn.functional.normalize(x, dim=1)
    return torch.cdist(unit, unit).pow(2)


def test_yu2018_selects_each_pair_once_with_one_semihard_negative():
    # Before (miner=facenet_semihard): 1-56 negatives per pair on such a batch, mean 19.
    miner = compose_node("miner", "method=yu2018/adapted_triplet")
    assert isinstance(miner, SemihardPerPairMiner) and miner.margin == 0.2
    for seed in range(3):
        x = batch(seed)
        d2 = squared(x)
        a, p, n = miner(x, LABELS)
        pairs = Counter(zip(a.tolist(), p.tolist(), strict=True))
        assert max(pairs.values()) == 1
        # Every ordered pair with a negative in the band of Eq. 7 is there, and no other.
        with_band = {
            (i, j)
            for i in range(len(LABELS))
            for j in range(len(LABELS))
            if i != j
            and LABELS[i] == LABELS[j]
            and any(
                LABELS[k] != LABELS[i] and d2[i, j] <= d2[i, k] < d2[i, j] + 0.2 for k in range(len(LABELS))
            )
        }
        assert set(pairs) == with_band and len(with_band) > 0
        assert miner.num_pairs_without_negative == 20 * 6 * 5 - len(with_band)
        assert all(d2[i, j] <= d2[i, k] < d2[i, j] + 0.2 + 1e-6 for i, j, k in as_list((a, p, n)))


def test_the_negative_is_uniform_over_the_band():
    # One pair (0, 1) at squared distance 0.02 (on the unit circle); negatives at 0.005 (hard), 0.05,
    # 0.1 and 0.15 (in the band) and 1.0 (easy).
    angles = torch.tensor([0.0, 0.1414, 0.0707, 0.2237, 0.3166, 0.3880, 1.0472])
    x = torch.stack([angles.cos(), angles.sin()], dim=1)
    labels = torch.tensor([0, 0, 1, 2, 3, 4, 5])
    miner = SemihardPerPairMiner(margin=0.2)
    torch.manual_seed(0)
    drawn = Counter()
    for _ in range(600):
        a, p, n = miner(x, labels)
        drawn.update(n[(a == 0) & (p == 1)].tolist())
    assert set(drawn) == {3, 4, 5} and all(150 < c < 250 for c in drawn.values())


def test_yu2018_loss_is_eq8_sum_over_the_batch_size():
    loss = compose_node("loss", "method=yu2018/adapted_triplet")
    assert isinstance(loss, AdaptedTripletLoss)
    assert isinstance(loss.reducer.reducers["loss"], BatchSizeReducer)
    x = batch(0)
    a, p, n = triplets = SemihardPerPairMiner()(x, LABELS)
    d2 = squared(x)
    eq8 = torch.relu(d2[a, p] - d2[a, n] + 0.2).sum()
    loss.match_weight = 0.0
    assert loss(x, LABELS, triplets).item() == pytest.approx(eq8.item() / len(LABELS), rel=1e-5)


def test_yu2018_triplet_is_the_adapted_triplet_at_lambda_zero():
    # The baseline of Table 1's first rows as a method of its own (noisy_dml sweeps set methods, not
    # lambdas): Eq. 8 alone, on the same triplets and with the same reduction as the adapted triplet.
    loss = compose_node("loss", "method=yu2018/triplet")
    assert isinstance(loss, AdaptedTripletLoss) and loss.match_weight == 0.0
    assert isinstance(loss.reducer.reducers["loss"], BatchSizeReducer)
    assert isinstance(compose_node("miner", "method=yu2018/triplet"), SemihardPerPairMiner)
    x = batch(2)
    a, p, n = triplets = SemihardPerPairMiner()(x, LABELS)
    d2 = squared(x)
    eq8 = torch.relu(d2[a, p] - d2[a, n] + 0.2).sum() / len(LABELS)
    assert loss(x, LABELS, triplets).item() == pytest.approx(eq8.item(), rel=1e-5)


@pytest.mark.parametrize("published_lambda", [0.01, 0.1, 2.0])
def test_caffe_normalisation_gives_the_published_lambda_grid(published_lambda):
    # Under Caffe's normalisation, Eq. 15 with a published lambda is (|D_S| / N) x the mean-reduced loss
    # with lambda x N / |D_S|: about K - 1 = 5 times the lambda against the mean over triplets on Table 1's
    # 20 x 6 batches, so the same lambda under MeanReducer weighs the matching term 5 times less.
    x = batch(1)
    torch.manual_seed(0)
    triplets = SemihardPerPairMiner()(x, LABELS)
    ratio = len(triplets[0]) / len(LABELS)
    caffe = AdaptedTripletLoss(match_weight=published_lambda, reducer=BatchSizeReducer())
    mean = AdaptedTripletLoss(match_weight=published_lambda / ratio, reducer=MeanReducer())
    expected = ratio * mean(x, LABELS, triplets).item()
    assert caffe(x, LABELS, triplets).item() == pytest.approx(expected, rel=1e-5)
    assert 3 < ratio <= 5


def crop_offset(crop: torch.Tensor, full: torch.Tensor) -> tuple[int, int] | None:
    """Where ``crop`` (C x h x w) sits in ``full`` (C x H x W), unflipped; None when nowhere."""
    h, w = crop.shape[1:]
    corners = full[:, : full.shape[1] - h + 1, : full.shape[2] - w + 1]
    # Random pixels: only the true offset, if any, matches the crop's corner pixel.
    for i, j in torch.nonzero((corners - crop[:, :1, :1]).abs().amax(dim=0) < 1e-5).tolist():
        if torch.allclose(full[:, i : i + h, j : j + w], crop, atol=1e-5):
            return i, j
    return None


@pytest.mark.parametrize("data_set", ["cub", "cars196", "sop"])
def test_yu2018_images_are_resized_to_256_square_and_randomly_cropped_to_224(tmp_path, data_set):
    # Sec. 4.1: "All training images are resized to 256x256 and randomly cropped to 224x224". A 300 x 200
    # image of random pixels: every training crop is a 224 window of its 256 x 256 resize (both sides
    # squeezed, no flip, no random scale), the windows vary, and testing takes the centre one.
    make = {"cub": layouts.make_cub, "cars196": layouts.make_cars, "sop": layouts.make_sop}[data_set]
    make(tmp_path)
    dataset = compose_node("dataset", f"experiment=yu2018/table1_{data_set}", f"paths.data_dir={tmp_path}")
    splits = dataset.splits()
    pixels = np.random.default_rng(0).integers(0, 256, size=(200, 300, 3), dtype=np.uint8)
    image = Image.fromarray(pixels)
    full = functional.normalize(
        functional.to_tensor(functional.resize(image, [256, 256])), IMAGENET_MEAN, IMAGENET_STD
    )
    torch.manual_seed(0)
    offsets = [crop_offset(splits.train.transform(image), full) for _ in range(8)]
    assert None not in offsets and len(set(offsets)) > 1
    assert crop_offset(splits.train.eval_view().transform(image), full) == (16, 16)
    assert crop_offset(splits.test.transform(image), full) == (16, 16)


def test_yu2018_googlenet_trains_with_frozen_batchnorm():
    # Caffe's GoogLeNet has no BatchNorm: torchvision's 57 are frozen, statistics and affine parameters.
    backbone = compose_node("backbone", "experiment=yu2018/table1_cub", "backbone.trunk.pretrained=false")
    norms = [m for m in backbone.trunk.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert len(norms) == 57
    backbone.train()
    assert not any(m.training for m in norms)
    assert not any(p.requires_grad for m in norms for p in m.parameters())


def test_an_unknown_augmentation_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=r"dataset.augmentation='flip' is not one of random_resized_crop, "):
        CUB200(tmp_path, augmentation="flip")
