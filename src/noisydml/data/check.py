"""A data set's folder against its published layout and image counts, with its missing and unreadable
images: what ``noisydml-check-data`` (``noisydml.run.check_data``) reports of a layout a run would build."""

from __future__ import annotations

from dataclasses import dataclass, field

from PIL import Image

from noisydml.data.unreadable import PIL_ERRORS

# The image counts of each published split (the zero-shot splits of the metric-learning literature;
# Oxford-102: every image, as the split is by class).
PUBLISHED: dict[str, dict[str, int]] = {
    "cub": {"train": 5864, "test": 5924},
    "cars196": {"train": 8054, "test": 8131},
    "sop": {"train": 59551, "test": 60502},
    "inshop": {"train": 25882, "query": 14218, "gallery": 12612},
    "flowers102": {"images": 8189},
    # CARS-98N: the 9,558 URLs of PRISM's CARS_98N_list.csv in 98 class folders; tested on Cars196's.
    "cars98n": {"train": 9558, "train classes": 98, "test": 8131},
}
# Splits whose published count is a list of web links: a download holds at most that many, as links die.
DOWNLOADED: dict[str, set[str]] = {"cars98n": {"train"}}


@dataclass
class Check:
    """What a data set's folder holds against what was published."""

    dataset: str
    root: str
    counts: dict[str, int]
    missing: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    # dataset.skip_unreadable: a run drops the unreadable images (web downloads' error pages) and trains.
    skips_unreadable: bool = False

    def _as_published(self, split: str, found: int) -> bool:
        expected = PUBLISHED[self.dataset][split]
        if split in DOWNLOADED.get(self.dataset, set()):
            return 0 < found <= expected
        return found == expected

    @property
    def mismatched(self) -> dict[str, tuple[int, int]]:
        """``split: (found, published)`` where the folder is not as published (for a downloaded split:
        empty, or more images than links)."""
        published = PUBLISHED[self.dataset]
        return {
            k: (self.counts.get(k, 0), v)
            for k, v in published.items()
            if not self._as_published(k, self.counts.get(k, 0))
        }

    @property
    def ok(self) -> bool:
        return not (self.mismatched or self.missing or (self.unreadable and not self.skips_unreadable))

    def text(self, listed: int = 20) -> str:
        published = PUBLISHED[self.dataset]
        lines = [f"{self.dataset} at {self.root}:"]
        for split, expected in published.items():
            found = self.counts.get(split, 0)
            if split in DOWNLOADED.get(self.dataset, set()):
                verdict = f"{expected:,} links published; dead links expected"
                verdict = f"ok, {verdict}" if self._as_published(split, found) else verdict
            else:
                verdict = "ok" if found == expected else f"published {expected:,}"
            unit = "" if split.endswith("classes") else " images"
            lines.append(f"  {split}: {found:,}{unit} ({verdict})")
        unreadable = "unreadable, skipped by a run" if self.skips_unreadable else "unreadable"
        for title, items in (
            ("missing", self.missing),
            (unreadable, [f"{path} ({why})" for path, why in self.unreadable]),
        ):
            if items:
                lines.append(f"  {len(items):,} {title}:")
                lines += [f"    {item}" for item in items[:listed]]
                if len(items) > listed:
                    lines.append(f"    ... and {len(items) - listed:,} more")
        lines.append("  ready to train" if self.ok else "  NOT as published: see above")
        return "\n".join(lines)


def check_layout(dataset: str, layout) -> Check:
    """Count the splits of ``layout`` (a built ``dataset=<dataset>`` layout) and open every image's header."""
    splits = layout.splits()
    test = len(splits.test)
    if dataset == "inshop":
        queries = int(splits.query_mask.sum())
        counts = {"train": len(splits.train), "query": queries, "gallery": test - queries}
    elif "images" in PUBLISHED[dataset]:
        counts = {"images": len(splits.train) + test}
    else:
        counts = {"train": len(splits.train), "test": test}
    if "train classes" in PUBLISHED[dataset]:
        counts["train classes"] = len(set(splits.train.labels.tolist()))
    result = Check(dataset, str(layout.root), counts, skips_unreadable=bool(layout.skip_unreadable))
    for path in [*splits.train.paths, *splits.test.paths]:
        try:
            with Image.open(path) as image:
                image.verify()
        except FileNotFoundError:
            result.missing.append(path)
        except PIL_ERRORS as error:
            result.unreadable.append((path, str(error) or type(error).__name__))
    return result
