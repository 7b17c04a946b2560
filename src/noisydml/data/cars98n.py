"""CARS-98N (Liu et al., CVPR 2021, PRISM): web images of Cars196's 98 training classes, with the labels
of the web search that found them, tested on the clean Cars196 test split (classes 99-196).

It is not a relabelling of Cars196: its training set is 9,558 images collected from Pinterest (98 classes,
16-140 a class; some URLs appear in several classes), whose noise is whatever the search returned, so
no true labels exist and ``noise=none`` is its protocol. PRISM's release lists the URLs
(``prepare_CARS_98N/CARS_98N_list.csv``) and a script that downloads them into one folder per class;
links die, so a download holds fewer images than the list. Nothing is downloaded here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from noisydml.data.base import Splits
from noisydml.data.cars import Cars196
from noisydml.data.images import ImageLayout

log = logging.getLogger(__name__)


class Cars98N(ImageLayout):
    """CARS-98N's training images from the download folder, Cars196's classes 99-196 as the test split.

    Class folders are numbered by the download script; their labels are 1..98 in the folders'
    **alphabetical** order (``0`` -> 1, ``1`` -> 2, ``10`` -> 3, ...), as PRISM's ``CARSN_train.csv``
    assigns them, so an imported list and this loader agree. The test split is read from the Cars196
    release at ``cars196_root`` with Cars196's zero-shot split. Web downloads include files that are not
    images (error pages saved as .jpg): ``skip_unreadable`` is on in its config.
    """

    default_name = "cars98n"
    layout = """\
cars_noise/                       dataset.root: the out_dir of PRISM's prepare_CARS_98N/download.py is img_v3
  img_v3/
    0/4198c93c40cb88b7fa48e3e389ec5b1c--hummer-h-the-muscle.jpg
    1/...                         one folder per class, as CARS_98N_list.csv numbers them (98 folders)
    ...
cars196/                          dataset.cars196_root: the Cars196 release; classes 99-196 test
  cars_annos.mat
  car_ims/000001.jpg ..."""

    def __init__(self, root: str | Path, cars196_root: str | Path, images: str = "img_v3", **options: Any):
        super().__init__(root, **options)
        options = {key: value for key, value in options.items() if key != "name"}
        self.cars196 = Cars196(cars196_root, train_classes=98, **options)
        self.images_dir = images

    def splits(self) -> Splits:
        folder = self.root / self.images_dir
        relpaths, labels = self.class_folders(self.images_dir)
        if len(set(labels)) < 2:
            raise ValueError(
                f"{self.name}: {folder} holds images of {len(set(labels))} class folder(s); CARS-98N has 98. "
                f"Run PRISM's prepare_CARS_98N/download.py with its out_dir there."
            )
        log.info(
            "%s: %d training images in %d class folders under %s",
            self.name,
            len(labels),
            len(set(labels)),
            folder,
        )
        train = self.images(relpaths, labels, train=True)
        return Splits(train=train, test=self.cars196.splits().test)
