"""Stanford Online Products, in the layout of Stanford_Online_Products.zip."""

from __future__ import annotations

import numpy as np

from noisydml.data.base import Splits
from noisydml.data.images import ImageLayout, ImageListDataset


class StanfordOnlineProducts(ImageLayout):
    """SOP with its published split: Ebay_train.txt (classes 1-11318) and Ebay_test.txt (11319-22634)."""

    default_name = "sop"
    layout = """\
Stanford_Online_Products/
  Ebay_train.txt     header "image_id class_id super_class_id path", then one image a line
  Ebay_test.txt      same columns; path relative to this folder
  bicycle_final/
    111085122871_0.JPG
    ...
  cabinet_final/ chair_final/ coffee_maker_final/ fan_final/ kettle_final/ lamp_final/
  mug_final/ sofa_final/ stapler_final/ table_final/ toaster_final/"""

    def splits(self) -> Splits:
        return Splits(
            train=self.read("Ebay_train.txt", train=True), test=self.read("Ebay_test.txt", train=False)
        )

    def read(self, relpath: str, train: bool) -> ImageListDataset:
        lines = self.annotation(relpath).read_text().splitlines()
        header = lines[0].split()
        if header[:4] != ["image_id", "class_id", "super_class_id", "path"]:
            raise ValueError(
                f"{self.name}: {relpath} under dataset.root={self.root} starts with {lines[0]!r}, not the "
                f"header 'image_id class_id super_class_id path'; use the file from the SOP release."
            )
        rows = [line.split() for line in lines[1:] if line.strip()]
        labels = np.array([int(row[1]) for row in rows], dtype=np.int64)
        return self.images([row[3] for row in rows], labels, train=train)
