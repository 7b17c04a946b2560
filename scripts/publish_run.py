"""Record what ``make run`` computed for the README: ``results/make_run/results.json``, the run's metrics,
selected epoch, numerics (mode, CPU, kernels), seed, versions and wall time (its paths left out), from the
run folder ``make publish-run`` wrote; scripts/readme_tables.py draws the README's block from it.

    python scripts/publish_run.py outputs/publish-run
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from noisydml.utils.run_directory import FINISHED

KEPT = ("status", "metrics", "selection", "numerics", "seed", "choices", "versions", "wall_time_s")
TARGET = Path("results") / "make_run" / "results.json"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    record = json.loads((Path(args[0]) / "results.json").read_text())
    if record.get("status") != FINISHED:
        print(f"{args[0]} did not finish (status {record.get('status')}): nothing recorded", file=sys.stderr)
        return 1
    kept = {key: record[key] for key in KEPT if key in record}
    kept["selection"] = {k: v for k, v in (kept.get("selection") or {}).items() if k != "checkpoint"}
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_text(json.dumps(kept, indent=2, sort_keys=True) + "\n")
    print(f"make run's record in {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
