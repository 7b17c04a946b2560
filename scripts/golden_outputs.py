"""What a set of runs computes, kept so that a change meant to leave results alone can be shown to.

The cases are the small jobs the CPU reproductions are made of: every method of the noisy_dml comparison
on digits at one seed, the default run (``make run``), and a MNIST-5k job. Each runs through the real
``noisydml`` command in a sweep, as the reproductions run them; what is kept of each job is what the
reports read: results.json's metrics and selection (the epoch tested), and the SHA-256 of labels.csv (the
noisy labels trained on) and of csv/metrics.csv (every logged value, step by step).

    python scripts/golden_outputs.py             # writes tests/golden/outputs.json
    python scripts/golden_outputs.py --check     # runs them again and lists what differs

``tests/test_golden_outputs.py`` runs the same check. A change that is meant to change results (a
protocol, a default) rewrites the file in the same commit and says why in its message.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "outputs.json"
NOISY_DML_DIGITS = ROOT / "conf" / "experiment" / "noisy_dml" / "digits_symmetric.yaml"


def noisy_dml_methods() -> str:
    """The comma-separated methods of the noisy_dml digits comparison, as its sweep lists them."""
    import yaml

    return yaml.safe_load(NOISY_DML_DIGITS.read_text())["hydra"]["sweeper"]["params"]["method"]


def cases() -> dict[str, list[str]]:
    """Each case's ``noisydml`` arguments (a sweep: ``-m``)."""
    return {
        "noisy_dml_digits": [
            "-m",
            "experiment=noisy_dml/digits_symmetric",
            f"method={noisy_dml_methods()}",
            "noise.rate=0.5",
            "seed=0",
        ],
        "default": ["-m", "numerics=strict"],
        "mnist5k": [
            "-m",
            "experiment=noisy_dml/mnist5k_symmetric",
            "method=le2019/triplet_random_semihard",
            "noise.rate=0.5",
            "seed=5",
        ],
    }


def _sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def job_record(run_dir: Path) -> dict:
    """What is compared of one job."""
    results = json.loads((run_dir / "results.json").read_text())
    selection = {k: v for k, v in (results.get("selection") or {}).items() if k != "checkpoint"}
    return {
        "status": results["status"],
        "metrics": results.get("metrics"),
        "selection": selection,
        "labels.csv": _sha256(run_dir / "labels.csv"),
        "csv/metrics.csv": _sha256(run_dir / "csv" / "metrics.csv"),
    }


def job_key(run_dir: Path) -> str:
    """A job's name within its case: its overrides, as its results.json's config records them."""
    results = json.loads((run_dir / "results.json").read_text())
    choices = results.get("choices") or {}
    config = results.get("config") or {}
    return (
        f"{choices.get('method')}|noise.rate={config.get('noise', {}).get('rate')}|seed={results.get('seed')}"
    )


def run_case(arguments: list[str], sweep_dir: Path, noisydml: str | None = None) -> dict[str, dict]:
    """Run one case's sweep into ``sweep_dir``; each job's record by its key."""
    command = [noisydml or str(Path(sys.executable).with_name("noisydml")), *arguments]
    command += [f"hydra.sweep.dir={sweep_dir}", "hydra.sweep.subdir=${hydra.job.num}"]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return {job_key(p.parent): job_record(p.parent) for p in sorted(sweep_dir.glob("*/results.json"))}


def run_all(work: Path, noisydml: str | None = None) -> dict:
    import torch

    outputs = {name: run_case(args, work / name, noisydml) for name, args in cases().items()}
    return {"torch": torch.__version__, "cases": outputs}


def differences(expected: dict, got: dict) -> list[str]:
    """One line per job or field that differs."""
    lines = []
    for case, jobs in expected["cases"].items():
        for key, record in jobs.items():
            other = got["cases"].get(case, {}).get(key)
            if other is None:
                lines.append(f"{case} {key}: missing")
                continue
            lines += [
                f"{case} {key}: {field} differs" for field in record if record[field] != other.get(field)
            ]
        lines += [f"{case} {key}: not expected" for key in got["cases"].get(case, {}) if key not in jobs]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with tests/golden/outputs.json")
    parser.add_argument("--noisydml", help="the noisydml command to run (default: this Python's)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        got = run_all(Path(work), args.noisydml)
    if args.check:
        lines = differences(json.loads(GOLDEN.read_text()), got)
        print("\n".join(lines) or "identical")
        sys.exit(1 if lines else 0)
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    print(f"{sum(len(j) for j in got['cases'].values())} jobs written to {GOLDEN.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
