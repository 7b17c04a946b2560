"""Stanford Cars (196 classes), in the layout of car_ims.tgz plus cars_annos.mat, or in one folder per
class (the layout PRISM's noisy label lists name)."""

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

    ``class_folders`` (a folder under the root, e.g. ``images``) reads the images from one folder per
    class instead of car_ims/ and cars_annos.mat: the layout of the release re-packed by class (cars_train/
    and cars_test/ merged into one folder per class name, a clashing file name given a ``_2``), which
    PRISM's lists (``/data/cars196/images/<class>/<file>``, labels 1..196 in the folders' sorted order)
    are written against, so ``noise=from_file`` matches them. Classes are numbered in the folders' sorted
    order, as in PRISM's lists; the first ``train_classes`` train.
    """

    default_name = "cars196"
    layout = """\
cars196/
  cars_annos.mat     struct array "annotations" with fields relative_im_path ("car_ims/000001.jpg"),
                     bbox_x1, bbox_y1, bbox_x2, bbox_y2, class (1..196), test
  car_ims/
    000001.jpg
    ...
or, with dataset.class_folders=images:
cars196/
  images/
    AM General Hummer SUV 2000/00076.jpg     one folder per class (196), numbered in sorted order
    Acura Integra Type R 2001/01864_2.jpg
    ..."""

    def __init__(
        self, root: str | Path, train_classes: int = 98, class_folders: str | None = None, **options: Any
    ):
        super().__init__(root, **options)
        self.train_classes = train_classes
        self.class_folders_dir = class_folders

    def splits(self) -> Splits:
        if self.class_folders_dir:
            relpaths, labels = self.class_folders(self.class_folders_dir)
        else:
            annotations = self.mat_array("cars_annos.mat", "annotations")
            relpaths = [str(path) for path in annotations["relative_im_path"]]
            labels = annotations["class"].astype(np.int64)
        return self.zero_shot(relpaths, labels, self.train_classes)
