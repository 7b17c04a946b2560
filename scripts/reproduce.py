"""Run the sweep that reproduces one published table or figure, then draw its report.

    python scripts/reproduce.py le2019/fig2_cub                      # locally, one job after another
    python scripts/reproduce.py le2019/fig2_cub --slurm partition=gpu # as a SLURM job array
    python scripts/reproduce.py digits/le2019_noise -- seed=0,1,2,3   # extra Hydra overrides

The sweep (methods, noise rates, seeds, toplines) is declared in conf/experiment/<name>.yaml under
hydra.sweeper.params. Jobs run in outputs/reproduce/<name>/, one folder per job named by its
overrides, so running the same command again skips the finished jobs and runs only the missing or
failed ones. The report goes to outputs/reports/<name>/.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from noisydml import CONFIG_DIR

EXPERIMENTS = CONFIG_DIR / "experiment"


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
    parser.add_argument("--no-report", action="store_true", help="run the sweep only")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, after --")
    args = parser.parse_args(argv)

    if not (EXPERIMENTS / f"{args.experiment}.yaml").is_file():
        known = sorted(str(p.relative_to(EXPERIMENTS).with_suffix("")) for p in EXPERIMENTS.rglob("*.yaml"))
        parser.error(f"experiment={args.experiment} does not exist; choose one of: {', '.join(known)}")

    sweep_dir = Path(args.out) / args.experiment
    command = [
        Path(sys.executable).with_name("noisydml"),
        "-m",
        f"experiment={args.experiment}",
        f"hydra.sweep.dir={sweep_dir}",
        "trainer.enable_progress_bar=false",
    ]
    if args.slurm is not None:
        command += ["hydra/launcher=slurm", *(f"hydra.launcher.{kv}" for kv in args.slurm)]
    command += args.overrides
    print(" ".join(map(str, command)), flush=True)
    # A failed job must not stop the report: it is shown as failed there.
    sweep = subprocess.run(list(map(str, command)))
    if args.no_report:
        return sweep.returncode
    report = subprocess.run(
        [
            str(Path(sys.executable).with_name("noisydml-report")),
            str(sweep_dir),
            "--name",
            args.experiment.replace("/", "_"),
        ]
    )
    return sweep.returncode or report.returncode


if __name__ == "__main__":
    sys.exit(main())
