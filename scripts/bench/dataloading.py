"""Images per second through the real transforms, per data-loader worker, with and without the decoded cache.

A folder of JPEGs of realistic size and content (about 500 x 375, photo-like texture, quality 75: CUB's
images are at most 500 pixels on the long side) is written once in CUB-200-2011's layout and read by the
project's ``CUB200`` loader. Its images then go through ``noisydml.data.transforms`` (training:
RandomResizedCrop 224 + flip; test: Resize 256 + CenterCrop 224), or through the decoded-image cache
(``noisydml.data.image_cache``: decoded and resized once, crops on uint8 tensors).

Two measurements:

- CPU milliseconds per image in this process (one torch thread): what one data-loader worker spends per
  image, hence the images per second one worker can give when it has a core to itself. CPU time hardly
  depends on other jobs on a shared machine, so this is the robust figure; the anchor is JPEG + training
  transform. The workers a GPU needs follow from it and an ASSUMED GPU throughput (``--gpu-rate``,
  default 1,200 img/s: ResNet50 training in bf16 on an H100, a documented guess, not measured here).
- Wall-clock images per second through ``torch.utils.data.DataLoader`` for 0, 1 and 2 workers, with and
  without persistent workers, pinned memory and a deeper prefetch: the first epoch (worker start-up
  included) and the following ones. These move with the machine's load; the ratios are to 0 workers
  decoding JPEGs, measured in the same run.

    python scripts/bench/dataloading.py            # 500 images, 3 epochs per loader setting
    python scripts/bench/dataloading.py --quick    # 200 images, 2 epochs, fewer loader settings
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from measure import format_seconds, machine, print_table
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from noisydml.data.cub import CUB200
from noisydml.data.image_cache import DecodedImageCache, cached_test_transform, cached_train_transform
from noisydml.data.images import ImageListDataset
from noisydml.data.transforms import test_transform, train_transform

IMAGE_SIZE, RESIZE = 224, 256
BATCH_SIZE = 60
CLASSES = 200


def photo_like(width: int, height: int, rng: np.random.Generator) -> Image.Image:
    """Smooth colour fields plus edges and fine texture: JPEG-compresses to ~40-60 KB at 500 x 375 and
    quality 75, about what CUB's photographs weigh, so decoding costs what it costs on real data."""
    coarse = rng.integers(0, 256, (height // 32 + 2, width // 32 + 2, 3), dtype=np.uint8)
    base = np.asarray(
        Image.fromarray(coarse).resize((width, height), Image.Resampling.BICUBIC), dtype=np.int16
    )
    y, x = np.mgrid[0:height, 0:width]
    stripes = (40 * np.sin(x / rng.uniform(3, 9) + y / rng.uniform(5, 15)))[..., None]
    texture = rng.normal(0, 14, (height, width, 3))
    return Image.fromarray(np.clip(base + stripes + texture, 0, 255).astype(np.uint8))


def write_cub(root: Path, count: int, seed: int = 0) -> Path:
    """``count`` JPEGs in CUB_200_2011's layout under ``root``; kept and reused if already there."""
    folder = root / "CUB_200_2011"
    if (folder / "images.txt").is_file() and len((folder / "images.txt").read_text().splitlines()) == count:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        # Spread over all 200 classes whatever the count, so both sides of the zero-shot split get images.
        label = 1 + i * CLASSES // count
        # CUB's long side is 500 or a little less; the short side varies with the aspect ratio.
        long, short = 500, int(rng.uniform(280, 400))
        width, height = (long, short) if rng.random() < 0.75 else (short, long)
        relpath = f"{label:03d}.Bird_{label}/Bird_{label}_{i:05d}.jpg"
        (folder / "images" / relpath).parent.mkdir(parents=True, exist_ok=True)
        photo_like(width, height, rng).save(folder / "images" / relpath, "JPEG", quality=75)
        rows.append((relpath, label))
    (folder / "image_class_labels.txt").write_text(
        "".join(f"{i} {lab}\n" for i, (_, lab) in enumerate(rows, 1))
    )
    (folder / "images.txt").write_text("".join(f"{i} {path}\n" for i, (path, _) in enumerate(rows, 1)))
    return folder


def all_images(folder: Path) -> list[str]:
    """Every image path of the folder, read through the project's CUB loader (both splits)."""
    splits = CUB200(folder, image_size=IMAGE_SIZE, resize=RESIZE).splits()
    return splits.train.paths + splits.test.paths


def cpu_ms_per_image(dataset: Dataset, rounds: int) -> float:
    """CPU milliseconds per item of ``dataset`` in this process, the best of ``rounds`` passes."""
    best = math.inf
    for _ in range(rounds):
        started = time.process_time()
        for index in range(len(dataset)):
            dataset[index]
        best = min(best, (time.process_time() - started) / len(dataset))
    return best * 1e3


class DecodeOnly(Dataset):
    """The JPEG decoded to RGB, nothing else: the floor of any pipeline that decodes every epoch."""

    def __init__(self, paths: list[str]):
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[int, int]:
        with Image.open(self.paths[index]) as image:
            return image.convert("RGB").size


def loader_rates(dataset: Dataset, epochs: int, **settings) -> tuple[float, float]:
    """Images per second of the first epoch (worker start-up included) and of the later ones."""
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True, **settings)
    rates = []
    for _ in range(epochs):
        started = time.perf_counter()
        count = sum(len(batch[0]) for batch in loader)
        rates.append(count / (time.perf_counter() - started))
    later = len(dataset) * (epochs - 1) / sum(len(dataset) / r for r in rates[1:]) if epochs > 1 else math.nan
    del loader  # stops persistent workers before the next setting starts its own
    return rates[0], later


def per_image_table(stages: dict[str, Dataset], rounds: int, gpu_rate: float) -> None:
    """CPU time per image of each stage, the images/s one worker gives, and the workers a GPU needs."""
    cpu_ms = {name: cpu_ms_per_image(dataset, rounds) for name, dataset in stages.items()}
    anchor = cpu_ms["JPEG + train transform"]
    rows = []
    for name, ms in cpu_ms.items():
        per_worker = 1e3 / ms
        workers = str(math.ceil(gpu_rate / per_worker)) if "transform" in name else "-"
        rows.append([name, f"{ms:.2f}", f"{per_worker:.0f}", f"{anchor / ms:.2f}x", workers])
    print_table(
        [
            "stage",
            "CPU ms/image",
            "img/s per worker",
            "speed vs JPEG + train",
            f"workers for {gpu_rate:.0f} img/s",
        ],
        rows,
        title=(
            "Per image, one core (CPU time, torch 1 thread). Workers needed = ceil(GPU rate / per-worker "
            f"rate) for an ASSUMED GPU rate of {gpu_rate:.0f} img/s (ResNet50 bf16, H100)."
        ),
    )
    train = cpu_ms["JPEG + train transform"] / cpu_ms["cache + train transform"]
    test = cpu_ms["JPEG + test transform"] / cpu_ms["cache + test transform"]
    print(f"decoded cache speed-up per image: train {train:.2f}x, test {test:.2f}x", flush=True)


def loader_settings(quick: bool) -> list[dict]:
    """0 workers, then 1 and 2 workers crossed with persistent workers, pinned memory and prefetch 2 or 4."""
    if quick:
        grid = [(1, False, False, 2), (2, False, False, 2), (2, True, False, 2)]
        settings = [dict(num_workers=0)]
    else:
        grid = itertools.product((1, 2), (False, True), (False, True), (2, 4))
        settings = [dict(num_workers=0), dict(num_workers=0, pin_memory=True)]
    for workers, persistent, pin, prefetch in grid:
        settings.append(
            dict(num_workers=workers, persistent_workers=persistent, pin_memory=pin, prefetch_factor=prefetch)
        )
    return settings


def loader_table(jpeg: Dataset, cached: Dataset, epochs: int, quick: bool) -> None:
    """Wall-clock images/s through DataLoader for every setting, JPEG and cache back to back."""
    rows = []
    anchor = None
    for setting in loader_settings(quick):
        rates = {}
        for name, dataset in (("JPEG", jpeg), ("cache", cached)):
            first, later = loader_rates(dataset, epochs, **setting)
            rates[name] = later
            anchor = anchor or later
            rows.append(
                [
                    name,
                    setting["num_workers"],
                    "yes" if setting.get("persistent_workers") else "no",
                    "yes" if setting.get("pin_memory") else "no",
                    setting.get("prefetch_factor", "-"),
                    f"{first:.0f}",
                    f"{later:.0f}",
                    f"{later / anchor:.2f}x",
                    f"{rates['cache'] / rates['JPEG']:.2f}x" if name == "cache" else "",
                ]
            )
            print(f"  {name} {setting}: {first:.0f} / {later:.0f} img/s", flush=True)
    print_table(
        [
            "source",
            "workers",
            "persistent",
            "pin_memory",
            "prefetch",
            "img/s epoch 1",
            "img/s later",
            "vs JPEG 0 workers",
            "cache / JPEG, same setting",
        ],
        rows,
        title=(
            f"DataLoader, training transform, {len(jpeg)} images x {epochs} epochs, wall clock: it moves "
            "with the machine's load, so compare rows measured back to back (the last column). pin_memory "
            "needs a GPU to do anything; here it is a no-op."
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="200 images, 2 epochs, fewer loader settings")
    parser.add_argument("--images", type=int, default=None, help="JPEGs to generate (default 500; quick 200)")
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="where the JPEGs go (default: a temp dir)"
    )
    parser.add_argument(
        "--gpu-rate",
        type=float,
        default=1200.0,
        help="ASSUMED images/s a GPU trains ResNet50 at (default 1,200: bf16 on an H100); not measured here",
    )
    args = parser.parse_args()
    count = args.images or (200 if args.quick else 500)
    epochs = 2 if args.quick else 3
    rounds = 1 if args.quick else 2
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message=".*pin_memory.*")

    print(f"# dataloading.py{' --quick' if args.quick else ''}")
    print(machine())
    scratch = Path(tempfile.mkdtemp(prefix="noisydml-bench-")) if args.data_dir is None else None
    root = args.data_dir or scratch
    try:
        started = time.perf_counter()
        folder = write_cub(root, count)
        paths = all_images(folder)
        sizes = [os.path.getsize(p) for p in paths]
        print(
            f"{len(paths)} JPEGs in CUB's layout under {folder} ({time.perf_counter() - started:.0f} s to "
            f"write or find), {np.mean(sizes) / 1024:.0f} KB each on average; batches of {BATCH_SIZE}, torch "
            "threads 1"
        )
        labels = np.zeros(len(paths), dtype=np.int64)
        jpeg_train = ImageListDataset(paths, labels, train_transform(IMAGE_SIZE))
        jpeg_test = ImageListDataset(paths, labels, test_transform(IMAGE_SIZE, RESIZE))
        cache = DecodedImageCache(
            "bench",
            folder,
            "all",
            RESIZE,
            cached_train_transform(IMAGE_SIZE),
            eval_transform=cached_test_transform(IMAGE_SIZE),
            cache_dir=root / "cache",
        )
        shutil.rmtree(root / "cache", ignore_errors=True)
        started, cpu = time.perf_counter(), time.process_time()
        cached_train = ImageListDataset(paths, labels, train_transform(IMAGE_SIZE), cache=cache)
        cached_train.verify()
        build_wall, build_cpu = time.perf_counter() - started, time.process_time() - cpu
        cached_test = cached_train.eval_view()
        cache_bytes = (cache.directory / "pixels.npy").stat().st_size
        print(
            f"decoded cache built in {format_seconds(build_wall)} wall, {format_seconds(build_cpu)} CPU "
            f"({cache.threads} threads), {cache_bytes / 2**20:.0f} MiB "
            f"({cache_bytes / len(paths) / 1024:.0f} KB per image, "
            f"{cache_bytes / sum(sizes):.1f}x the JPEGs)",
            flush=True,
        )

        torch.manual_seed(0)
        stages = {
            "JPEG decode only": DecodeOnly(paths),
            "JPEG + train transform": jpeg_train,
            "JPEG + test transform": jpeg_test,
            "cache + train transform": cached_train,
            "cache + test transform": cached_test,
        }
        per_image_table(stages, rounds, args.gpu_rate)
        loader_table(jpeg_train, cached_train, epochs, args.quick)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
