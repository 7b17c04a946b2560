"""PRISM (Liu et al., CVPR 2021, "Noise-resistant Deep Metric Learning with Ranking-based Instance
Selection") and its baseline, the memory contrastive loss (MCL).

Read from the authors' released code (github.com/alibaba-edu/Ranking-based-Instance-Selection:
``ret_benchmark/losses/memory_contrastive_loss_w_PRISM.py``, ``engine/trainer.py``, ``modeling/xbm.py``);
the paper itself is not in this repository, so the equations below are as the code computes them.

**MCL** (a contrastive loss on a cross-batch memory of past embeddings, XBM): with cosine similarities
s_ij between L2-normalised queries i and references j, margin m = 0.5 and eps = 1e-5,

    L(Q, R) = 1/|Q| * ( sum_{y_i = y_j, s_ij < 1 - eps} (1 - s_ij) + sum_{y_i != y_j, s_ij > m} s_ij )

(positives with s_ij >= 1 - eps are the sample itself, or its copy in the memory). A step's loss is
L(batch, batch) + w * L(batch, memory), w = 1; MCL enqueues the batch before computing it.

**PRISM** keeps the memory as it was before the batch and, for each sample i of observed class y_i,
ranks it by the softmax of its similarity to the class centres c_k (the mean memory embedding of class
k, over the classes in the memory):

    P_i = exp(c_{y_i} . f_i) / sum_k exp(c_k . f_i)      (1 when y_i has no sample in the memory)

The ``floor(rate * n)`` lowest-ranked samples of the batch are the noise candidates; the highest P among
them joins a window of the last ``window_size`` such values (unless it is 1), and the samples kept are
those with P above the window's mean (when none is, all but the candidates, and the window keeps only
its newest value). Only kept samples enter the loss: L(kept, kept) + w * L(kept rows, memory) (the
latter still divided by the batch size, as the code does), and only they are enqueued, after the step.

Where this differs from the released code, it is written here: class centres are recomputed from the
memory every step, over the classes it holds now (the code refreshes only the centres of classes just
enqueued, keeps stale ones, and its softmax also sums exp(0) over classes never seen); the memory's ring
buffer wraps around one slot at a time (theirs writes an overflowing batch to the end and restarts).

pytorch-metric-learning's ``CrossBatchMemory`` is not used: it enqueues the batch before the loss and
scores the loss against a memory that holds the batch, while PRISM selects against the memory before
the batch and enqueues only what it selected; and MCL's negatives count s, not s - m, which PML's
``ContrastiveLoss`` on similarities would give.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import nn

from noisydml.core.hooks import HookContext, TrainingHooks, TrainingSet
from noisydml.utils.checks import SIMILARITY_MARGIN, check_value, parameter_range

MEMORY_WEIGHT = parameter_range(0, why="a negative weight pushes the memory's positives away").at(
    "memory_weight", "memory_weight=1.0"
)


def memory_contrastive_loss(
    queries: torch.Tensor,
    query_labels: torch.Tensor,
    reference: torch.Tensor,
    reference_labels: torch.Tensor,
    margin: float = 0.5,
    denominator: int | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """MCL's L(Q, R) (module docstring), summed over pairs and divided by ``denominator`` (default |Q|)."""
    similarity = queries @ reference.T
    same = query_labels[:, None] == reference_labels[None, :]
    positives = same & (similarity < 1 - eps)
    negatives = ~same & (similarity > margin)
    total = (1 - similarity)[positives].sum() + similarity[negatives].sum()
    return total / max(denominator if denominator is not None else len(queries), 1)


def class_centre_scores(
    embeddings: torch.Tensor, labels: torch.Tensor, memory: torch.Tensor, memory_labels: torch.Tensor
) -> torch.Tensor:
    """PRISM's P_i: the softmax over the memory's class centres of each sample's own class (1 when its
    class is not in the memory)."""
    classes, index = torch.unique(memory_labels, return_inverse=True)
    sums = torch.zeros(len(classes), memory.shape[1], dtype=memory.dtype, device=memory.device)
    sums.index_add_(0, index, memory)
    counts = torch.bincount(index, minlength=len(classes)).to(memory.dtype)
    centres = sums / counts[:, None]
    probabilities = torch.softmax(embeddings @ centres.T, dim=1)
    position = torch.searchsorted(classes, labels).clamp(max=len(classes) - 1)
    present = classes[position] == labels
    own = probabilities.gather(1, position[:, None])[:, 0]
    return torch.where(present, own, torch.ones_like(own))


class MemoryBank(nn.Module):
    """The last ``size`` enqueued embeddings and labels, a ring buffer. Buffers, so a checkpoint keeps it."""

    def __init__(self, size: int, embedding_size: int):
        super().__init__()
        if size < 1:
            raise ValueError(f"loss.memory_size={size} must be >= 1")
        self.register_buffer("features", torch.zeros(size, embedding_size))
        self.register_buffer("labels", torch.full((size,), -1, dtype=torch.long))
        self.register_buffer("next", torch.zeros((), dtype=torch.long))

    def get(self) -> tuple[torch.Tensor, torch.Tensor]:
        held = self.labels >= 0
        return self.features[held], self.labels[held]

    def enqueue(self, features: torch.Tensor, labels: torch.Tensor) -> None:
        features, labels = features.detach()[-len(self.labels) :], labels.detach()[-len(self.labels) :]
        slots = (self.next + torch.arange(len(labels), device=labels.device)) % len(self.labels)
        self.features[slots] = features.to(self.features.dtype)
        self.labels[slots] = labels
        self.next.copy_((self.next + len(labels)) % len(self.labels))


class MemoryContrastiveLoss(nn.Module, TrainingHooks):
    """MCL: the memory contrastive loss of PRISM's code, on a cross-batch memory of ``memory_size``
    embeddings (module docstring); None: as many as the run trains on, as PRISM's CARS-98N config (9,500
    for 9,558 images), sized in ``setup``. Embeddings must be L2-normalised (the backbone's ``normalize``).
    """

    def __init__(
        self,
        embedding_size: int,
        memory_size: int | None = None,
        margin: float = 0.5,
        memory_weight: float = 1.0,
    ):
        check_value(SIMILARITY_MARGIN.at("margin", "margin=0.5"), margin)
        check_value(MEMORY_WEIGHT, memory_weight)
        super().__init__()
        self.embedding_size = embedding_size
        self.memory = MemoryBank(memory_size, embedding_size) if memory_size is not None else None
        self.margin = margin
        self.memory_weight = memory_weight

    def setup(self, train_set: TrainingSet) -> None:
        if self.memory is None:
            self.memory = MemoryBank(len(train_set.indices), self.embedding_size)

    def _memory(self) -> MemoryBank:
        if self.memory is None:
            raise RuntimeError(
                f"{type(self).__name__}(memory_size=None) sizes its memory at setup(train_set), which the "
                "training module calls; in your own loop give memory_size= (e.g. the training set's size)"
            )
        return self.memory

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor, indices_tuple=None) -> torch.Tensor:
        self._memory().enqueue(embeddings, labels)
        memory, memory_labels = self.memory.get()
        batch = memory_contrastive_loss(embeddings, labels, embeddings, labels, self.margin)
        return batch + self.memory_weight * memory_contrastive_loss(
            embeddings, labels, memory, memory_labels, self.margin
        )


class PRISMLoss(MemoryContrastiveLoss):
    """MCL on the samples PRISM keeps (module docstring). ``noise_rate`` is the rate PRISM is told;
    ``window_size`` values of the threshold are averaged; selection starts after ``warm_up`` steps.

    Each epoch it logs the fraction of samples kept (``train/prism_kept``) and, from the flipped labels
    the data module knows (never used to select), the precision and recall with which the samples it
    dropped are the flipped ones (``train/prism_precision``, ``train/prism_recall``) and the ROC AUC of its
    score P at ranking flipped labels low (``train/prism_auc``).
    """

    def __init__(
        self,
        embedding_size: int,
        noise_rate: float,
        memory_size: int | None = None,
        window_size: int = 5,
        warm_up: int = 0,
        margin: float = 0.5,
        memory_weight: float = 1.0,
    ):
        super().__init__(embedding_size, memory_size, margin, memory_weight)
        if not 0.0 <= noise_rate < 1.0:
            raise ValueError(f"loss.noise_rate={noise_rate} is outside [0, 1): the noise rate PRISM assumes")
        if window_size < 1:
            raise ValueError(f"loss.window_size={window_size} must be >= 1")
        self.noise_rate = noise_rate
        self.window_size = window_size
        self.warm_up = warm_up
        self.window: list[float] = []
        self.steps = 0
        self.flipped: np.ndarray | None = None
        self._indices: torch.Tensor | None = None
        self._epoch = {"seen": 0, "dropped": 0, "flipped": 0, "dropped_flipped": 0}
        # Each scored sample's P and whether its label was flipped, this epoch (for the ROC AUC).
        self._scored: list[tuple[np.ndarray, np.ndarray]] = []
        self._scores: torch.Tensor | None = None

    def setup(self, train_set: TrainingSet) -> None:
        super().setup(train_set)
        self.flipped = np.zeros(train_set.num_indices, dtype=bool)
        self.flipped[train_set.indices] = train_set.flipped

    def begin_batch(self, indices: torch.Tensor) -> None:
        self._indices = indices

    def select(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The mask of the batch's samples PRISM keeps, against the memory as it is (module docstring)."""
        memory, memory_labels = self._memory().get()
        keep = torch.ones(len(labels), dtype=torch.bool, device=labels.device)
        self._scores = None
        candidates = int(self.noise_rate * len(labels))
        if len(memory_labels) == 0 or self.steps < self.warm_up or candidates == 0:
            return keep
        with torch.no_grad():
            scores = class_centre_scores(embeddings.detach(), labels, memory, memory_labels)
        self._scores = scores
        removed = torch.argsort(scores, stable=True)[:candidates]
        boundary = scores[removed[-1]].item()
        if not np.isnan(boundary) and boundary != 1.0:
            self.window = (self.window + [boundary])[-self.window_size :]
        if self.window:
            above = scores > sum(self.window) / len(self.window)
            if above.any():
                return above
            self.window = self.window[-1:]
        keep[removed] = False
        return keep

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor, indices_tuple=None) -> torch.Tensor:
        keep = self.select(embeddings, labels)
        memory, memory_labels = self.memory.get()
        kept, kept_labels = embeddings[keep], labels[keep]
        # Nothing to compare with: zero, still a function of the embeddings, so the step runs.
        loss = (
            memory_contrastive_loss(kept, kept_labels, kept, kept_labels, self.margin) + 0 * embeddings.sum()
        )
        if len(memory_labels):
            loss = loss + self.memory_weight * memory_contrastive_loss(
                kept, kept_labels, memory, memory_labels, self.margin, denominator=len(labels)
            )
        self.memory.enqueue(kept, kept_labels)
        self.steps += 1
        self._count(keep)
        return loss

    def _count(self, keep: torch.Tensor) -> None:
        if self.flipped is None or self._indices is None or len(self._indices) != len(keep):
            return
        flipped = self.flipped[self._indices.cpu().numpy()]
        dropped = ~keep.cpu().numpy()
        self._epoch["seen"] += len(keep)
        self._epoch["dropped"] += int(dropped.sum())
        self._epoch["flipped"] += int(flipped.sum())
        self._epoch["dropped_flipped"] += int((dropped & flipped).sum())
        if self._scores is not None:
            self._scored.append((self._scores.cpu().numpy(), flipped))

    def on_train_epoch_end(self, context: HookContext) -> dict[str, float]:
        counts, self._epoch = self._epoch, dict.fromkeys(self._epoch, 0)
        scored, self._scored = self._scored, []
        if not counts["seen"]:
            return {}
        logs = {"prism_kept": 1 - counts["dropped"] / counts["seen"]}
        if counts["dropped"]:
            logs["prism_precision"] = counts["dropped_flipped"] / counts["dropped"]
        if counts["flipped"]:
            logs["prism_recall"] = counts["dropped_flipped"] / counts["flipped"]
        if scored:
            scores, flipped = (np.concatenate(part) for part in zip(*scored, strict=True))
            if 0 < flipped.sum() < len(flipped):
                # A low P says "noisy": the AUC of -P at finding the flipped labels, whatever the threshold.
                logs["prism_auc"] = float(roc_auc_score(flipped, -scores))
        if self.window:
            logs["prism_threshold"] = sum(self.window) / len(self.window)
        return logs
