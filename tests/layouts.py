"""Tiny data sets written in exactly the layouts their authors published, for tests to load.

Each ``make_*`` writes under ``root`` the folder that the data set's config points at
(``${paths.data_dir}/<folder>``) and returns it, so a test can set ``paths.data_dir=root`` and use
the default config. Every image of a class is one solid colour, ``class_colour(label)``, so a test
can check that an item's image belongs to its label. Zero-shot data sets get class ids on both
sides of the published boundary (CUB: 1, 2 and 101, 102), so the default split works on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.io
from PIL import Image

SOP_SUPER_CLASSES = ("bicycle_final", "cabinet_final", "chair_final", "coffee_maker_final")


def class_colour(label: int) -> tuple[int, int, int]:
    """The RGB colour of every image of class ``label``; distinct for the small ids used here."""
    return (28 + label * 67 % 200, 28 + label * 131 % 200, 28 + label * 29 % 200)


def write_image(path: Path, label: int, size: int = 8, fmt: str = "JPEG") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (size, size), class_colour(label)).save(path, fmt, quality=95)


def zero_shot_ids(classes: int, first_test: int) -> list[int]:
    """``classes`` ids: the first half from 1, the second half from ``first_test``."""
    if classes < 2:
        raise ValueError(f"classes={classes}: a zero-shot split needs at least 2")
    train = (classes + 1) // 2
    return list(range(1, train + 1)) + list(range(first_test, first_test + classes - train))


def round_robin(ids: list[int], per_class: int) -> list[int]:
    """Each id ``per_class`` times, classes interleaved, so a file order that ignores labels shows."""
    return [label for _ in range(per_class) for label in ids]


def make_cub(root: str | Path, classes: int = 4, per_class: int = 3, size: int = 8) -> Path:
    """CUB_200_2011/ with images.txt, image_class_labels.txt and images/<class folder>/*.jpg."""
    folder = Path(root) / "CUB_200_2011"
    rows = []
    for label in zero_shot_ids(classes, 101):
        for k in range(per_class):
            relpath = f"{label:03d}.Bird_{label}/Bird_{label}_{k:04d}.jpg"
            write_image(folder / "images" / relpath, label, size)
            rows.append((relpath, label))
    (folder / "images.txt").write_text("".join(f"{i} {relpath}\n" for i, (relpath, _) in enumerate(rows, 1)))
    (folder / "image_class_labels.txt").write_text(
        "".join(f"{i} {label}\n" for i, (_, label) in enumerate(rows, 1))
    )
    return folder


def cub_run(root: str | Path, per_class: int = 3) -> list[str]:
    """A generated CUB folder under ``root`` (4 classes x ``per_class`` images, half of them zero-shot test
    classes) and the overrides that train a randomly initialised ResNet34 on it at 32 x 32 with 2 x 2
    batches."""
    make_cub(root, per_class=per_class, size=40)
    return [
        "dataset=cub",
        f"paths.data_dir={root}",
        "dataset.image_size=32",
        "dataset.resize=36",
        "backbone=resnet34",
        "backbone.trunk.pretrained=false",
        "data.P=2",
        "data.K=2",
        # Two training classes: none to spare for a class-disjoint validation split.
        "data.val_fraction=0",
    ]


def make_cars(root: str | Path, classes: int = 4, per_class: int = 3, size: int = 8) -> Path:
    """cars196/ with cars_annos.mat (a 1 x N struct array, as MATLAB wrote it) and car_ims/*.jpg."""
    folder = Path(root) / "cars196"
    labels = round_robin(zero_shot_ids(classes, 99), per_class)
    fields = ["relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "test"]
    annotations = np.zeros((1, len(labels)), dtype=[(field, object) for field in fields])
    for i, label in enumerate(labels):
        relpath = f"car_ims/{i + 1:06d}.jpg"
        write_image(folder / relpath, label, size)
        box = [np.uint8(v) for v in (0, 0, size - 1, size - 1)]
        annotations[0, i] = (relpath, *box, np.uint8(label), np.uint8(i % 2))
    names = np.array([f"Car {label}" for label in range(1, max(labels) + 1)], dtype=object)
    scipy.io.savemat(folder / "cars_annos.mat", {"annotations": annotations, "class_names": names[None]})
    return folder


def make_cars_class_folders(
    root: str | Path,
    names: Sequence[str] = (
        "Acura RL Sedan 2012",
        "AM General Hummer SUV 2000",
        "BMW M3 Coupe 2012",
        "Bentley X",
    ),
    per_class: int = 3,
    size: int = 8,
) -> Path:
    """cars196/images/<class name>/<NNNNN>.jpg, the release re-packed by class as PRISM's lists name it,
    with a clashing file name given a ``_2``. Colours follow the names' sorted (code point) order,
    1..len(names): "AM General" before "Acura", not the case-folded order."""
    folder = Path(root) / "cars196"
    for label, name in enumerate(sorted(names), 1):
        files = [f"{label * 100 + k:05d}.jpg" for k in range(per_class - 1)] + [f"{label * 100:05d}_2.jpg"]
        for file in files:
            write_image(folder / "images" / name / file, label, size)
    return folder


def make_sop(root: str | Path, classes: int = 4, per_class: int = 3, size: int = 8) -> Path:
    """Stanford_Online_Products/ with Ebay_train.txt, Ebay_test.txt and <super class>_final/*.JPG.

    Training classes are numbered from 1, test classes from 11319, as in the release.
    """
    folder = Path(root) / "Stanford_Online_Products"
    header = "image_id class_id super_class_id path\n"
    ids = zero_shot_ids(classes, 11319)
    train = (classes + 1) // 2
    image_id = 0
    for file, split_ids in (("Ebay_train.txt", ids[:train]), ("Ebay_test.txt", ids[train:])):
        lines = [header]
        for label in split_ids:
            super_class = label % len(SOP_SUPER_CLASSES)
            for k in range(per_class):
                image_id += 1
                relpath = f"{SOP_SUPER_CLASSES[super_class]}/{111085122000 + label}_{k}.JPG"
                write_image(folder / relpath, label, size)
                lines.append(f"{image_id} {label} {super_class + 1} {relpath}\n")
        (folder / file).write_text("".join(lines))
    return folder


def make_inshop(root: str | Path, items: int = 4, per_item: int = 3, size: int = 8) -> Path:
    """InShop/ with list_eval_partition.txt and img/WOMEN/Dresses/id_*/*.jpg.

    The first half of the items train; of each other item, the first image is a query and the rest
    are in the gallery. Rows are sorted by path as in the release, so queries and gallery images
    interleave, and columns are padded with spaces as in the release.
    """
    if per_item < 2:
        raise ValueError(f"per_item={per_item}: a test item needs a query and a gallery image")
    folder = Path(root) / "InShop"
    views = ("front", "side", "back", "full", "additional")
    rows = []
    for item in range(1, items + 1):
        for k in range(per_item):
            relpath = f"img/WOMEN/Dresses/id_{item:08d}/02_{k + 1}_{views[k % len(views)]}.jpg"
            write_image(folder / relpath, item, size)
            status = "train" if item <= (items + 1) // 2 else ("query" if k == 0 else "gallery")
            rows.append(f"{relpath:<60}{f'id_{item:08d}':<21}{status}\n")
    header = f"{'image_name':<60}{'item_id':<21}evaluation_status\n"
    (folder / "list_eval_partition.txt").write_text(f"{len(rows)}\n{header}{''.join(rows)}")
    return folder


def make_flowers(root: str | Path, classes: int = 4, per_class: int = 3, size: int = 8) -> Path:
    """flowers102/ with imagelabels.mat (1 x N), setid.mat and jpg/image_00001.jpg, ..."""
    folder = Path(root) / "flowers102"
    labels = round_robin(zero_shot_ids(classes, 52), per_class)
    for i, label in enumerate(labels, 1):
        write_image(folder / f"jpg/image_{i:05d}.jpg", label, size)
    scipy.io.savemat(folder / "imagelabels.mat", {"labels": np.array([labels], dtype=np.uint8)})
    ids = np.arange(1, len(labels) + 1, dtype=np.uint16)
    scipy.io.savemat(
        folder / "setid.mat", {"trnid": ids[0::3][None], "valid": ids[1::3][None], "tstid": ids[2::3][None]}
    )
    return folder


def make_features(
    root: str | Path,
    classes: int = 4,
    per_class: int = 3,
    dim: int = 5,
    int_split: bool = False,
    test_per_class: int | None = None,
) -> Path:
    """features/features.npz: the first half of the classes train (with ``test_per_class``, that many
    items of every class test and the others train); ``split`` as strings or 0/1."""
    folder = Path(root) / "features"
    folder.mkdir(parents=True, exist_ok=True)
    labels = np.array(round_robin(list(range(classes)), per_class), dtype=np.int64)
    if test_per_class is None:
        train = labels < (classes + 1) // 2
    else:
        train = np.arange(len(labels)) < len(labels) - classes * test_per_class
    split = (~train).astype(np.int64) if int_split else np.where(train, "train", "test")
    features = np.random.default_rng(0).normal(size=(len(labels), dim))
    np.savez(folder / "features.npz", features=features, labels=labels, split=split)
    return folder


def make_mnist(root: str | Path, per_class: int = 2, fashion: bool = False) -> Path:
    """mnist/MNIST/raw/ (or fashion_mnist/FashionMNIST/raw/) with the four idx files, 28 x 28.

    Every image of digit ``d`` has the grey level ``20 * d + 10``.
    """
    folder = Path(root) / ("fashion_mnist" if fashion else "mnist")
    raw = folder / ("FashionMNIST" if fashion else "MNIST") / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    labels = np.array(round_robin(list(range(10)), per_class), dtype=np.uint8)
    images = np.broadcast_to((20 * labels + 10)[:, None, None], (len(labels), 28, 28)).astype(np.uint8)
    for part in ("train", "t10k"):
        # idx format: big-endian magic (0x0803 images, 0x0801 labels), then the sizes, then bytes.
        (raw / f"{part}-images-idx3-ubyte").write_bytes(
            np.array([0x0803, len(labels), 28, 28], dtype=">i4").tobytes() + images.tobytes()
        )
        (raw / f"{part}-labels-idx1-ubyte").write_bytes(
            np.array([0x0801, len(labels)], dtype=">i4").tobytes() + labels.tobytes()
        )
    return folder


def make_omniglot(root: str | Path, characters: Sequence[int] = (2, 3), per_character: int = 2) -> Path:
    """omniglot/omniglot-py/images_{background,evaluation}/<alphabet>/characterNN/*.png, 10 x 10.

    Alphabet ``a`` has ``characters[a]`` characters in both parts. torchvision also wants the two
    release zips with their checksums, which cannot be faked: tests stub
    ``torchvision.datasets.Omniglot._check_integrity``.
    """
    folder = Path(root) / "omniglot"
    for part in ("images_background", "images_evaluation"):
        for a, count in enumerate(characters):
            for c in range(count):
                for k in range(per_character):
                    path = folder / "omniglot-py" / part / f"Alphabet_{a}" / f"character{c + 1:02d}"
                    write_image(path / f"{a:02d}{c:02d}_{k + 1:02d}.png", a, size=10, fmt="PNG")
    return folder


def make_cars98n(
    root: str | Path, folders: Sequence[str] = ("0", "1", "10", "2"), per_class: int = 3, size: int = 8
) -> Path:
    """cars_noise/img_v3/<folder>/<hash>.jpg as PRISM's download script leaves CARS-98N, plus cars196/ for its
    test split. Folder names sort alphabetically ("10" before "2"): image colours follow that label order
    (1..len(folders)); one file is an error page saved as .jpg, one a .gif the script skips."""
    folder = Path(root) / "cars_noise"
    for label, name in enumerate(sorted(folders), 1):
        for k in range(per_class):
            write_image(folder / "img_v3" / name / f"{label:02d}{k:030d}.jpg", label, size)
    (folder / "img_v3" / sorted(folders)[0] / "dead--link.jpg").write_text("<html>404</html>")
    (folder / "img_v3" / sorted(folders)[0] / "anim.gif").write_bytes(b"GIF89a")
    make_cars(root, size=size)
    return folder
