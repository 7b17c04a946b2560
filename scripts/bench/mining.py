"""Cost of mining and of each loss per training step, beside pytorch-metric-learning and a ResNet50 step.

Every option in ``conf/miner/*.yaml`` and ``conf/loss/*.yaml`` present when the script runs is composed
through Hydra (so interpolations and ``defaults`` lists resolve as in a run) and built with
``hydra.utils.instantiate``, then timed on P x K batches of 512-d embeddings that have class structure
(class centres plus noise, so some pairs are easy and some hard, as in training):

- miners: one ``miner(embeddings, labels)`` call, next to PML's closest miner;
- losses: forward + backward given the tuples of the miner the loss's YAML pairs it with (the first
  ``miner=<name>`` its comments mention; else the default experiment's miner), next to PML's closest loss
  on the same tuples; a loss that is PML's own class is marked "PML" (nothing to compare);
- the step (miner + loss forward/backward) as a fraction of a ResNet50 forward + backward at 224 x 224 of
  the same batch size. On this CPU ResNet50 is measured on a small batch and scaled linearly; a GPU changes
  both sides, so the GPU target (mining + loss < 5% of the step) can only be checked on a GPU.

Losses that need a training set before their first call (proxies, per-class betas, sample weights) get a
synthetic one through their ``setup`` hook; an option that cannot be built or called standalone is skipped
and listed with the reason.

    python scripts/bench/mining.py            # batch sizes 60, 120, 160, 256, 1024
    python scripts/bench/mining.py --quick    # batch sizes 60 and 256, fewer rounds
"""

from __future__ import annotations

import argparse
import ast
import inspect
import math
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torchvision
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from measure import format_seconds, machine, per_call, print_table
from omegaconf import DictConfig, OmegaConf
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners
from pytorch_metric_learning import reducers as pml_reducers
from pytorch_metric_learning.distances import SNRDistance

# noisydml.utils.resolvers registers the config's resolvers (conf/loss/bspml.yaml's noisydml.times).
from noisydml import CONFIG_DIR
from noisydml.core.hooks import TrainingHooks, TrainingSet
from noisydml.utils import resolvers  # noqa: F401

DIM = 512
# P x K of each batch size: the project's default 10 x 6 for 60, K = 6 or 4 above (1024: 256 x 4).
BATCHES = {60: (10, 6), 120: (20, 6), 160: (40, 4), 256: (64, 4), 1024: (256, 4)}
QUICK_BATCHES = (60, 256)
# Classes of the synthetic training set the hooks are set up with: SOP's 11,318, the largest protocol
# (proxy-based losses cost in proportion to it).
TRAIN_CLASSES = 11_318
# Norm of the noise around each class centre (a unit vector): at 2, every positive pair has a negative
# inside the 0.2 margin and FaceNet's semi-hard band holds about 10% of a batch's triplets, as mid-training.
NOISE = 2.0
# Largest N x N x DIM float32 tensor a loss may build here (this machine is shared).
MAX_PAIRWISE = 2**30

IndicesTuple = tuple[torch.Tensor, ...] | None


@dataclass
class Option:
    """One YAML of a config group, built."""

    name: str
    target: str
    module: Any = None
    pml: dict[str, Any] = field(default_factory=dict)
    note: str = ""


def compose_option(group: str, name: str, P: int, K: int) -> DictConfig:
    overrides = [f"{group}={name}", f"data.P={P}", f"data.K={K}", f"backbone.embedding_size={DIM}"]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose("config", overrides=overrides)


def options(group: str) -> list[str]:
    return sorted(path.stem for path in (CONFIG_DIR / group).glob("*.yaml"))


def paired_miner(loss_name: str, default: str) -> str:
    """The miner a loss's YAML pairs it with: the first ``miner=<name>`` in its text, else ``default``."""
    text = (CONFIG_DIR / "loss" / f"{loss_name}.yaml").read_text()
    found = re.search(r"miner=(\w+)", text)
    return found.group(1) if found else default


def synthetic_training_set(labels: torch.Tensor) -> TrainingSet:
    """The batch as the whole training set, plus hidden-label items for the semi-supervised losses (their
    ``regularizer``, a backbone forward of unlabeled images each step, is not part of the loss call)."""
    n = len(labels)
    return TrainingSet(
        num_indices=n,
        indices=np.arange(n),
        labels=labels.numpy(),
        flipped=np.zeros(n, dtype=bool),
        num_classes=TRAIN_CLASSES,
        batches_per_epoch=100,
        unlabeled=[(torch.zeros(1), -1, n + i) for i in range(n)],
    )


def pml_miner_equivalents(miner: Any) -> dict[str, Any]:
    """PML's closest miners to one of ours, sharing its distance; {} for PML's own classes."""
    name = type(miner).__name__
    if type(miner).__module__.startswith("pytorch_metric_learning"):
        return {}
    distance = miner.distance
    if name in ("RandomSemihardMiner", "FixedSemihardMiner"):
        margin = getattr(miner, "margin", 0.2)
        return {
            "PML TripletMarginMiner(semihard)": pml_miners.TripletMarginMiner(
                margin=margin, type_of_triplets="semihard", distance=distance
            ),
            "PML BatchHardMiner": pml_miners.BatchHardMiner(distance=distance),
        }
    if name == "AllTripletsMiner":
        return {
            "PML TripletMarginMiner(all, margin inf)": pml_miners.TripletMarginMiner(
                margin=math.inf, type_of_triplets="all", distance=distance
            )
        }
    if name == "EasyPositiveMiner":
        pml_rules = {"semihard": "semihard", "random": "all", "multi_similarity": "all"}
        negatives = pml_rules.get(miner.negatives.name)
        if negatives is None:
            return {}
        return {
            f"PML BatchEasyHardMiner(easy, {negatives})": pml_miners.BatchEasyHardMiner(
                pos_strategy="easy", neg_strategy=negatives, distance=distance
            )
        }
    return {}


def extra_work(loss: Any) -> str:
    """What a loss computes beyond its PML counterpart (so the ratio is that work's overhead), or ""."""
    name = type(loss).__name__
    if name == "TrimmedLoss":
        return "ratio = trimming's overhead: a no-grad scoring pass, then the wrapped loss on the kept tuples"
    if name == "AdaptedTripletLoss" and loss.match_weight > 0:
        return "ratio = the matching term's overhead (Eq. 12) over the same triplet loss"
    if name == "BSPMLLoss":
        return "ratio = Eq. 7's per-sample weights over PML's MS loss on the same pairs"
    if name == "RescaledHingeTripletLoss":
        return "ratio = the rescaled hinge (one expm1 per triplet) over the same triplet loss"
    if name == "BayesianTripletLoss":
        return "likelihood scale over the same triplet loss; the KL (regularizer) is a separate call"
    return ""


def pml_loss_equivalent(loss: Any) -> Any | None:
    """PML's closest loss to one of ours, sharing its distance and parameters; None when there is none."""
    name = type(loss).__name__
    if name == "TrimmedLoss":
        # Trimming is a second pass over the wrapped loss; compare with that loss alone.
        return pml_loss_equivalent(loss.loss) if not _is_pml(loss.loss) else loss.loss
    if _is_pml(loss):
        return None
    # Losses with a fixed similarity of their own (PRISM's MCL, PRISM) have no distance module.
    distance = getattr(loss, "distance", None)
    if name in ("AdaptedTripletLoss", "RescaledHingeTripletLoss", "BayesianTripletLoss"):
        reducer = loss.reducer
        if isinstance(reducer, pml_reducers.MultipleReducers):
            # A loss with sub-losses (the adapted triplet's match term) wraps its reducer per sub-loss.
            reducer = reducer.reducers["loss"]
        return pml_losses.TripletMarginLoss(margin=loss.margin, distance=distance, reducer=type(reducer)())
    if name == "MarginalLoss":
        return pml_losses.MarginLoss(
            margin=loss.alpha, beta=loss.beta, distance=distance, reducer=pml_reducers.MeanReducer()
        )
    if name == "ClassBetaMarginLoss":
        return pml_losses.MarginLoss(
            margin=loss.margin,
            nu=loss.nu,
            beta=loss.initial_beta,
            learn_beta=loss.learn_beta,
            num_classes=TRAIN_CLASSES if loss.per_class_beta else None,
            distance=distance,
        )
    if name == "ProxyAnchorLoss":
        return pml_losses.ProxyAnchorLoss(
            num_classes=TRAIN_CLASSES, embedding_size=DIM, margin=loss.margin, alpha=loss.alpha
        )
    if name == "ProxyNCALoss":
        return pml_losses.ProxyNCALoss(
            num_classes=TRAIN_CLASSES,
            embedding_size=DIM,
            softmax_scale=loss.softmax_scale,
            distance=distance,
            reducer=type(loss.reducer)(),
        )
    if name == "BSPMLLoss":
        return pml_losses.MultiSimilarityLoss(
            alpha=loss.alpha, beta=loss.beta, base=loss.base, distance=distance
        )
    return None


def _is_pml(module: Any) -> bool:
    return type(module).__module__.startswith("pytorch_metric_learning")


def batch(P: int, K: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """P x K embeddings: class centres on the unit sphere plus noise of norm ``NOISE``, so positives are
    closer on average than negatives but overlap them (semi-hard and hard tuples both occur)."""
    generator = torch.Generator().manual_seed(seed)
    classes = torch.randperm(TRAIN_CLASSES, generator=generator)[:P]
    labels = classes.repeat_interleave(K)
    centres = torch.nn.functional.normalize(torch.randn(P, DIM, generator=generator), dim=1)
    noise = NOISE * torch.randn(P * K, DIM, generator=generator) / DIM**0.5
    embeddings = centres.repeat_interleave(K, dim=0) + noise
    return embeddings, labels


def percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.2g}%"


def tuple_count(indices: IndicesTuple) -> str:
    if indices is None:
        return "all"
    if len(indices) == 3:
        return f"{len(indices[0])} trip."
    return f"{len(indices[0])}+{len(indices[2])} pairs"


def mine(miner: Any, embeddings: torch.Tensor, labels: torch.Tensor) -> Callable[[], IndicesTuple]:
    return lambda: miner(embeddings, labels)


def fwd_bwd(loss: Any, base: torch.Tensor, labels: torch.Tensor, indices: IndicesTuple) -> Callable[[], None]:
    hooks = loss if isinstance(loss, TrainingHooks) else None
    batch_indices = torch.arange(len(labels))

    def step() -> None:
        embeddings = base.clone().requires_grad_()
        if hooks is not None:
            hooks.begin_batch(batch_indices)
        loss(embeddings, labels, indices).backward()

    return step


def resnet50_seconds_per_image(batch_size: int, rounds: int, clock: Callable[[], float]) -> float:
    """ResNet50 forward + backward at 224 x 224, train mode, per image, measured on ``batch_size`` images."""
    model = torchvision.models.resnet50(weights=None).train()
    images = torch.randn(batch_size, 3, 224, 224)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(images).sum().backward()

    step()
    best = math.inf
    for _ in range(rounds):
        started = clock()
        step()
        best = min(best, clock() - started)
    return best / batch_size


def python_loops(classes: set[type]) -> list[list[str]]:
    """Every Python loop (``for``, ``while``, comprehension) in the project modules defining ``classes``
    and their project base classes: what a vectorisation review reads first. Rows: module, function,
    line, the loop's header."""
    modules = {
        inspect.getmodule(base)
        for cls in classes
        for base in cls.__mro__
        if base.__module__.startswith("noisydml.")
    }
    rows = []
    for module in sorted(modules, key=lambda m: m.__name__):
        tree = ast.parse(inspect.getsource(module))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.For | ast.AsyncFor):
                    header = f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}"
                elif isinstance(node, ast.While):
                    header = f"while {ast.unparse(node.test)}"
                elif isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
                    loops = " ".join(
                        f"for {ast.unparse(g.target)} in {ast.unparse(g.iter)}" for g in node.generators
                    )
                    header = f"(... {loops})"
                else:
                    continue
                rows.append([module.__name__, function.name, str(node.lineno), header])
    # A nested function's loops are also found from its enclosing function.
    return sorted({tuple(row): row for row in rows}.values(), key=lambda row: (row[0], int(row[2])))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="batch sizes 60 and 256, fewer rounds")
    parser.add_argument("--rounds", type=int, default=None, help="timing rounds (default 5, --quick 3)")
    parser.add_argument(
        "--min-seconds", type=float, default=None, help="length of a round (0.2 s; quick 0.05)"
    )
    parser.add_argument("--resnet-batch", type=int, default=4, help="images of the measured ResNet50 step")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, see --wall)")
    parser.add_argument(
        "--wall",
        action="store_true",
        help="time wall seconds; by default CPU seconds, which other jobs on a shared machine hardly move",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.perf_counter if args.wall else time.process_time
    unit = "wall" if args.wall else "CPU"
    sizes = QUICK_BATCHES if args.quick else tuple(BATCHES)
    rounds = args.rounds or (3 if args.quick else 5)
    min_seconds = args.min_seconds or (0.05 if args.quick else 0.2)
    torch.manual_seed(0)
    warnings.filterwarnings("ignore")

    print(f"# mining.py{' --quick' if args.quick else ''}")
    print(machine())
    shapes = ", ".join(f"{b} = {BATCHES[b][0]}x{BATCHES[b][1]}" for b in sizes)
    print(f"{DIM}-d embeddings; P x K batches {shapes}")
    resnet = resnet50_seconds_per_image(args.resnet_batch, 2 if args.quick else 3, clock)
    print(
        f"ResNet50 fwd+bwd (CPU, batch {args.resnet_batch}, {unit} time, scaled linearly): "
        f"{resnet * 1e3:.0f} ms/image",
        flush=True,
    )
    defaults = OmegaConf.to_container(OmegaConf.load(CONFIG_DIR / "config.yaml").defaults)
    default_miner = next(d["miner"] for d in defaults if isinstance(d, dict) and "miner" in d)

    skipped: list[str] = []
    built: set[type] = set()
    miner_rows, loss_rows = [], []
    miner_cache: dict[tuple[str, int], IndicesTuple] = {}

    def build(group: str, name: str, P: int, K: int) -> Any:
        cfg = compose_option(group, name, P, K)
        node = cfg.get(group)
        return None if node is None else instantiate(node)

    for name in options("miner"):
        for size in sizes:
            P, K = BATCHES[size]
            try:
                miner = build("miner", name, P, K)
            except Exception as error:  # noqa: BLE001 - any failure to build is reported, not fatal
                skipped.append(f"miner={name}: cannot be built standalone ({type(error).__name__}: {error})")
                break
            if miner is None:
                break
            built.add(type(miner))
            embeddings, labels = batch(P, K, seed=size)
            equivalents = pml_miner_equivalents(miner)
            contenders = {"ours": mine(miner, embeddings, labels)}
            contenders.update({key: mine(m, embeddings, labels) for key, m in equivalents.items()})
            times = per_call(contenders, rounds, min_seconds, clock)
            indices = miner(embeddings, labels)
            miner_cache[(name, size)] = indices
            label = f"{name} ({type(miner).__name__}{', PML' if _is_pml(miner) else ''})"
            base_row = [label, size, tuple_count(indices), format_seconds(times["ours"])]
            share = percent(times["ours"], resnet * size)
            if not equivalents:
                miner_rows.append([*base_row, "-", "-", share])
            for key in equivalents:
                miner_rows.append(
                    [
                        *base_row,
                        f"{key}: {format_seconds(times[key])}",
                        f"{times['ours'] / times[key]:.2f}x",
                        share,
                    ]
                )
            print(f"  miner {name} @ {size}: {format_seconds(times['ours'])}", flush=True)

    for name in options("loss"):
        miner_name = paired_miner(name, default_miner)
        for size in sizes:
            P, K = BATCHES[size]
            embeddings, labels = batch(P, K, seed=size)
            try:
                loss = build("loss", name, P, K)
                note = ""
                if isinstance(loss, TrainingHooks):
                    try:
                        loss.setup(synthetic_training_set(labels))
                    except Exception as error:  # noqa: BLE001
                        note = f"setup skipped ({type(error).__name__})"
                miner = build("miner", miner_name, P, K) if miner_name != "none" else None
            except Exception as error:  # noqa: BLE001
                skipped.append(f"loss={name}: cannot be built standalone ({type(error).__name__}: {error})")
                break
            built.update(type(module) for module in loss.modules())
            if isinstance(getattr(loss, "distance", None), SNRDistance) and size**2 * DIM * 4 > MAX_PAIRWISE:
                # PML's SNR distance takes the variance of every pair's difference at once.
                skipped.append(
                    f"loss={name} at batch {size}: PML's SNRDistance holds N x N x {DIM} floats "
                    f"({size**2 * DIM * 4 / 2**30:.0f} GiB, several times that with the backward)"
                )
                continue
            indices = miner(embeddings, labels) if miner is not None else None
            contenders = {"ours": fwd_bwd(loss, embeddings, labels, indices)}
            equivalent = pml_loss_equivalent(loss)
            if equivalent is not None:
                contenders["pml"] = fwd_bwd(equivalent, embeddings, labels, indices)
            try:
                times = per_call(contenders, rounds, min_seconds, clock)
            except Exception as error:  # noqa: BLE001
                skipped.append(
                    f"loss={name} with miner={miner_name}: the call fails ({type(error).__name__}: {error})"
                )
                break
            mining = 0.0
            if miner is not None:
                mining = per_call({"m": mine(miner, embeddings, labels)}, rounds, min_seconds, clock)["m"]
            step = mining + times["ours"]
            pml_text, ratio = ("PML", "-") if _is_pml(loss) else ("none", "-")
            if equivalent is not None:
                pml_text = f"{type(equivalent).__name__}: {format_seconds(times['pml'])}"
                ratio = f"{times['ours'] / times['pml']:.2f}x"
            loss_rows.append(
                [
                    f"{name} ({type(loss).__name__})",
                    miner_name,
                    size,
                    tuple_count(indices),
                    format_seconds(times["ours"]),
                    pml_text,
                    ratio,
                    format_seconds(step),
                    percent(step, resnet * size),
                    "; ".join(text for text in (extra_work(loss), note) if text),
                ]
            )
            print(f"  loss {name} @ {size}: {format_seconds(times['ours'])}", flush=True)

    print_table(
        ["miner", "batch", "tuples", "ours", "PML equivalent", "ours/PML", "% of ResNet50 step (CPU)"],
        miner_rows,
        title=f"Miners: one call (no gradient), best round, {unit} time, {args.threads} thread(s)",
    )
    print_table(
        [
            "loss",
            "paired miner",
            "batch",
            "tuples",
            "fwd+bwd",
            "PML equivalent (same tuples)",
            "ours/PML",
            "miner + loss",
            "% of ResNet50 step (CPU)",
            "note",
        ],
        loss_rows,
        title=f"Losses: forward + backward on the paired miner's tuples, best round, {unit} time, "
        f"{args.threads} thread(s)",
    )
    print(
        f"ResNet50 step = {resnet * 1e3:.0f} ms/image x batch (CPU, measured at batch {args.resnet_batch}, "
        "scaled linearly). The GPU target, mining + loss < 5% of the step, needs a GPU to check."
    )
    print_table(
        ["module", "function", "line", "loop"],
        python_loops(built),
        title="Python loops in the project's miner and loss modules (the function says when it runs)",
    )
    if skipped:
        print("\nSkipped:")
        for line in skipped:
            print(f"- {line}")


if __name__ == "__main__":
    main()
