"""Stanford Cars (196 classes), in the layout of car_ims.tgz plus cars_annos.mat."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from noisydml.data.base import Splits
from noisydml.data.images import ImageLayout


class Cars196(ImageLayout):
    """Cars196 with the zero-shot split: classes 1-98 train, 99-196 test.

    The annotation's own ``test`` flag and bounding boxes are not used: metric learning trains and
    tests on whole images of disjoint classes.
    """

    default_name = "cars196"
    layout = """\
cars196/
  cars_annos.mat     struct array "annotations" with fields relative_im_path ("car_ims/000001.jpg"),
                     bbox_x1, bbox_y1, bbox_x2, bbox_y2, class (1..196), test
  car_ims/
    000001.jpg
    ..."""

    def __init__(self, root: str | Path, train_classes: int = 98, **options: Any):
        super().__init__(root, **options)
        self.train_classes = train_classes

    def splits(self) -> Splits:
        annotations = self.mat_array("cars_annos.mat", "annotations")
        relpaths = [str(path) for path in annotations["relative_im_path"]]
        labels = annotations["class"].astype(np.int64)
        return self.zero_shot(relpaths, labels, self.train_classes)
