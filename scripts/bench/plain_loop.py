"""A yardstick for the runner: its training step written again as a plain PyTorch loop, timed beside it.

Both sides are built from one composed config, so they share everything but the loop: the data set and its
transforms (a generated CUB-200-2011 folder of real JPEGs of CUB's size, decoded every time unless
``--cache-decoded``), the P x K sampler and ``DataLoader`` (workers, pinned memory), the backbone with its
embedding head, the miner, the loss, the optimizer, the precision (``torch.autocast`` over backbone, miner and
loss, with a gradient scaler for fp16, as Lightning's plugin does) and ``channels_last`` / ``torch.compile``.
The plain loop has no Lightning, no logging, no checkpointing and no per-step reseeding; ``noisydml`` runs
its real entry point (``noisydml.run.train.train``) with a timing callback. The difference is the
runner's cost.

Each contender trains ``--warmup`` steps (worker start-up, cuDNN autotuning, compilation), then ``--steps``
timed steps; the GPU is synchronised at both ends of the timed window. Contenders alternate over
``--rounds`` (plain, noisydml, plain, ...) and the best round of each is kept.

    python scripts/bench/plain_loop.py --quick                  # CPU-sized: ResNet50 at 64 x 64, batch 12
    python scripts/bench/plain_loop.py --digits --steps 300     # the runner's own cost per step, in ms
    python scripts/bench/plain_loop.py                          # ResNet50 at 224, batch 120 = 20 x 6, fp32
    python scripts/bench/plain_loop.py --batch 60 120 256 --precision 32-true bf16-mixed \\
        --channels-last both --compile both --workers 4 8 16 --cache-decoded both   # the GPU grid
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import tempfile
import time
from pathlib import Path

import pytorch_lightning as pl
import torch
from dataloading import write_cub
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from measure import machine, print_table
from omegaconf import DictConfig, open_dict

from noisydml import CONFIG_DIR
from noisydml.run.train import train

# P x K of each batch size: the papers' 6 images per class, 4 at 256 (64 classes of CUB's 100).
BATCHES = {12: (4, 3), 60: (10, 6), 120: (20, 6), 256: (64, 4)}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StepTimer(pl.Callback):
    """Wall seconds of optimizer steps ``warmup + 1 .. warmup + steps`` of a ``noisydml`` run."""

    last: StepTimer | None = None

    def __init__(self, warmup: int, steps: int) -> None:
        self.warmup, self.steps = warmup, steps
        self.seconds = float("nan")
        self._started = 0.0
        StepTimer.last = self

    def on_train_batch_start(self, trainer: pl.Trainer, module: pl.LightningModule, *args) -> None:
        if trainer.global_step == self.warmup:
            _sync(module.device)
            self._started = time.perf_counter()

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, *args) -> None:
        if trainer.global_step == self.warmup + self.steps:
            _sync(module.device)
            self.seconds = time.perf_counter() - self._started


def compose_config(overrides: list[str], output_dir: Path) -> DictConfig:
    """``conf/config.yaml`` with ``overrides``, as the ``noisydml`` command composes it."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        cfg.paths.output_dir = str(output_dir)
        del cfg["hydra"]
    return cfg


def plain_loop(
    cfg: DictConfig,
    device: torch.device,
    warmup: int,
    steps: int,
    window: contextlib.AbstractContextManager | None = None,
) -> float:
    """Seconds of ``steps`` training steps after ``warmup``, in a loop with nothing but the step;
    ``window`` (``syncs.py``'s recording) is entered over the timed steps."""
    window = window or contextlib.nullcontext()
    torch.manual_seed(cfg.seed)
    datamodule = instantiate(cfg.data, _partial_=True)(
        dataset=instantiate(cfg.dataset), noise=instantiate(cfg.noise)
    )
    datamodule.setup("fit")
    backbone = instantiate(cfg.backbone).to(device)
    if cfg.module.channels_last:
        backbone.to(memory_format=torch.channels_last)
    if cfg.module.compile:
        backbone.compile()
    miner, loss = instantiate(cfg.miner), instantiate(cfg.loss).to(device)
    optimizer = instantiate(cfg.optimizer)([p for p in backbone.parameters() if p.requires_grad])
    precision = str(cfg.trainer.precision)
    dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    backbone.train()
    started = float("nan")
    for step, (x, labels, _) in enumerate(datamodule.train_dataloader()):
        if step == warmup:
            _sync(device)
            started = time.perf_counter()
            window.__enter__()
        x, labels = x.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        if cfg.module.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        autocast = torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext()
        with autocast:
            embeddings = backbone(x)
            value = loss(embeddings, labels, miner(embeddings, labels) if miner is not None else None)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(value).backward()
        scaler.step(optimizer)
        scaler.update()
        if step + 1 == warmup + steps:
            _sync(device)
            seconds = time.perf_counter() - started
            window.__exit__(None, None, None)
            return seconds
    raise RuntimeError(f"the data loader ended before {warmup + steps} steps")


def runner(cfg: DictConfig) -> float:
    """Seconds of the same steps inside ``noisydml``'s own ``train`` (which then also tests the model);
    the config's ``StepTimer`` callback knows which steps."""
    train(cfg)
    return StepTimer.last.seconds


def overrides_for(
    setting: dict, data_dir: Path | None, cache_dir: Path, warmup: int, steps: int
) -> list[str]:
    """The config of one setting: ResNet50 on the generated CUB folder ``data_dir``, or with no folder
    the default experiment's MLP on the 8x8 digits."""
    P, K = BATCHES[setting["batch"]]
    images = [
        "dataset=cub",
        f"paths.data_dir={data_dir}",
        f"dataset.image_size={setting['size']}",
        f"dataset.resize={setting['size'] * 8 // 7}",
        f"dataset.cache_decoded={str(setting['cache_decoded']).lower()}",
        f"dataset.cache_dir={cache_dir}",
        "backbone=resnet50",
        "backbone.trunk.pretrained=false",
    ]
    return [
        *(images if data_dir is not None else []),
        "noise=none",
        f"data.P={P}",
        f"data.K={K}",
        f"data.batches_per_epoch={warmup + steps}",
        f"data.num_workers={setting['workers']}",
        f"data.pin_memory={str(torch.cuda.is_available()).lower()}",
        f"trainer.precision={setting['precision']}",
        f"module.channels_last={str(setting['channels_last']).lower()}",
        f"module.compile={str(setting['compile']).lower()}",
        "trainer.max_epochs=1",
        f"trainer.max_steps={warmup + steps}",
        f"trainer.enable_progress_bar={str(setting['progress_bar']).lower()}",
        "+trainer.enable_model_summary=false",
        "logger=csv",
        "+callbacks.bench_timer._target_=__main__.StepTimer",
        f"+callbacks.bench_timer.warmup={warmup}",
        f"+callbacks.bench_timer.steps={steps}",
    ]


def both(value: str) -> list[bool]:
    return {"on": [True], "off": [False], "both": [False, True]}[value]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="batch 12 at 64 x 64, 2 + 3 steps, 1 round")
    parser.add_argument(
        "--digits",
        action="store_true",
        help="the default experiment's MLP on the 8x8 digits (batch 12 or 60) instead of ResNet50 on JPEGs: "
        "a step of a few milliseconds, where the runner's own cost per step shows",
    )
    parser.add_argument("--batch", type=int, nargs="+", choices=sorted(BATCHES), default=None)
    parser.add_argument("--size", type=int, default=None, help="input side (default 224; 64 with --quick)")
    parser.add_argument("--precision", nargs="+", default=["32-true"])
    parser.add_argument("--channels-last", choices=["on", "off", "both"], default="off")
    parser.add_argument("--compile", choices=["on", "off", "both"], default="off")
    parser.add_argument("--cache-decoded", choices=["on", "off", "both"], default="off")
    parser.add_argument(
        "--progress-bar",
        choices=["on", "off", "both"],
        default="off",
        help="noisydml's progress bar, as on a terminal (off: a line per epoch, as in a batch job)",
    )
    parser.add_argument("--workers", type=int, nargs="+", default=None, help="data-loader workers")
    parser.add_argument(
        "--images", type=int, default=None, help="generated JPEGs over 200 classes, half for training"
    )
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--data", type=Path, default=None, help="where the JPEGs are written (kept)")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    batches = args.batch or ([12] if args.quick else [60] if args.digits else [120])
    if args.digits and not set(batches) <= {12, 60}:
        parser.error(f"--digits has 10 classes: --batch 12 (4 x 3) or 60 (10 x 6), not {batches}")
    size = args.size or (64 if args.quick else 224)
    warmup = args.warmup or (2 if args.quick else 10)
    steps = args.steps or (3 if args.quick else 30)
    rounds = args.rounds or (1 if args.quick else 2)
    workers = args.workers or ([2] if args.quick else [0] if args.digits else [8])
    images = args.images or (600 if args.quick else 3000)
    settings = [
        dict(
            batch=b,
            size=size,
            precision=p,
            channels_last=cl,
            compile=c,
            workers=w,
            cache_decoded=cd,
            progress_bar=bar,
        )
        for b, p, cl, c, w, cd, bar in itertools.product(
            batches,
            args.precision,
            both(args.channels_last),
            both(args.compile),
            workers,
            both(args.cache_decoded),
            both(args.progress_bar),
        )
    ]
    print(machine())
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    model = f"ResNet50 at {size} x {size}; {images} generated JPEGs"
    model = "MLP on the 8x8 digits" if args.digits else model
    print(f"device {name}; {model}; {warmup} warm-up + {steps} timed steps, best of {rounds} rounds")
    with tempfile.TemporaryDirectory(prefix="noisydml-plain-loop-") as scratch:
        scratch = Path(scratch)
        data_dir = None if args.digits else args.data or scratch / "data"
        if data_dir is not None:
            write_cub(data_dir, images)
        rows = []
        for index, setting in enumerate(settings):
            best = {"plain": float("inf"), "noisydml": float("inf")}
            for round_ in range(rounds):
                for name in best:
                    output = scratch / f"run{index}_{round_}_{name}"
                    cfg = compose_config(
                        overrides_for(setting, data_dir, scratch / "cache", warmup, steps), output
                    )
                    seconds = plain_loop(cfg, device, warmup, steps) if name == "plain" else runner(cfg)
                    best[name] = min(best[name], seconds)
            batch = setting["batch"]
            plain, ours = batch * steps / best["plain"], batch * steps / best["noisydml"]
            rows.append(
                [
                    batch,
                    setting["precision"],
                    "yes" if setting["channels_last"] else "-",
                    "yes" if setting["compile"] else "-",
                    setting["workers"],
                    "yes" if setting["cache_decoded"] else "-",
                    "yes" if setting["progress_bar"] else "-",
                    f"{plain:.1f}",
                    f"{ours:.1f}",
                    f"{ours / plain:.3f}x",
                    f"{(best['noisydml'] - best['plain']) / steps * 1e3:+.2f}",
                ]
            )
            print(f"[{index + 1}/{len(settings)}] {rows[-1]}", flush=True)
    print_table(
        [
            "batch",
            "precision",
            "channels_last",
            "compile",
            "workers",
            "cache",
            "bar",
            "plain img/s",
            "noisydml img/s",
            "noisydml / plain",
            "noisydml ms/step more",
        ],
        rows,
        title="Training throughput: noisydml against a plain PyTorch loop",
    )


if __name__ == "__main__":
    main()
