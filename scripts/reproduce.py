"""Run the sweep that reproduces one published table or figure, then draw its report.

    python scripts/reproduce.py le2019/fig2_cub                      # locally, one job after another
    python scripts/reproduce.py le2019/fig2_cub --slurm partition=gpu # as a SLURM job array
    python scripts/reproduce.py digits/le2019_noise -- seed=0,1,2,3   # extra Hydra overrides
    python scripts/reproduce.py noisy_dml/mnist5k_instance_dependent@focused  # one grid of its sweep

The sweep (methods, noise rates, seeds, toplines) is declared in conf/experiment/<name>.yaml under
hydra.sweeper.params. Jobs run in outputs/reproduce/<name>/, one folder per job named by its
overrides, so running the same command again skips the finished jobs and runs only the missing or
failed ones. The report goes to outputs/reports/<name>/. ``<name>@<grid>`` runs one grid of a sweep of
several (``hydra.sweeper.grids``) in a folder of its own, so that the make targets can run an experiment's
grids in two job slots side by side; a report over the folders is the experiment's.

An experiment that tunes declares it under `tune` (see conf/config.yaml): before the sweep, each method
of `tune.space` that the sweep runs gets an Optuna study (hydra/sweeper=optuna) of `tune.trials` trials
at `tune.at`, maximising the validation metric (optimized_metric; the test split is never read), in
outputs/tuning/<name>/<method>/; the sweep then runs that method with its best values. A finished study
is not run again. The chosen values and the budget are written to the sweep's tuning.json, which the
report shows.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from noisydml import CONFIG_DIR

EXPERIMENTS = CONFIG_DIR / "experiment"
# Written by hydra-optuna-sweeper in the study's folder when the study ends.
STUDY_RESULTS = "optimization_results.yaml"
TUNING_FILE = "tuning.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "experiment", help="a file under conf/experiment/, without .yaml (e.g. le2019/fig2_cub)"
    )
    parser.add_argument(
        "--slurm",
        nargs="*",
        metavar="KEY=VALUE",
        help="launch on SLURM; KEY=VALUE set hydra.launcher.KEY (partition, account, ...)",
    )
    parser.add_argument("--out", default="outputs/reproduce", help="folder of the sweeps")
    parser.add_argument("--tuning-out", default="outputs/tuning", help="folder of the tuning studies")
    parser.add_argument("--no-report", action="store_true", help="run the sweep only")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, after --")
    # Intermixed: overrides may come after the options (`le2019/fig2_cub --out o seed=0`); plain
    # parse_args takes them only straight after the experiment.
    args = parser.parse_intermixed_args(argv)

    name = args.experiment
    args.experiment, _, grid = name.partition("@")
    if not (EXPERIMENTS / f"{args.experiment}.yaml").is_file():
        known = sorted(str(p.relative_to(EXPERIMENTS).with_suffix("")) for p in EXPERIMENTS.rglob("*.yaml"))
        parser.error(f"experiment={args.experiment} does not exist; choose one of: {', '.join(known)}")

    sweep_dir = Path(args.out) / name
    launcher = []
    if args.slurm is not None:
        launcher = ["hydra/launcher=slurm", *(f"hydra.launcher.{kv}" for kv in args.slurm)]
    cfg = _compose(args.experiment, args.overrides)
    if grid:
        grids = list(cfg.hydra.sweeper.get("grids") or {})
        if grid not in grids:
            parser.error(
                f"{name}: {args.experiment}'s sweep has no grid {grid}; its grids: {grids or 'none'}"
            )
        args.overrides = [*(f"hydra.sweeper.grids.{g}=null" for g in grids if g != grid), *args.overrides]
    # The studies' settings (tune.*) are this script's; a run does not read them.
    overrides = [o for o in args.overrides if not o.startswith(("method=", "tune.", "+tune."))]
    methods = _methods(cfg, args.overrides)
    tuned = {}
    if cfg.tune.trials > 0:
        for method in [m for m in cfg.tune.space if m in methods]:
            study = Path(args.tuning_out) / args.experiment / method
            tuned[method] = _tune(args.experiment, method, cfg, study, launcher, overrides)
        if tuned:
            _write_tuning(sweep_dir, cfg, tuned)
    # Each tuned method with its chosen values, then the others together. A failed job must not stop
    # the report: it is shown as failed there.
    returncode = 0
    for method, study in tuned.items():
        chosen = [f"{key}={value}" for key, value in study["chosen"].items()]
        returncode |= _noisydml(
            args.experiment, sweep_dir, [*launcher, f"method={method}", *chosen, *overrides]
        )
    others = [m for m in methods if m not in tuned]
    if not tuned:
        # The sweep as declared (its grids' own methods), or the methods the command line gives.
        returncode |= _noisydml(args.experiment, sweep_dir, [*launcher, *args.overrides])
    elif others:
        method = [f"method={','.join(others)}"] if others != [None] else []
        returncode |= _noisydml(args.experiment, sweep_dir, [*launcher, *method, *overrides])
    if args.no_report:
        return returncode
    report = subprocess.run(
        [
            str(Path(sys.executable).with_name("noisydml-report")),
            str(sweep_dir),
            "--name",
            name.replace("/", "_"),
        ]
    )
    return returncode or report.returncode


def _noisydml(experiment: str, sweep_dir: Path, overrides: list[str]) -> int:
    command = [
        str(Path(sys.executable).with_name("noisydml")),
        "-m",
        f"experiment={experiment}",
        f"hydra.sweep.dir={sweep_dir}",
        "trainer.enable_progress_bar=false",
        *overrides,
    ]
    print(" ".join(command), flush=True)
    return subprocess.run(command).returncode


def _compose(experiment: str, overrides: list[str]):
    """The experiment's config as its jobs see it, with the sweep (hydra.sweeper.params)."""
    # Sweep overrides (a,b) are for the launcher, not for composing one config.
    single = [o for o in overrides if "," not in o.split("=", 1)[-1] and not o.startswith("hydra")]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose("config", overrides=[f"experiment={experiment}", *single], return_hydra_config=True)


def _methods(cfg, overrides: list[str]) -> list[str | None]:
    """The methods the sweep runs: a method= override, else the experiment's sweep, else its one method
    (None when it has none)."""
    given = [o.split("=", 1)[1] for o in overrides if o.startswith("method=")]
    sweeper = cfg.hydra.sweeper
    # The sweep's methods, and each grid's (hydra.sweeper.grids), in order.
    swept = [(sweeper.get("params") or {}).get("method")]
    swept += [grid.get("method") for grid in (sweeper.get("grids") or {}).values() if grid is not None]
    listed = [given[-1]] if given else [m for m in swept if m]
    if listed:
        return list(dict.fromkeys(m for methods in listed for m in str(methods).split(",")))
    return [cfg.hydra.runtime.choices.get("method")]


def _tune(experiment: str, method: str, cfg, study: Path, launcher: list[str], overrides: list[str]) -> dict:
    """Run (or read, when finished) one method's Optuna study; return its space, chosen values and score."""
    space = {str(k): str(v) for k, v in cfg.tune.space[method].items()}
    results = study / STUDY_RESULTS
    if not results.is_file():
        # The study's own fixed settings, unless the command line sets them.
        given = {o.split("=", 1)[0] for o in overrides}
        at = [f"{k}={v}" for k, v in cfg.tune.at.items() if k not in given]
        direction = "maximize" if cfg.callbacks.select.mode == "max" else "minimize"
        _noisydml(
            experiment,
            study,
            [
                *launcher,
                "hydra/sweeper=optuna",
                # The experiment's sweep (methods, rates, seeds) is not the study's search space.
                "hydra.sweeper.params=null",
                f"hydra.sweeper.n_trials={cfg.tune.trials}",
                f"hydra.sweeper.direction={direction}",
                f"hydra.sweeper.sampler.seed={cfg.tune.seed}",
                f"method={method}",
                *at,
                *(f"{k}={v}" for k, v in space.items()),
                *overrides,
            ],
        )
    if not results.is_file():
        raise SystemExit(f"the {method} study in {study} did not finish (no {STUDY_RESULTS}); see its log")
    found = yaml.safe_load(results.read_text())
    return {
        "space": space,
        "chosen": found["best_params"],
        "best_value": found["best_value"],
        "study": str(study),
    }


def _write_tuning(sweep_dir: Path, cfg, tuned: dict) -> None:
    """The sweep's tuning.json: the budget, where the studies ran, and each method's chosen values."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    record = {
        "metric": cfg.optimized_metric,
        "direction": "maximize" if cfg.callbacks.select.mode == "max" else "minimize",
        "trials": cfg.tune.trials,
        "sampler": f"Optuna TPE, seed {cfg.tune.seed}",
        "at": OmegaConf.to_container(cfg.tune.at),
        "methods": tuned,
    }
    (sweep_dir / TUNING_FILE).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
