"""The P x K sampler: batch composition, seeding, epoch length, small classes, distributed slices."""

from __future__ import annotations

import numpy as np
import pytest

from noisydml.data.sampler import PKSampler


def labels_with_counts(counts: list[int]) -> np.ndarray:
    return np.repeat(np.arange(len(counts)), counts)


def test_every_batch_has_p_classes_of_k_distinct_samples():
    labels = labels_with_counts([7, 9, 6, 12, 8])
    sampler = PKSampler(labels, P=3, K=4, seed=1)
    batches = list(sampler)
    assert len(batches) == len(sampler) == len(labels) // 12
    for batch in batches:
        assert len(batch) == 12 and len(set(batch)) == 12
        classes, per_class = np.unique(labels[batch], return_counts=True)
        assert len(classes) == 3 and (per_class == 4).all()
        # Each class's samples come as one contiguous block of K.
        assert all(len(set(labels[batch[i : i + 4]])) == 1 for i in range(0, 12, 4))


def test_seeded_and_new_batches_each_epoch():
    labels = labels_with_counts([10] * 6)
    a, b = PKSampler(labels, P=2, K=3, seed=5), PKSampler(labels, P=2, K=3, seed=5)
    assert list(a) == list(b)
    first = list(a)
    a.set_epoch(1)
    assert list(a) != first
    assert list(PKSampler(labels, P=2, K=3, seed=6)) != first


def test_batches_per_epoch_overrides_the_default_length():
    sampler = PKSampler(labels_with_counts([10] * 6), P=2, K=3, batches_per_epoch=17)
    assert len(list(sampler)) == 17


def test_small_classes_error_names_them_and_the_fix():
    labels = labels_with_counts([10, 3, 10, 2])
    with pytest.raises(ValueError, match=r"data.K=4: 2 training classes .* 1 \(3\), 3 \(2\).*small_classes"):
        PKSampler(labels, P=2, K=4)


def test_small_classes_replace_draws_with_replacement_but_never_singletons():
    labels = labels_with_counts([10, 3, 10, 1])
    sampler = PKSampler(labels, P=3, K=4, small_classes="replace", batches_per_epoch=50)
    drawn = np.concatenate([labels[b] for b in sampler])
    assert 1 in drawn and 3 not in drawn
    for batch in sampler:
        assert len(batch) == 12


def test_small_classes_drop_skips_them():
    labels = labels_with_counts([10, 3, 10, 10])
    sampler = PKSampler(labels, P=2, K=4, small_classes="drop")
    drawn = np.concatenate([labels[b] for b in sampler])
    assert set(drawn) == {0, 2, 3}
    # What the run prints: one class of 3 samples never drawn.
    assert sampler.left_out == (1, 3)
    assert PKSampler(labels_with_counts([10, 1, 10]), P=2, K=4, small_classes="replace").left_out == (1, 1)


@pytest.mark.parametrize(
    ("P", "K", "message"),
    [
        (5, 2, r"data.P=5 .* 4 training classes"),
        (2, 11, r"data.K=11 is larger than every class"),
        (2, 1, r"data.K=1 must be >= 2"),
    ],
)
def test_impossible_batches_are_refused(P, K, message):
    with pytest.raises(ValueError, match=message):
        PKSampler(labels_with_counts([10] * 4), P=P, K=K)


def test_distributed_ranks_split_the_single_process_batch():
    labels = labels_with_counts([8] * 10)
    single = PKSampler(labels, P=6, K=2, seed=3, batches_per_epoch=5)
    ranks = [PKSampler(labels, P=3, K=2, seed=3, num_replicas=2, rank=r, batches_per_epoch=5) for r in (0, 1)]
    for whole, b0, b1 in zip(single, *ranks, strict=True):
        assert b0 + b1 == whole
        assert not set(labels[b0]) & set(labels[b1])


def test_small_classes_replace_accepts_every_class_smaller_than_k():
    # Le & Odobez's SOP topline at p = 0.7 keeps at most 4 images of a class, with K = 5.
    labels = labels_with_counts([2, 3, 4, 4, 2])
    drawn = np.concatenate(list(PKSampler(labels, P=2, K=5, small_classes="replace", batches_per_epoch=40)))
    assert set(drawn) == set(range(len(labels)))
