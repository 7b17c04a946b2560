"""What every data set gives the data module: labelled splits whose items carry their index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset


class DatasetLayoutError(FileNotFoundError):
    """A data root that is missing or lacks a file of the published layout."""

    def __init__(self, name: str, root: str | Path, missing: str | Path, layout: str):
        super().__init__(
            f"{name}: {missing} not found under dataset.root={root}; point dataset.root at the folder "
            "holding it, or set paths.data_dir for every data set (NOISYDML_DATA_DIR, or the git-ignored "
            f"conf/local/default.yaml).\nExpected layout:\n{layout}"
        )


class LabeledDataset(Dataset):
    """A data set whose item ``i`` is ``(input, label, i)``.

    ``labels`` holds every item's class as an int64 array so the sampler and the noise models never
    need to touch the inputs. ``i`` travels with the batch so per-sample state (BSPML's weights, the
    noise bookkeeping) can be looked up by index.
    """

    def __init__(self, labels: np.ndarray):
        self.labels = np.asarray(labels, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.labels)

    def load(self, index: int) -> torch.Tensor:
        raise NotImplementedError

    def eval_view(self) -> LabeledDataset:
        """The same items with the test split's deterministic transform (no random crops or flips).

        Metrics that classify test items against training embeddings embed the training split this way.
        """
        return self

    def verify(self) -> int:
        """Check every input can be read before training; return how many were dropped as unreadable.

        In-memory data sets have nothing to check; image folders override this.
        """
        return 0

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int, int]:
        return self.load(index), int(self.labels[index]), index


class TensorDataset(LabeledDataset):
    """In-memory inputs (digits, precomputed features)."""

    def __init__(self, inputs: torch.Tensor, labels: np.ndarray):
        super().__init__(labels)
        if len(inputs) != len(self.labels):
            raise ValueError(f"{len(inputs)} inputs but {len(self.labels)} labels")
        self.inputs = inputs

    def load(self, index: int) -> torch.Tensor:
        return self.inputs[index]


@dataclass
class Splits:
    """The training split and the evaluation split of one data set.

    ``query_mask`` is None for the usual protocol (every test item is a query against all others,
    itself excluded). For query-vs-gallery data sets (In-Shop) it is True for queries; the others
    form the gallery.

    ``train_eval_labels`` holds each training item's class in the terms the test split is scored by,
    where the data set trains on other labels (the digit under Levi et al.'s even/odd ``label_map``, the
    letter when Omniglot trains on alphabets); None when they are the training labels. Scoring the
    training split by them gives Levi et al.'s "train digits" columns (Table 1) and Table 4.
    """

    train: LabeledDataset
    test: LabeledDataset
    query_mask: np.ndarray | None = None
    train_eval_labels: np.ndarray | None = None

    @property
    def num_train_classes(self) -> int:
        return len(np.unique(self.train.labels))


def refuse_unread_keys(
    split_key: str, split: str, given: Mapping[str, Any], read_by: Mapping[str, tuple[str, ...]]
) -> None:
    """A data set's keys that only some of its splits read (``read_by``: key -> those splits), refused when
    given (not null) under a split that ignores them: the run would record a value it never used
    (``dataset.train_digits=[0,1]`` under ``split=same_classes`` trains on every digit)."""
    for key, splits in read_by.items():
        value = given[key]
        if value is not None and split not in splits:
            listed = not isinstance(value, str) and isinstance(value, Sequence)
            shown = f"[{','.join(str(v) for v in value)}]" if listed else value
            readers = " or ".join(f"dataset.{split_key}={s}" for s in splits)
            raise ValueError(
                f"dataset.{key}={shown} is ignored by dataset.{split_key}={split} (only {readers} reads it); "
                f"drop dataset.{key}, or set {readers.split(' or ')[0]}"
            )
