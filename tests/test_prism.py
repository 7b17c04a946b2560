"""PRISM's selection and its memory contrastive loss against brute-force versions written as PRISM's
released code loops (one sample, one class, one pair at a time), and a method run on the digits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from configs import load
from noisydml.losses.prism import (
    MemoryBank,
    MemoryContrastiveLoss,
    PRISMLoss,
    class_centre_scores,
    memory_contrastive_loss,
)
from noisydml.run.train import train
from training_sets import training_set


def normalised(n: int, dim: int = 6, seed: int = 0) -> torch.Tensor:
    x = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return torch.nn.functional.normalize(x, dim=1)


def brute_mcl(q, ql, r, rl, denominator=None, margin=0.5, eps=1e-5):
    total = 0.0
    for i in range(len(q)):
        for j in range(len(r)):
            s = float(q[i] @ r[j])
            if ql[i] == rl[j] and s < 1 - eps:
                total += 1 - s
            elif ql[i] != rl[j] and s > margin:
                total += s
    return total / (denominator or len(q))


def brute_scores(f, y, memory, memory_labels):
    classes = sorted(set(memory_labels.tolist()))
    centres = {c: memory[memory_labels == c].mean(0) for c in classes}
    scores = []
    for i in range(len(f)):
        if int(y[i]) not in centres:
            scores.append(1.0)
            continue
        exp = {c: float(torch.exp(centres[c] @ f[i])) for c in classes}
        scores.append(exp[int(y[i])] / sum(exp.values()))
    return torch.tensor(scores, dtype=torch.float64)


def brute_select(scores, rate, window, size):
    """The released code's threshold rule, step by step; returns the kept mask and the new window."""
    order = sorted(range(len(scores)), key=lambda i: (float(scores[i]), i))
    removed = order[: int(rate * len(scores))]
    boundary = float(scores[removed[-1]])
    if boundary == boundary and boundary != 1.0:
        window = (window + [boundary])[-size:]
    fallback = [i not in removed for i in range(len(scores))]
    if not window:
        return fallback, window
    mean = sum(window) / len(window)
    keep = [float(s) > mean for s in scores]
    if not any(keep):
        return fallback, window[-1:]
    return keep, window


def test_mcl_matches_the_pairwise_sum_with_the_sample_itself_left_out():
    q, labels = normalised(8), torch.tensor([0, 0, 1, 1, 2, 2, 0, 1])
    r = torch.cat([normalised(10, seed=1), q[:3]])  # the memory holds copies of three queries
    rl = torch.cat([torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 3]), labels[:3]])
    got = memory_contrastive_loss(q, labels, r, rl)
    assert got.item() == pytest.approx(brute_mcl(q, labels, r, rl), rel=1e-12)
    assert memory_contrastive_loss(q, labels, q, labels).item() == pytest.approx(
        brute_mcl(q, labels, q, labels)
    )
    # Negatives below the margin count nothing: orthogonal classes only pay for their positives.
    eye = torch.eye(4, dtype=torch.float64)
    assert (
        memory_contrastive_loss(eye, torch.tensor([0, 1, 2, 3]), eye, torch.tensor([0, 1, 2, 3])).item() == 0
    )


def test_class_centre_scores_match_the_per_class_softmax():
    memory, memory_labels = normalised(30, seed=2), torch.arange(30) % 4
    f, y = normalised(9, seed=3), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3, 7])
    got = class_centre_scores(f, y, memory, memory_labels)
    torch.testing.assert_close(got, brute_scores(f, y, memory, memory_labels))
    assert got[-1] == 1.0  # class 7 has no sample in the memory


def test_prism_selection_and_loss_match_brute_force_over_several_steps():
    dim, rate, size = 6, 0.25, 3
    loss = PRISMLoss(embedding_size=dim, noise_rate=rate, memory_size=20, window_size=size).double()
    window, memory, memory_labels = (
        [],
        torch.zeros(0, dim, dtype=torch.float64),
        torch.zeros(0, dtype=torch.long),
    )
    for step in range(6):
        f = normalised(8, dim, seed=10 + step).requires_grad_()
        y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        value = loss(f, y)
        if len(memory_labels) == 0:
            keep = [True] * 8
            expected = brute_mcl(f.detach(), y, f.detach(), y)
        else:
            scores = brute_scores(f.detach(), y, memory, memory_labels)
            keep, window = brute_select(scores, rate, window, size)
            keep_t = torch.tensor(keep)
            k, ky = f.detach()[keep_t], y[keep_t]
            expected = brute_mcl(k, ky, k, ky) + brute_mcl(k, ky, memory, memory_labels, denominator=8)
        assert value.item() == pytest.approx(expected, rel=1e-10), step
        assert loss.window == pytest.approx(window)
        keep_t = torch.tensor(keep)
        # Only the kept samples are enqueued; the memory keeps the newest 20.
        memory = torch.cat([memory, f.detach()[keep_t]])[-20:]
        memory_labels = torch.cat([memory_labels, y[keep_t]])[-20:]
        held, held_labels = loss.memory.get()
        assert sorted(held_labels.tolist()) == sorted(memory_labels.tolist())
        assert len(held) == len(memory)
        value.backward()


def test_prism_drops_the_sample_labelled_against_its_cluster_and_counts_it_as_found():
    # Classes 0 and 1 sit at two far points; sample 3 looks like class 0 but is labelled 1 (flipped).
    dim = 2
    loss = PRISMLoss(embedding_size=dim, noise_rate=0.25, memory_size=64, window_size=5)
    labels = torch.tensor([0, 0, 1, 1])
    loss.setup(training_set(labels.numpy(), flipped=np.array([False, False, False, True])))
    a, b = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    clean = torch.stack([a, a, b, b])
    loss.begin_batch(torch.arange(4))
    loss(clean, labels)
    batch = torch.stack([a, a, b, a])
    loss.begin_batch(torch.arange(4))
    loss(batch, labels)
    held, held_labels = loss.memory.get()
    assert len(held_labels) == 7  # the second batch's sample 3 was not enqueued
    logs = loss.on_train_epoch_end(None)
    assert (
        logs["prism_precision"] == 1.0 and logs["prism_recall"] == 0.5
    )  # sample 3 flipped twice, caught once
    assert logs["prism_kept"] == pytest.approx(7 / 8)
    assert logs["prism_auc"] == 1.0  # the second batch scored sample 3 lowest


def test_mcl_enqueues_the_batch_first_and_the_bank_wraps_around():
    loss = MemoryContrastiveLoss(embedding_size=3, memory_size=5).double()
    f, y = normalised(4, 3), torch.tensor([0, 0, 1, 1])
    value = loss(f, y)
    assert value.item() == pytest.approx(2 * brute_mcl(f, y, f, y))
    bank = MemoryBank(5, 1)
    bank.enqueue(torch.arange(4.0)[:, None], torch.arange(4))
    bank.enqueue(torch.arange(4.0, 7.0)[:, None], torch.arange(4, 7))
    assert sorted(bank.get()[1].tolist()) == [2, 3, 4, 5, 6]


def test_prism_config_reads_the_runs_noise_rate_and_refuses_a_bad_one():
    loss = load("loss", "prism", "embedding_size=8", "noise_rate=0.3")
    assert (loss.noise_rate, loss.window_size, loss.memory) == (0.3, 30, None)
    loss.setup(training_set(np.arange(50) % 5))
    assert len(loss.memory.labels) == 50  # as many as the run trains on
    with pytest.raises(ValueError, match=r"loss.noise_rate=1.5 is outside \[0, 1\)"):
        PRISMLoss(embedding_size=8, noise_rate=1.5)


@pytest.mark.parametrize("method", ["prism/prism", "prism/mcl"])
def test_prism_methods_train_on_the_digits_and_log_their_selection(compose_config, tmp_path, method):
    cfg = compose_config(f"method={method}", "trainer.max_epochs=1", "data.batches_per_epoch=4")
    metrics = train(cfg)
    assert 0.0 <= metrics["test/recall@1"] <= 1.0
    header = (Path(cfg.paths.output_dir) / "csv" / "metrics.csv").read_text().splitlines()[0]
    assert ("train/prism_precision" in header) == (method == "prism/prism")


@pytest.mark.parametrize("method", ["prism/prism", "prism/mcl"])
def test_the_check_before_training_leaves_the_memory_empty(compose_config, method):
    # The first batch is checked through the loss before training (preflight); PRISM's and MCL's memory
    # must not keep it. Before, it did: training's first batch was selected against its own images, and
    # PRISM's LeNet on MNIST-5k collapsed (every embedding within cosine 0.9999 of the others).
    one_step = ("trainer.max_steps=1", "data.batches_per_epoch=1", "trainer.max_epochs=1")
    cfg = compose_config(f"method={method}", *one_step)
    train(cfg)
    last = torch.load(Path(cfg.paths.output_dir) / "checkpoints" / "last.ckpt", weights_only=True)
    held = last["state_dict"]["loss.memory.labels"] >= 0
    # One step: the memory holds that step's batch (all of it: PRISM keeps everything against an empty
    # memory), nothing more.
    assert int(held.sum()) == cfg.data.P * cfg.data.K
