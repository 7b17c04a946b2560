"""Training throughput of the ResNet50 embedding network with each speed option, in images per second.

The options are the runner's own: ``trainer.precision=bf16-mixed`` (bf16 autocast),
``module.channels_last=true`` (NHWC memory layout), ``trainer.benchmark=true`` (cuDNN autotuning) and
``module.compile=true`` (``torch.compile`` of the backbone, in place). Each setting times the same
training step as the runner: the project's ResNet50 backbone (conf/backbone/resnet50.yaml, random
weights: only the speed matters), random semi-hard mining and the triplet loss on the P x K batch,
backward, an SGD step. Settings are timed in interleaved rounds, the best round kept, and reported as a
ratio to plain fp32.

    python scripts/bench/throughput.py            # batch 120 = 20 x 6 at 224 x 224 (the GPU benchmark)
    python scripts/bench/throughput.py --quick    # batch 12 at 64 x 64, fp32 and channels_last only

On a CPU the GPU options mean little (no tensor cores, no cuDNN); the script runs there so it cannot rot.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from measure import machine, print_table

from noisydml import CONFIG_DIR

SETTINGS = {
    "fp32": {},
    "bf16 autocast": {"bf16": True},
    "channels_last": {"channels_last": True},
    "bf16 + channels_last": {"bf16": True, "channels_last": True},
    "bf16 + channels_last + cudnn benchmark": {"bf16": True, "channels_last": True, "benchmark": True},
    "bf16 + channels_last + compile": {"bf16": True, "channels_last": True, "compile": True},
}


def build(device: torch.device, channels_last: bool = False, compile: bool = False, **_):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["backbone=resnet50", "backbone.trunk.pretrained=false"])
    backbone = instantiate(cfg.backbone).to(device)
    if channels_last:
        backbone.to(memory_format=torch.channels_last)
    if compile:
        backbone.compile()
    return backbone, instantiate(cfg.miner), instantiate(cfg.loss)


def step_function(device: torch.device, batch: int, size: int, setting: dict):
    torch.backends.cudnn.benchmark = bool(setting.get("benchmark"))
    backbone, miner, loss = build(device, **setting)
    optimizer = torch.optim.SGD(backbone.parameters(), lr=1e-5, momentum=0.9)
    x = torch.randn(batch, 3, size, size, device=device)
    if setting.get("channels_last"):
        x = x.contiguous(memory_format=torch.channels_last)
    labels = torch.arange(batch, device=device) // 6
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16) if setting.get("bf16") else contextlib.nullcontext()
    )

    def step() -> None:
        with autocast:
            embeddings = backbone(x)
        embeddings = embeddings.float()
        value = loss(embeddings, labels, miner(embeddings, labels))
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="batch 12 at 64 x 64, 1 round of 1 step")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None, help="steps per round")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    batch, size = (12, 64) if args.quick else (120, 224)
    rounds = args.rounds or (1 if args.quick else 3)
    steps = args.steps or (1 if args.quick else 20)
    names = [n for n in SETTINGS if device.type == "cuda" or "benchmark" not in n]
    if args.quick:
        # Inductor compiles a ResNet50 for minutes on a CPU, and bf16 without AMX is emulated there.
        names = [n for n in names if "compile" not in n and "bf16" not in n]
    print(machine())
    print(f"device {device}; batch {batch} at {size} x {size}; best of {rounds} rounds of {steps} steps")
    functions = {}
    for name in names:
        functions[name] = step_function(device, batch, size, SETTINGS[name])
        for _ in range(2):  # warm-up: cuDNN autotuning, compilation, allocator
            functions[name]()
    best = {name: float("inf") for name in names}
    for _ in range(rounds):
        for name, function in functions.items():
            started = time.perf_counter()
            for _ in range(steps):
                function()
            best[name] = min(best[name], (time.perf_counter() - started) / steps)
    anchor = best["fp32"]
    rows = [[name, f"{batch / best[name]:.1f}", f"{anchor / best[name]:.2f}x"] for name in names]
    print_table(["setting", "images/s", "speed vs fp32"], rows, title="ResNet50 training step")


if __name__ == "__main__":
    main()
