"""Oxford 102 Flowers, in the layout of 102flowers.tgz plus imagelabels.mat and setid.mat."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from noisydml.data.base import Splits
from noisydml.data.images import ImageLayout


class Flowers102(ImageLayout):
    """Oxford-102 with a zero-shot split: all images of classes 1-51 train, of 52-102 test.

    Le & Odobez do not state which split they use. The release's setid.mat splits images of the same
    classes (a classification protocol); metric learning evaluates on unseen classes, so this takes
    the zero-shot split of CUB and Cars196: the first half of the classes trains, the second tests.
    """

    default_name = "flowers102"
    layout = """\
flowers102/
  imagelabels.mat    "labels": 1 x 8189, class 1..102 of jpg/image_{i:05d}.jpg at column i
  setid.mat          trnid, valid, tstid (not used: the split is by class)
  jpg/
    image_00001.jpg
    ..."""

    def __init__(self, root: str | Path, train_classes: int = 51, **options: Any):
        super().__init__(root, **options)
        self.train_classes = train_classes

    def splits(self) -> Splits:
        labels = self.mat_array("imagelabels.mat", "labels").astype(np.int64)
        relpaths = [f"jpg/image_{i:05d}.jpg" for i in range(1, len(labels) + 1)]
        return self.zero_shot(relpaths, labels, self.train_classes)
