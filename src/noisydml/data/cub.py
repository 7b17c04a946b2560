"""Caltech-UCSD Birds 200-2011, in the layout of the CUB_200_2011.tgz archive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from noisydml.data.base import Splits
from noisydml.data.images import ImageLayout


class CUB200(ImageLayout):
    """CUB-200-2011 with the zero-shot split: classes 1-100 train, 101-200 test.

    The archive's own train/test split (``train_test_split.txt``) is not used: metric learning
    evaluates on classes never seen in training.
    """

    default_name = "cub"
    layout = """\
CUB_200_2011/
  images.txt                "<image id> <path under images/>", one image a line
  image_class_labels.txt    "<image id> <class id 1..200>"
  images/
    001.Black_footed_Albatross/Black_Footed_Albatross_0046_18.jpg
    ..."""

    def __init__(self, root: str | Path, train_classes: int = 100, **options: Any):
        super().__init__(root, **options)
        self.train_classes = train_classes

    def splits(self) -> Splits:
        images = read_id_table(self.annotation("images.txt"))
        classes = read_id_table(self.annotation("image_class_labels.txt"))
        unlabelled = images.keys() - classes.keys()
        if unlabelled:
            raise ValueError(
                f"{self.name}: image ids {sorted(unlabelled)[:5]} of images.txt have no class in "
                f"image_class_labels.txt under dataset.root={self.root}; restore the file from the archive."
            )
        relpaths = [f"images/{path}" for path in images.values()]
        labels = np.array([int(classes[image_id]) for image_id in images], dtype=np.int64)
        return self.zero_shot(relpaths, labels, self.train_classes)


def read_id_table(path: Path) -> dict[str, str]:
    """The ``<id> <value>`` lines of one of the archive's text files, in file order."""
    rows = (line.split() for line in path.read_text().splitlines())
    return {row[0]: row[1] for row in rows if row}
