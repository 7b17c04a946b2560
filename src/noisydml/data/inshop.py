"""DeepFashion In-Shop Clothes Retrieval, in the layout of img.zip plus list_eval_partition.txt."""

from __future__ import annotations

import numpy as np

from noisydml.data.base import Splits
from noisydml.data.images import ImageLayout

STATUSES = ("train", "query", "gallery")


class InShop(ImageLayout):
    """In-Shop with its published split: 3,997 training items; queries searched in a gallery.

    The test split holds the query images first, then the gallery images; ``query_mask`` marks the
    queries. Labels are the item ids as ints (``id_00000002`` -> 2).
    """

    default_name = "inshop"
    layout = """\
InShop/
  list_eval_partition.txt    (from the release's Eval/) line 1: the image count;
                             line 2: "image_name item_id evaluation_status";
                             then "img/WOMEN/Dresses/id_00000002/02_1_front.jpg id_00000002 train"
                             with evaluation_status one of train, query, gallery
  img/
    WOMEN/Dresses/id_00000002/02_1_front.jpg
    ..."""

    def splits(self) -> Splits:
        lines = self.annotation("list_eval_partition.txt").read_text().splitlines()
        # Line 1 is the image count and line 2 the column names.
        rows = [line.split() for line in lines[2:] if line.strip()]
        unknown = {row[2] for row in rows} - set(STATUSES)
        if unknown:
            raise ValueError(
                f"{self.name}: list_eval_partition.txt under dataset.root={self.root} has "
                f"evaluation_status {sorted(unknown)}, expected one of {', '.join(STATUSES)}."
            )
        by_status = {status: [row for row in rows if row[2] == status] for status in STATUSES}
        test = by_status["query"] + by_status["gallery"]
        return Splits(
            train=self.images(*paths_and_items(by_status["train"]), train=True),
            test=self.images(*paths_and_items(test), train=False),
            query_mask=np.arange(len(test)) < len(by_status["query"]),
        )


def paths_and_items(rows: list[list[str]]) -> tuple[list[str], np.ndarray]:
    """The image paths and the item ids (``id_00000002`` -> 2) of partition rows."""
    items = np.array([int(row[1].removeprefix("id_")) for row in rows], dtype=np.int64)
    return [row[0] for row in rows], items
