"""Where a training step makes the host wait for the GPU: each synchronising call, per step, by source line.

A synchronising call (``.item()``, ``if tensor:``, a copy to the host or from pageable host memory, an op
whose output size depends on the data, such as ``nonzero``) drains the GPU's queue: the GPU then idles
while the host prepares what comes next, which a step that never waits hides behind the GPU's work. This
script counts them over ``--steps`` training steps of ``noisydml`` and of the plain loop of
``plain_loop.py``, built from one composed config, and prints where each comes from, so the runner's own
are named beside those that any loop with the same miner and loss makes.

On a GPU, ``torch.cuda.set_sync_debug_mode("warn")`` reports every call that synchronises. Without one,
the script lists the calls that would synchronise on a GPU (the same ops on CPU tensors: a stand-in that
keeps the script working without one, not a measurement; it also lists reads of tensors that stay on the
CPU beside a GPU, such as the optimizer's step counts).

    python scripts/bench/syncs.py                       # the default experiment (digits, MLP, triplet)
    python scripts/bench/syncs.py trainer.enable_progress_bar=true     # any overrides: a bar on a terminal
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import tempfile
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytorch_lightning as pl
import torch
from measure import machine, print_table
from plain_loop import compose_config, plain_loop
from torch.overrides import TorchFunctionMode

from noisydml.run.train import train

# Frames that say whose call it is: the first of these from the innermost frame outwards.
OWNERS = ("noisydml/", "pytorch_metric_learning/", "pytorch_lightning/", "lightning_fabric/", "torch/optim/")
# Without a GPU: ops that synchronise when their tensor is on one.
READS = {"item", "__bool__", "__int__", "__float__", "__index__", "tolist", "numpy", "cpu"}
DATA_SIZED = {"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "repeat_interleave"}


def _owner(stack: traceback.StackSummary) -> str:
    for frame in reversed(stack):
        path = frame.filename.replace("\\", "/")
        for owner in OWNERS:
            if owner in path:
                return f"{owner}{path.split(owner, 1)[1]}:{frame.lineno} {frame.name}"
        if path.endswith("plain_loop.py"):
            return f"plain_loop.py:{frame.lineno} {frame.name}"
    return "?"


class _WouldSync(TorchFunctionMode):
    """Counts, by owner, the calls that would synchronise if their tensors were on a GPU."""

    def __init__(self, counts: collections.Counter) -> None:
        super().__init__()
        self.counts = counts

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        boolean_index = name == "__getitem__" and any(
            torch.is_tensor(index) and index.dtype == torch.bool
            for index in (args[1] if isinstance(args[1], tuple) else (args[1],))
        )
        if name in READS or name in DATA_SIZED or boolean_index:
            self.counts[f"{name}: {_owner(traceback.extract_stack()[:-1])}"] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def recording(counts: collections.Counter) -> Iterator[None]:
    """Every synchronising call inside ``with`` added to ``counts`` under ``"op: owner"``."""
    if not torch.cuda.is_available():
        with _WouldSync(counts):
            yield
        return

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        counts[f"sync: {_owner(traceback.extract_stack()[:-1])}"] += 1

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode("default")


class SyncWindow(pl.Callback):
    """Records ``noisydml``'s steps ``warmup + 1 .. warmup + steps``, the window ``plain_loop.StepTimer``
    times."""

    counts: collections.Counter = collections.Counter()

    def __init__(self, warmup: int, steps: int) -> None:
        self.warmup, self.steps = warmup, steps
        self._window = contextlib.ExitStack()

    def on_train_batch_start(self, trainer: pl.Trainer, *args) -> None:
        if trainer.global_step == self.warmup:
            self._window.enter_context(recording(SyncWindow.counts))

    def on_train_batch_end(self, trainer: pl.Trainer, *args) -> None:
        if trainer.global_step == self.warmup + self.steps:
            self._window.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the default experiment")
    parser.add_argument("--quick", action="store_true", help="2 warm-up + 5 recorded steps")
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    args = parser.parse_args()
    args.warmup = args.warmup or (2 if args.quick else 3)
    args.steps = args.steps or (5 if args.quick else 10)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    total = args.warmup + args.steps
    overrides = [
        f"data.batches_per_epoch={total}",
        "trainer.max_epochs=1",
        f"trainer.max_steps={total}",
        "trainer.enable_progress_bar=false",
        "+trainer.enable_model_summary=false",
        "logger=csv",
        "+callbacks.sync_window._target_=__main__.SyncWindow",
        f"+callbacks.sync_window.warmup={args.warmup}",
        f"+callbacks.sync_window.steps={args.steps}",
        *args.overrides,
    ]
    print(machine())
    kind = "synchronising calls" if device.type == "cuda" else "calls that would synchronise on a GPU"
    print(f"device {torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}: {kind}")
    plain: collections.Counter = collections.Counter()
    with tempfile.TemporaryDirectory(prefix="noisydml-syncs-") as scratch:
        train(compose_config(overrides, Path(scratch) / "noisydml"))
        plain_loop(
            compose_config(overrides, Path(scratch) / "plain"),
            device,
            args.warmup,
            args.steps,
            window=recording(plain),
        )
    rows = [
        [where, f"{SyncWindow.counts[where] / args.steps:g}", f"{plain[where] / args.steps:g}"]
        for where in sorted(SyncWindow.counts.keys() | plain.keys())
    ]
    rows.append(
        ["**all**", f"{sum(SyncWindow.counts.values()) / args.steps:g}", f"{plain.total() / args.steps:g}"]
    )
    print_table(
        ["call: where", "noisydml per step", "plain loop per step"],
        rows,
        title=f"{kind[0].upper()}{kind[1:]}, per training step ({args.steps} steps after {args.warmup})",
    )


if __name__ == "__main__":
    main()
