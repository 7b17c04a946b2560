"""The image transforms of the usual deep metric learning protocol (ImageNet-pretrained backbones).

``dataset.augmentation`` names how a training image becomes a crop (:data:`AUGMENTATIONS`):
``random_resized_crop``, the torchvision recipe most DML code uses (a random area of 8-100% and aspect
3/4-4/3, resized to ``image_size``, then a horizontal flip), or ``square_resize_crop``, the Caffe-era
recipe (Yu et al. 2018, Sec. 4.1: "resized to 256x256 and randomly cropped to 224x224"): both sides
resized to ``resize``, a random ``image_size`` square cut from it, no flip. Evaluation takes the centre
``image_size`` square of the same resize: the short side to ``resize`` for the first, both sides for the
second.
"""

from __future__ import annotations

from collections.abc import Sequence

from torchvision import transforms

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

AUGMENTATIONS = ("random_resized_crop", "square_resize_crop")


def check_augmentation(augmentation: str) -> None:
    if augmentation not in AUGMENTATIONS:
        raise ValueError(f"dataset.augmentation={augmentation!r} is not one of {', '.join(AUGMENTATIONS)}")


def resize_to(resize: int, augmentation: str) -> int | tuple[int, int]:
    """The size ``transforms.Resize`` takes: the short side, or both sides for ``square_resize_crop``."""
    check_augmentation(augmentation)
    return (resize, resize) if augmentation == "square_resize_crop" else resize


def train_transform(
    image_size: int = 224,
    resize: int = 256,
    augmentation: str = "random_resized_crop",
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> transforms.Compose:
    """The training crop ``augmentation`` names, then the tensor normalised for the backbone."""
    check_augmentation(augmentation)
    if augmentation == "square_resize_crop":
        crop = [transforms.Resize((resize, resize)), transforms.RandomCrop(image_size)]
    else:
        crop = [transforms.RandomResizedCrop(image_size), transforms.RandomHorizontalFlip()]
    return transforms.Compose([*crop, transforms.ToTensor(), transforms.Normalize(mean, std)])


def test_transform(
    image_size: int = 224,
    resize: int = 256,
    augmentation: str = "random_resized_crop",
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> transforms.Compose:
    """Resize as ``augmentation`` does (the short side, or both sides, to ``resize``), then take the
    centre ``image_size`` square."""
    return transforms.Compose(
        [
            transforms.Resize(resize_to(resize, augmentation)),
            transforms.CenterCrop(image_size),
            transforms.ToTensor(),
            transforms.Normalize(mean, std),
        ]
    )
