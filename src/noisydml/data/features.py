"""Features computed once by a frozen backbone, stored in one .npz file."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import torch

from noisydml.data.base import DatasetLayoutError, Splits, TensorDataset

KEYS = ("features", "labels", "split")


class PrecomputedFeatures:
    """Rows of an .npz file: ``features`` (N x D), ``labels`` (N) and ``split`` (N).

    ``split`` holds "train"/"test" or 0 (train) / 1 (test). Items are the float32 feature rows.
    """

    layout = """\
<root>/
  features.npz    features: N x D floats; labels: N ints;
                  split: N strings "train"/"test", or ints 0 (train) / 1 (test)
                  (np.savez(path, features=..., labels=..., split=...))"""

    def __init__(self, root: str | Path, file: str = "features.npz", name: str = "features"):
        self.root = Path(root)
        self.file = file
        self.name = name

    def splits(self) -> Splits:
        path = self.root / self.file
        if not path.is_file():
            raise DatasetLayoutError(self.name, self.root, self.file, self.layout)
        try:
            npz = np.load(path)
        except (OSError, ValueError, zipfile.BadZipFile) as error:
            raise ValueError(
                f"{self.name}: {path} cannot be read as an .npz file ({error}); write it again with "
                f"np.savez({self.file!r}, features=..., labels=..., split=...)"
            ) from error
        with npz:
            for key in KEYS:
                if key not in npz:
                    raise KeyError(
                        f"{self.name}: {path} has no array {key!r} (found: {', '.join(npz.files)}); "
                        f"save it with np.savez({self.file!r}, features=..., labels=..., split=...)."
                    )
            features, labels, split = (npz[key] for key in KEYS)
        if features.ndim != 2 or not len(features) == len(labels) == len(split):
            raise ValueError(
                f"{self.name}: {path} holds features of shape {features.shape}, {len(labels)} labels and "
                f"{len(split)} split entries; expected N x D features and N of each."
            )
        if labels.dtype.kind in "USO":
            shown = ", ".join(map(repr, labels[:3].tolist()))
            raise ValueError(
                f"{self.name}: {path} holds labels of type {labels.dtype} ({shown}, ...); labels are class "
                "numbers: save them as integers, e.g. labels=np.unique(names, return_inverse=True)[1]"
            )
        bad = np.flatnonzero(~np.isfinite(features).all(axis=1))
        if len(bad):
            raise ValueError(
                f"{self.name}: {path} has {len(bad)} rows of NaN or infinite features (rows "
                f"{', '.join(map(str, bad[:5]))}{', ...' if len(bad) > 5 else ''}); fix or drop them"
            )
        train = self.train_mask(split, path)
        classes = np.unique(labels[train])
        if len(classes) < 2:
            held = f"are all of one class (label {classes[0]})" if len(classes) else "are none"
            raise ValueError(
                f"dataset.root={self.root}: the training rows of {self.file} (split 'train' or 0) {held}; "
                "metric learning needs at least 2 training classes (the P x K sampler draws data.P of them): "
                f"save the rows of more classes in it, or point dataset.root at another {self.file}"
            )
        features = features.astype(np.float32)
        return Splits(
            train=TensorDataset(torch.from_numpy(features[train]), labels[train]),
            test=TensorDataset(torch.from_numpy(features[~train]), labels[~train]),
        )

    def train_mask(self, split: np.ndarray, path: Path) -> np.ndarray:
        """True for the training rows; ints and strings compare alike once both are text."""
        values = split.astype(str)
        unknown = set(np.unique(values)) - {"train", "test", "0", "1"}
        if unknown:
            shown = sorted(str(value) for value in unknown)
            raise ValueError(f"{self.name}: {path} has split values {shown}; use 'train'/'test' or 0/1.")
        return np.isin(values, ["train", "0"])
