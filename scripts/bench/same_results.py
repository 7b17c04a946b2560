"""The same sweep run by two versions: every job's results.json (status, metrics, selection, noise,
validation, config, choices, seed, numerics) and its csv/metrics.csv, labels.csv and validation.csv must be
identical, value for value. The sweep folders' own names are the only text allowed to differ.

    python scripts/bench/same_results.py SWEEP_BEFORE SWEEP_AFTER    # exit status 1 on any difference
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

FIELDS = ("status", "metrics", "selection", "noise", "validation", "config", "choices", "seed", "numerics")
FILES = ("csv/metrics.csv", "labels.csv", "validation.csv")


def differences(before: Path, after: Path) -> tuple[int, list[str]]:
    """How many jobs ``before`` holds, and every field or file of one that ``after`` does not match."""
    jobs = sorted(p.parent.relative_to(before) for p in before.rglob("results.json"))
    found = []
    for job in jobs:
        records = [
            json.loads((root / job / "results.json").read_text().replace(str(root), "SWEEP"))
            for root in (before, after)
        ]
        found += [f"{job}: {key}" for key in FIELDS if records[0].get(key) != records[1].get(key)]
        for name in FILES:
            contents = [
                (root / job / name).read_bytes() if (root / job / name).exists() else None
                for root in (before, after)
            ]
            if contents[0] != contents[1]:
                found.append(f"{job}: {name}")
    return len(jobs), found


def main() -> int:
    before, after = (Path(a) for a in sys.argv[1:3])
    jobs, found = differences(before, after)
    for line in found:
        print(f"differs: {line}")
    print(f"{jobs} jobs compared, {len(found)} differences")
    return 1 if found or not jobs else 0


if __name__ == "__main__":
    sys.exit(main())
