"""The cost of a small job: a sweep of the noisy_dml experiments' jobs through ``noisydml``, by phase,
beside a plain loop doing the same jobs' arithmetic, and beside another checkout's ``noisydml`` (``--old``).

A CPU reproduction is hundreds of jobs of a few seconds each (the noisy_dml comparison: 1,240), so what the
runner spends around a job's arithmetic, not the arithmetic, bounds how many seeds a comparison can afford.
Each contender runs in its own process, as a user's sweep does, so imports are counted:

- ``noisydml``: ``noisydml -m <experiment> seed=0,...,N-1`` run in process, with timers on the runner's phases
  (each phase's CPU time exclusive of the phases inside it): composition (Hydra composing each job's config),
  building (preflight: data, noisy labels, model, the one-batch check; loggers, callbacks, the Trainer),
  training steps (forward, mining, loss, backward, optimizer), validation (embedding and scoring the
  validation loaders), tests (the test stages after training), checkpoints (writing them), callbacks (the
  detection callbacks' arithmetic), records (results.json, labels, Hydra's files) and the rest of the runner
  (Lightning's loops and hooks, logging).
- ``plain loop``: the same jobs written as a plain PyTorch loop, with no Hydra, Lightning or records: the
  same data set, split and noisy labels (the project's data module, seeded alike), P x K batches from the
  project's sampler, model, miner, loss and optimizer built from the job's composed config (composed once
  before the timed part, by the parent), the same epochs, and at each epoch the same evaluations (the
  validation split and, where the experiment asks, the test split, through the project's evaluator), then
  the test split scored with the selected epoch's weights and the last epoch's.
- ``old``: ``--old DIR``, the ``noisydml`` of another checkout (e.g. ``git worktree add DIR <commit>``), the
  same sweep, timed as a whole.

The contenders alternate (plain, noisydml, old, plain, ...) over ``--rounds``, the best round of each kept,
and each reports the CPU time of its whole process (``RUSAGE_CHILDREN``: imports included), so jobs per hour
of CPU can be compared on a shared machine. Run it with ``OMP_NUM_THREADS=1``; the experiments run one torch
thread per job themselves.

    python scripts/bench/small_jobs.py --quick                     # 2 digits jobs, 1 round (make bench-quick)
    python scripts/bench/small_jobs.py --old /tmp/old-main         # 6 digits jobs + 3 MNIST-5k jobs, 2 rounds
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

EXPERIMENTS = {
    "digits": "noisy_dml/digits_symmetric",
    "mnist5k": "noisy_dml/mnist5k_symmetric",
}
METHOD = "le2019/triplet_random_semihard"
PHASES = (
    "imports",
    "composition",
    "building",
    "training steps",
    "validation",
    "tests",
    "checkpoints",
    "callbacks",
    "records",
    "runner, rest",
)


def sweep_arguments(experiment: str, jobs: int, sweep_dir: Path) -> list[str]:
    seeds = ",".join(str(s) for s in range(jobs))
    return [
        "-m",
        f"experiment={EXPERIMENTS[experiment]}",
        f"method={METHOD}",
        "noise.rate=0.5",
        f"seed={seeds}",
        # Seeds the experiments' sweeps may not run: labelled as the bench's own runs.
        f"name=bench_{experiment}",
        f"report.figure=bench/{experiment}",
        f"hydra.sweep.dir={sweep_dir}",
        "hydra.sweep.subdir=${hydra.job.num}",
    ]


# ---------------------------------------------------------------------------------------------------------
# The runner's side: timers wrapped around the functions that start and end each phase.


class PhaseClock:
    """CPU seconds per phase, exclusive: a phase entered inside another stops the outer one's clock."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.stack: list[list] = []

    def wrap(self, owner, name: str, phase: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        clock = self

        def timed(*args, **kwargs):
            clock.enter(phase)
            try:
                return original(*args, **kwargs)
            finally:
                clock.leave()

        setattr(owner, name, timed)

    def enter(self, phase: str) -> None:
        now = time.process_time()
        if self.stack:
            outer = self.stack[-1]
            self.seconds[outer[0]] = self.seconds.get(outer[0], 0.0) + now - outer[1]
        self.stack.append([phase, now])

    def leave(self) -> None:
        now = time.process_time()
        phase, started = self.stack.pop()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - started
        if self.stack:
            self.stack[-1][1] = now


def _instrument(clock: PhaseClock) -> None:
    import importlib

    def module(name):
        try:
            return importlib.import_module(name)
        except ImportError:
            return None

    targets = [
        ("hydra._internal.config_loader_impl", "ConfigLoaderImpl", "load_configuration", "composition"),
        ("hydra._internal.config_loader_impl", "ConfigLoaderImpl", "load_sweep_config", "composition"),
        ("hydra.core.utils", None, "run_job", "runner, rest"),
        ("noisydml.run.preflight", None, "prepare", "building"),
        ("noisydml.run.train", None, "_build", "building"),
        ("pytorch_lightning.loops.optimization.automatic", "_AutomaticOptimization", "run", "training steps"),
        ("noisydml.run.selection", None, "test_selected", "tests"),
        ("noisydml.callbacks.checkpointing", "AtomicCheckpointIO", "save_checkpoint", "checkpoints"),
        *[
            ("noisydml.callbacks.knn_detection", "KnnDetection", hook, "callbacks")
            for hook in ("on_fit_start", "on_validation_epoch_end", "on_train_epoch_end")
        ],
        *[
            ("noisydml.callbacks.loss_detection", "LossDetection", hook, "callbacks")
            for hook in ("on_fit_start", "on_fit_end", "on_train_batch_start", "on_train_epoch_end")
        ],
        ("noisydml.utils.run_directory", "RunDir", "write_results", "records"),
        ("noisydml.run.train", None, "_start", "records"),
        ("noisydml.data.datamodule", "MetricDataModule", "write_labels", "records"),
    ]
    for module_name, owner_name, function, phase in targets:
        owner = module(module_name)
        if owner is not None and owner_name is not None:
            owner = getattr(owner, owner_name, None)
        if owner is not None:
            clock.wrap(owner, function, phase)
    # An evaluation loop is validation inside fit, tests after it.
    evaluation = module("pytorch_lightning.loops.evaluation_loop")
    if evaluation is not None:
        run = evaluation._EvaluationLoop.run

        def classified(self, *args, **kwargs):
            clock.enter("tests" if self.trainer.testing else "validation")
            try:
                return run(self, *args, **kwargs)
            finally:
                clock.leave()

        evaluation._EvaluationLoop.run = classified


def runner_child(arguments: list[str], numerics: str) -> dict:
    """Run the sweep in this process with the phase timers; the phases' CPU seconds."""
    started = time.process_time()
    clock = PhaseClock()
    from noisydml.numerics import apply_numerics
    from noisydml.run import cli

    # The experiment's numerics mode (its composed config's), which must be in force before torch loads.
    apply_numerics(numerics)

    # The imports a run makes before its first job: the trainer's modules (torch, Lightning, faiss).
    import noisydml.run.train  # noqa: F401

    imports = time.process_time() - started
    _instrument(clock)
    sys.argv = ["noisydml", *arguments]
    clock.enter("runner, rest")
    try:
        cli.main()
    except SystemExit as stop:
        if stop.code not in (0, None):
            raise
    clock.leave()
    return {"imports": imports, **clock.seconds}


def old_child(arguments: list[str]) -> dict:
    from noisydml.run import cli

    sys.argv = ["noisydml", *arguments]
    try:
        cli.main()
    except SystemExit as stop:
        if stop.code not in (0, None):
            raise
    return {}


# ---------------------------------------------------------------------------------------------------------
# The plain loop.


def plain_child(config_path: Path, jobs: int) -> dict:
    """``jobs`` jobs (seeds 0..jobs-1) of the composed config in ``config_path``, as a plain loop."""
    started = time.process_time()
    import copy
    import importlib

    import yaml

    from noisydml.numerics import apply_numerics

    config = yaml.safe_load(config_path.read_text())
    apply_numerics(config["numerics"])

    import numpy as np
    import torch

    def targets(node):
        if isinstance(node, dict):
            if "_target_" in node:
                yield node["_target_"].rpartition(".")[0]
            for value in node.values():
                yield from targets(value)
        elif isinstance(node, list):
            for value in node:
                yield from targets(value)

    # The modules the jobs build from, loaded before the first job as the runner loads its own.
    for name in set(targets(config)):
        importlib.import_module(name)
    imports = time.process_time() - started

    def build(node, **kwargs):
        """The object a ``_target_`` node names, built with its keys (nested nodes built first)."""
        if not isinstance(node, dict) or "_target_" not in node:
            return node
        node = dict(node)
        module, _, name = node.pop("_target_").rpartition(".")
        partial = node.pop("_partial_", False)
        node = {k: build(v) for k, v in node.items() if not k.startswith("_")}
        target = getattr(importlib.import_module(module), name)
        if partial:
            return lambda *a, **k: target(*a, **{**node, **k})
        return target(**node, **kwargs)

    torch.set_num_threads(1)
    seconds = {"imports": imports, "building": 0.0, "training steps": 0.0, "validation": 0.0, "tests": 0.0}
    for seed in range(jobs):
        cfg = copy.deepcopy(config)
        cfg["seed"] = seed
        cfg["noise"]["seed"] = seed
        tick = time.process_time()
        np.random.seed(seed)  # noqa: NPY002  (as pl.seed_everything seeds it)
        torch.manual_seed(seed)
        data = build({**cfg["data"], "_partial_": True})(
            dataset=build(cfg["dataset"]), noise=build(cfg["noise"])
        )
        data.setup("fit")
        backbone = build(cfg["backbone"])
        loss, miner = build(cfg["loss"]), build(cfg["miner"])
        evaluator = build(cfg["metrics"])
        optimizer = build(cfg["optimizer"])(
            [{"params": [p for p in backbone.parameters() if p.requires_grad]}]
        )
        loaders = dict(zip(data.validation_stages, data.val_dataloader(), strict=True))
        test_loader = data.test_dataloader()
        train_loader = data.train_dataloader()
        query_mask = data.query_mask
        seconds["building"] += time.process_time() - tick

        def score(loader, mask, backbone=backbone, evaluator=evaluator, seed=seed):
            backbone.eval()
            with torch.no_grad():
                parts = [(backbone(x), y, i) for x, y, i in loader]
            backbone.train()
            embeddings, labels, indices = (torch.cat(p) for p in zip(*parts, strict=True))
            indices, first = np.unique(indices.numpy(), return_index=True)
            return evaluator(
                embeddings[first].numpy(), labels[first].numpy(), query_mask=mask, seed=seed, reference=None
            )

        best, best_state = None, None
        for _epoch in range(cfg["trainer"]["max_epochs"]):
            tick = time.process_time()
            for x, y, _ in train_loader:
                embeddings = backbone(x)
                value = loss(embeddings, y, miner(embeddings, y))
                optimizer.zero_grad()
                value.backward()
                optimizer.step()
            seconds["training steps"] += time.process_time() - tick
            tick = time.process_time()
            scores = {
                stage: score(loader, query_mask if stage == "test_epoch" else None)
                for stage, loader in loaders.items()
            }
            if best is None or scores["val"]["recall@1"] > best:
                best, best_state = scores["val"]["recall@1"], copy.deepcopy(backbone.state_dict())
            seconds["validation"] += time.process_time() - tick
        tick = time.process_time()
        score(test_loader, query_mask)
        backbone.load_state_dict(best_state)
        score(test_loader, query_mask)
        seconds["tests"] += time.process_time() - tick
    return seconds


def compose_resolved(experiment: str, output: Path) -> Path:
    """The job's config composed by Hydra and resolved, written for the plain loop (outside its timing)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    from noisydml import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[f"experiment={EXPERIMENTS[experiment]}", f"method={METHOD}", "noise.rate=0.5"],
        )
    with open_dict(cfg):
        cfg.paths.output_dir = str(output)
    path = output / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(OmegaConf.to_yaml(OmegaConf.to_container(cfg, resolve=True)))
    return path


# ---------------------------------------------------------------------------------------------------------
# The parent: interleaved rounds, the best of each contender, the tables.


def _child(command: list[str], env: dict) -> tuple[dict, float, float]:
    """Run a child; its phases, and the CPU and wall seconds its process took."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[:6])} ... failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    phases = json.loads(done.stdout.strip().splitlines()[-1])
    return phases, cpu, wall


def contenders(experiment: str, jobs: int, work: Path, old: Path | None) -> dict[str, list[str]]:
    me = [sys.executable, str(Path(__file__).resolve())]
    config = compose_resolved(experiment, work / "plain")
    found = {
        "plain loop": [*me, "--child", "plain", "--config", str(config), "--jobs", str(jobs), str(jobs)],
        "noisydml": [
            *me,
            "--child",
            "runner",
            "--config",
            str(config),
            "--",
            *sweep_arguments(experiment, jobs, work / "new"),
        ],
    }
    if old is not None:
        python = old / ".venv" / "bin" / "python"
        found["old"] = [
            str(python if python.exists() else sys.executable),
            str(Path(__file__).resolve()),
            "--child",
            "old",
            "--",
            *sweep_arguments(experiment, jobs, work / "old"),
        ]
    return found


def measure(experiment: str, jobs: int, rounds: int, old: Path | None) -> dict[str, dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", "PYTHONHASHSEED": "0"}
    best: dict[str, dict] = {}
    for round_ in range(rounds):
        with tempfile.TemporaryDirectory() as work:
            commands = contenders(experiment, jobs, Path(work) / str(round_), old)
            for name, command in commands.items():
                child_env = dict(env)
                if name == "old":
                    child_env["PYTHONPATH"] = str(old / "src")
                phases, cpu, wall = _child(command, child_env)
                if name not in best or cpu < best[name]["cpu"]:
                    best[name] = {"phases": phases, "cpu": cpu, "wall": wall}
    return best


def report(experiment: str, jobs: int, best: dict[str, dict]) -> None:
    from measure import format_seconds, print_table

    plain = best["plain loop"]
    new = best["noisydml"]
    rows = []
    for phase in PHASES:
        runner = new["phases"].get(phase, 0.0)
        loop = plain["phases"].get(phase, float("nan")) if phase in plain["phases"] else float("nan")
        per = 1 if phase == "imports" else jobs
        rows.append([phase, format_seconds(runner / per), format_seconds(loop / per)])
    in_jobs = {name: r["cpu"] - r["phases"].get("imports", 0.0) for name, r in best.items() if r["phases"]}
    rows.append(
        [
            "**per job, imports aside**",
            format_seconds(in_jobs["noisydml"] / jobs),
            format_seconds(in_jobs["plain loop"] / jobs),
        ]
    )
    print_table(
        ["phase (CPU s per job; imports per process)", "noisydml", "plain loop"],
        rows,
        f"{experiment}: {jobs} jobs of {EXPERIMENTS[experiment]} method={METHOD} noise.rate=0.5",
    )
    rows = []
    for name, result in best.items():
        per_hour = 3600 * jobs / result["cpu"]
        rows.append(
            [
                name,
                format_seconds(result["cpu"]),
                format_seconds(result["wall"]),
                f"{per_hour:,.0f}",
                f"{result['cpu'] / plain['cpu']:.2f}x",
            ]
        )
    if "old" in best:
        rows.append(
            ["noisydml / old", "", "", f"{best['old']['cpu'] / new['cpu']:.2f}x the jobs per hour", ""]
        )
    print_table(
        ["contender", "CPU, whole process", "wall", "jobs per CPU-hour", "CPU / plain loop"],
        rows,
        f"{experiment}: jobs per hour, {jobs} jobs in one process (imports included)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 digits jobs, 1 round")
    parser.add_argument("--jobs", type=int, nargs=2, default=[6, 3], metavar=("DIGITS", "MNIST5K"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--experiments", nargs="+", default=list(EXPERIMENTS), choices=list(EXPERIMENTS))
    parser.add_argument("--old", type=Path, help="another checkout's root, whose noisydml to time beside")
    parser.add_argument("--child", choices=["runner", "plain", "old"], help=argparse.SUPPRESS)
    parser.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    rest = [a for a in rest if a != "--"]
    if args.child == "runner":
        import yaml

        print(json.dumps(runner_child(rest, yaml.safe_load(args.config.read_text())["numerics"])))
        return
    if args.child == "old":
        print(json.dumps(old_child(rest)))
        return
    if args.child == "plain":
        print(json.dumps(plain_child(args.config, args.jobs[0])))
        return
    from measure import machine

    print(machine())
    jobs = dict(zip(EXPERIMENTS, args.jobs, strict=True))
    experiments = args.experiments
    rounds = args.rounds
    if args.quick:
        jobs, experiments, rounds = {"digits": 2}, ["digits"], 1
    for experiment in experiments:
        report(experiment, jobs[experiment], measure(experiment, jobs[experiment], rounds, args.old))


if __name__ == "__main__":
    main()
