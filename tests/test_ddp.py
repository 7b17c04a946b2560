"""Multi-process training mines over the global batch.

Two CPU processes (gloo) run the real entry point with ``trainer=ddp_cpu`` and ``data.P=5``; one process
runs it with ``data.P=10``. The sampler gives the two ranks the halves of the one-process batch and the
module gathers them, so the mined tuples, losses, gradients, weights after the optimizer steps, and test
metrics agree with the one process up to float rounding (about 1e-7 here).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
import torch.multiprocessing as mp
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from lightning_fabric.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig, open_dict
from pytorch_lightning.strategies import DDPStrategy

from noisydml import CONFIG_DIR
from noisydml.data import Digits, MetricDataModule
from noisydml.noise import NoNoise
from noisydml.run.train import train

WORLD_SIZE = 2
P = 5
COMMON = [
    "logger=csv",
    "trainer.enable_progress_bar=false",
    "trainer.max_epochs=1",
    "trainer.max_steps=2",
    "trainer.log_every_n_steps=1",
    # Plain SGD: the step is lr times the gradient, which is compared directly.
    "optimizer=sgd",
    "optimizer.lr=0.1",
    "optimizer.momentum=0",
    "optimizer.weight_decay=0",
    # 629 test items: 2 ranks pad them to 630, and evaluation must drop the copy.
    "dataset.test_fraction=0.35",
    "data.eval_batch_size=100",
    "metrics.ncm_accuracy=true",
    "metrics.knn_accuracy_k=5",
]
CASES: dict[str, list[str]] = {
    "triplet_random_semihard": ["loss=triplet", "miner=random_semihard"],
    "triplet_fixed_semihard": ["loss=triplet", "miner=fixed_semihard"],
    # A learned beta per class (PML's MarginLoss, sized by the method's hooks) and a random miner.
    "margin_learned_beta": ["loss=margin", "miner=distance_weighted", "module.loss_lr=0.5"],
    "multi_similarity": ["loss=multi_similarity", "miner=multi_similarity"],
}
# Observed: at most 1.2e-7 (losses), 4e-8 (gradients), 1.5e-8 (weights), 4e-7 (test embeddings), and equal
# metrics; near ties between neighbours can swap with such differences (2e-6 in MAP@R was seen).
TOLERANCE = {"loss": 1e-6, "grads": 1e-6, "params": 1e-6, "embeddings": 1e-5, "metrics": 1e-4}


class StepRecorder(pl.Callback):
    """Saves what one process saw: the epoch length its method's hooks were given, each training step's
    sample indices, tuple count, loss and (DDP-averaged) gradients, the weights after training, and the
    gathered test embeddings and metrics; to ``<path>/rank<r>.pt``."""

    def __init__(self, path: str):
        self.path = Path(path)
        self.record: dict[str, Any] = {"steps": []}

    def setup(self, trainer, pl_module, stage: str) -> None:
        # Between the data module's setup and the module's, which hands this to the method's hooks.
        if stage == "fit":
            self.record["batches_per_epoch"] = trainer.datamodule.training_set().batches_per_epoch

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        self.record["steps"].append({"indices": batch[2].clone()})

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        grads = {n: p.grad.clone() for n, p in pl_module.named_parameters() if p.grad is not None}
        self.record["steps"][-1]["grads"] = grads

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        step = self.record["steps"][-1]
        step["loss"] = outputs["loss"].detach().clone()
        step["tuples"] = trainer.callback_metrics["train/tuples"].item()

    def on_train_end(self, trainer, pl_module) -> None:
        self.record["params"] = {n: p.detach().clone() for n, p in pl_module.named_parameters()}

    def on_test_end(self, trainer, pl_module) -> None:
        embedded = pl_module.test_embedded
        self.record["test"] = [
            torch.from_numpy(a) for a in (embedded.embeddings, embedded.labels, embedded.indices)
        ]
        self.record["metrics"] = pl_module.test_metrics
        torch.save(self.record, self.path / f"rank{trainer.global_rank}.pt")


def _config(case: str, world_size: int, run_dir: Path) -> DictConfig:
    """The case's config for ``world_size`` processes whose batches together hold P * WORLD_SIZE classes."""
    overrides = [*COMMON, *CASES[case], f"data.P={P * WORLD_SIZE // world_size}"]
    if world_size > 1:
        overrides += ["trainer=ddp_cpu", f"trainer.devices={world_size}"]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides)
    GlobalHydra.instance().clear()
    with open_dict(cfg):
        cfg.paths.output_dir = str(run_dir)
        cfg.callbacks.record = {"_target_": f"{__name__}.StepRecorder", "path": str(run_dir)}
    return cfg


def _rank(rank: int, port: int, configs: list[DictConfig]) -> None:
    """One DDP process: the environment a launcher (torchrun, SLURM) gives it, then the real entry point."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        WORLD_SIZE=str(WORLD_SIZE),
        NODE_RANK="0",
        RANK=str(rank),
        LOCAL_RANK=str(rank),
    )
    # Lightning reads the rank from the environment when it is imported, which unpickling this
    # function did before the environment above was set.
    rank_zero_only.rank = rank
    # Two processes on a shared CPU: one thread each, or they oversubscribe it.
    torch.set_num_threads(1)
    for cfg in configs:
        train(cfg)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(configs: list[DictConfig], timeout_s: float = 600) -> None:
    """Runs the configs in WORLD_SIZE processes; a collective that one rank never joins fails, not hangs."""
    context = mp.start_processes(
        _rank, args=(_free_port(), configs), nprocs=WORLD_SIZE, join=False, start_method="spawn"
    )
    deadline = time.monotonic() + timeout_s
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail(f"the {WORLD_SIZE} DDP processes did not finish within {timeout_s} s")


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict[str, tuple[dict, list[dict]]]:
    """Per case: the one-process record and the ranks' records. All DDP runs share one spawn."""
    root = tmp_path_factory.mktemp("ddp")
    for case in CASES:
        train(_config(case, 1, root / case / "single"))
    _spawn([_config(case, WORLD_SIZE, root / case / "ddp") for case in CASES])
    records = {
        case: (
            torch.load(root / case / "single" / "rank0.pt"),
            [torch.load(root / case / "ddp" / f"rank{r}.pt") for r in range(WORLD_SIZE)],
        )
        for case in CASES
    }
    for case, (single, ranks) in records.items():
        # What results.json says trained: its processes.
        for record, folder in ((single, "single"), (ranks[0], "ddp")):
            record["processes"] = json.loads((root / case / folder / "results.json").read_text())["processes"]
    return records


def _max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max((a[name] - b[name]).abs().max().item() for name in a)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_two_processes_train_like_one_process_on_their_concatenated_batch(case, records):
    single, ranks = records[case]
    assert len(single["steps"]) == 2
    assert (single["processes"], ranks[0]["processes"]) == (1, WORLD_SIZE)
    for rank in ranks:
        # Each rank takes half the batch of one process, so an epoch has as many steps.
        assert rank["batches_per_epoch"] == single["batches_per_epoch"]
    for step, one in enumerate(single["steps"]):
        per_rank = [rank["steps"][step] for rank in ranks]
        assert torch.equal(torch.cat([s["indices"] for s in per_rank]), one["indices"])
        # Every rank mined the gathered batch, with the same random draws: the same tuples and loss.
        assert all(s["tuples"] == one["tuples"] for s in per_rank)
        assert all(torch.equal(s["loss"], per_rank[0]["loss"]) for s in per_rank)
        assert per_rank[0]["loss"].item() == pytest.approx(one["loss"].item(), abs=TOLERANCE["loss"])
        assert max(g.abs().max().item() for g in one["grads"].values()) > 1e-4
        for s in per_rank:
            assert _max_difference(s["grads"], one["grads"]) < TOLERANCE["grads"]

    embeddings, labels, indices = single["test"]
    assert len(indices) == 629
    for rank in ranks:
        # DDP keeps the ranks' weights identical, the loss's own (a learned beta) included.
        assert _max_difference(rank["params"], ranks[0]["params"]) == 0
        assert _max_difference(rank["params"], single["params"]) < TOLERANCE["params"]
        # Evaluation gathers every rank's share, drops the padding and restores the data set's order.
        rank_embeddings, rank_labels, rank_indices = rank["test"]
        assert torch.equal(rank_indices, indices) and torch.equal(rank_labels, labels)
        assert (rank_embeddings - embeddings).abs().max() < TOLERANCE["embeddings"]
        assert rank["metrics"] == pytest.approx(single["metrics"], abs=TOLERANCE["metrics"])
    if "loss.beta" in single["params"]:
        # The comparison above covered a beta that moved.
        assert (single["params"]["loss.beta"] - 1.2).abs().max() > 1e-3


def test_the_trainers_setup_call_gives_each_process_its_share_of_the_epoch():
    # `train` sets the data up before the Trainer exists; the Trainer's setup call under DDP comes
    # before the method's hooks read the epoch length.
    data = MetricDataModule(Digits(), NoNoise(), P=5, K=6)
    data.setup("fit")
    one_process = data.training_set().batches_per_epoch
    data.trainer = SimpleNamespace(world_size=2, global_rank=1)
    data.setup("fit")
    assert (data.sampler.num_replicas, data.sampler.rank) == (2, 1)
    assert data.training_set().batches_per_epoch == one_process // 2 == 1257 // 60


@pytest.mark.parametrize(
    ("option", "accelerator", "devices"), [("ddp", "auto", "auto"), ("ddp_cpu", "cpu", 2)]
)
def test_ddp_trainer_configs_run_one_process_per_device(option, accelerator, devices, tmp_path):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        overrides = [f"trainer={option}", "trainer.devices=4", "trainer.accelerator=cpu"]
        cfg = compose("config", [*overrides, f"paths.output_dir={tmp_path}"])
        unset = compose("config", [f"trainer={option}"])
    GlobalHydra.instance().clear()
    # On a CPU auto is one process: trainer=ddp_cpu, a multi-process run to try, starts two.
    assert unset.trainer.devices == devices
    assert unset.trainer.accelerator == accelerator
    # The rest of the trainer defaults still apply.
    assert cfg.trainer.use_distributed_sampler is False
    trainer = instantiate(cfg.trainer, logger=False)
    assert isinstance(trainer.strategy, DDPStrategy) and trainer.num_devices == 4
