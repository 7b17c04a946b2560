"""A published noisy label list imported as a noise model (``noise=from_file``), in PRISM's format.

PRISM (Liu et al., CVPR 2021) released its noisy training labels as ``datalist/<SET>_<rate>noised_train.csv``
(symmetric) and ``<SET>_<rate>smallclusternoised_train.csv``: one ``path,label`` line per image, no
header, absolute paths from their machine (``/data/CUB_200_2011/images/001.Black_footed_Albatross/...``),
labels the data set's own 1-based class ids. Some lists hold a label that is not a training class (the
CUB 20% and 50% lists contain 101, a test class). A ``<SET>_<rate>..._cleaned_train.csv`` beside a list
holds the samples whose label is correct, with that label.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path, PurePosixPath

import numpy as np

from noisydml.noise.models import NoisyLabels
from noisydml.noise.protocols import TrainingSplit

log = logging.getLogger(__name__)

OUTSIDE = ("keep", "drop")


class LabelListNoise:
    """The observed labels of a published list (``path``), matched to the data set's training images.

    An entry matches the training image whose path relative to ``root`` (the data set's root) is the
    longest trailing part of the entry's path, so ``/data/CUB_200_2011/images/001.X/a.jpg`` finds
    ``images/001.X/a.jpg`` under any root. Only matched images are trained on; the counts (entries,
    matched, entries whose file is missing, training images the list leaves out) are logged and kept in
    ``report``, which the run's ``results.json`` holds under ``noise.details``. Fewer than
    ``min_matched`` of the entries matching means the list and the data set differ (wrong root, another
    layout): refused.

    ``outside`` says what to do with an entry whose label is not a training class: ``keep`` it as an
    extra class (as PRISM's training did) or ``drop`` the sample. ``true`` is the data set's own label,
    replaced by the cleaned list's (``cleaned``: a path, or ``auto`` for the ``*_cleaned_train.csv``
    beside ``path`` when there is one, or null) where it lists the sample. ``seed`` is accepted, and
    unused: the list fixes the labels.
    """

    def __init__(
        self,
        path: str | Path,
        root: str | Path,
        seed: int = 0,
        outside: str = "keep",
        min_matched: float = 0.9,
        cleaned: str | Path | None = "auto",
    ):
        if outside not in OUTSIDE:
            raise ValueError(f"noise.outside={outside!r} is not one of {OUTSIDE}")
        if not 0.0 < min_matched <= 1.0:
            raise ValueError(f"noise.min_matched={min_matched} is outside (0, 1]")
        self.path = Path(path)
        self.root = Path(root)
        self.seed = seed
        self.outside = outside
        self.min_matched = min_matched
        self.cleaned = cleaned
        self.report: dict = {}

    def apply(self, labels: np.ndarray) -> NoisyLabels:
        raise ValueError(
            "noise=from_file matches a label list to the data set's image files; it needs an image data set "
            "(dataset=cub, cars196, sop, ...), not labels alone"
        )

    def apply_to(self, train: TrainingSplit) -> NoisyLabels:
        paths = getattr(train, "paths", None)
        if paths is None:
            self.apply(train.labels)
        relpaths = {_relative(path, self.root): i for i, path in enumerate(paths)}
        entries = read_label_list(self.path, "noise.path")
        position = np.full(len(entries), -1, dtype=np.int64)
        for e, (path, _) in enumerate(entries):
            position[e] = _match(path, relpaths)
        matched = position >= 0
        self._refuse_too_few(entries, matched)
        listed = np.array([label for _, label in entries], dtype=np.int64)
        # The first entry of an image that is listed twice wins.
        _, first = np.unique(position[matched], return_index=True)
        keep = np.flatnonzero(matched)[first]
        training_classes = np.unique(train.labels)
        outside = ~np.isin(listed[keep], training_classes)
        outside_counts = dict(zip(*np.unique(listed[keep][outside], return_counts=True), strict=True))
        if self.outside == "drop":
            keep = keep[~outside]
        order = np.argsort(position[keep])
        keep = keep[order]
        indices = position[keep]
        true = train.labels[indices].copy()
        known = self._fill_true(true, indices, relpaths)
        self.report = {
            "path": str(self.path),
            "entries": len(entries),
            "matched": int(matched.sum()),
            "missing_files": int((~matched).sum()),
            "duplicates": int(matched.sum() - len(first)),
            "training_images_not_listed": len(paths) - len(first),
            "outside_labels": {str(k): int(v) for k, v in outside_counts.items()},
            "outside": self.outside,
            "trained_on": len(indices),
            "true_from_cleaned_list": known,
        }
        log.info(
            "noise.path=%s: %d of %d entries matched a training image (%d missing files), %d training images "
            "not listed, labels outside the training classes %s (%s)",
            self.path,
            self.report["matched"],
            len(entries),
            self.report["missing_files"],
            self.report["training_images_not_listed"],
            self.report["outside_labels"] or "none",
            self.outside,
        )
        return NoisyLabels(indices, true, listed[keep])

    def _refuse_too_few(self, entries: list[tuple[str, int]], matched: np.ndarray) -> None:
        if matched.mean() >= self.min_matched:
            return
        example = entries[int(np.flatnonzero(~matched)[0])][0]
        raise ValueError(
            f"noise.path={self.path}: only {matched.sum()} of its {len(entries)} entries "
            f"({matched.mean():.1%}) name a training image under dataset.root={self.root}, below "
            f"noise.min_matched={self.min_matched} (e.g. {example} matches none). Point dataset.root at the "
            "data set the list was written for, in its published layout, or lower noise.min_matched if the "
            "images are known to be missing"
        )

    def _fill_true(self, true: np.ndarray, indices: np.ndarray, relpaths: dict[str, int]) -> int | None:
        """Overwrite ``true`` with the cleaned list's labels where it lists a sample; how many it listed."""
        cleaned = self._cleaned_path()
        if cleaned is None:
            return None
        slot = {int(index): s for s, index in enumerate(indices)}
        known = 0
        for path, label in read_label_list(cleaned, "noise.cleaned"):
            index = _match(path, relpaths)
            if index in slot:
                true[slot[index]] = label
                known += 1
        return known

    def _cleaned_path(self) -> Path | None:
        if self.cleaned is None:
            return None
        if self.cleaned != "auto":
            return Path(self.cleaned)
        beside = self.path.with_name(self.path.name.replace("_train.csv", "_cleaned_train.csv"))
        return beside if beside != self.path and beside.is_file() else None


def read_label_list(path: Path, key: str) -> list[tuple[str, int]]:
    """The ``path,label`` lines of a PRISM-format list (no header). A path may hold commas; the label is
    after the last one."""
    if not path.is_file():
        raise FileNotFoundError(f"{key}={path} does not exist; give the path of a 'path,label' list")
    entries = []
    with path.open(newline="") as f:
        for number, row in enumerate(csv.reader(f), 1):
            if not row:
                continue
            try:
                entries.append((",".join(row[:-1]), int(row[-1])))
            except (ValueError, IndexError):
                raise ValueError(
                    f"{key}={path}, line {number}: {','.join(row)!r} is not 'path,label' with an integer "
                    "label"
                ) from None
    if not entries:
        raise ValueError(f"{key}={path} lists no images")
    return entries


def _relative(path: str, root: Path) -> str:
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        raise ValueError(
            f"noise.root={root} does not contain the training image {path}; set noise.root to the data set's "
            "root (the default, ${dataset.root})"
        ) from None


def _match(path: str, relpaths: dict[str, int]) -> int:
    """The index of the training image whose relative path is the longest trailing part of ``path``."""
    parts = PurePosixPath(path.replace("\\", "/")).parts
    for start in range(len(parts)):
        index = relpaths.get("/".join(parts[start:]).lstrip("/"))
        if index is not None:
            return index
    return -1
