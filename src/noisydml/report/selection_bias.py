"""What selecting the checkpoint on the test split inflates: PRISM's code keeps the epoch of the best test
P@1; our runs keep the epoch of the best validation score. Runs with ``data.test_at_validation`` record
both: ``test/recall@1`` (validation-selected) and ``test_best_epoch/recall@1`` (the test split's best
epoch). Their difference, paired by run, is the inflation, never below zero (the test split's best epoch
scores at least as well as any other on it).

Per comparison group (``comparisons.is_comparison``), noise model and rate: each method's inflation over
its seeds, and every method's together, the mean over methods taken per seed first (methods of one seed
share the noisy labels, so the seeds stay the sample of the interval).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from noisydml.report.comparisons import SETTING_FIELDS, is_comparison
from noisydml.report.pairing import by_seed, interval_text
from noisydml.report.statistics import Paired, paired
from noisydml.report.tables import Group, csv_number, format_number, md_cell, pivot

VALIDATION_SELECTED = "test/recall@1"
TEST_SELECTED = "test_best_epoch/recall@1"
EVERY_METHOD = "every method (mean)"


@dataclass(frozen=True)
class Inflation:
    """``test_selected - validation_selected`` of one method (or ``EVERY_METHOD``) at one setting."""

    group: Group
    noise: str
    rate: Any
    method: str
    validation_selected: float
    test_selected: float
    result: Paired
    methods: int = 1


def inflations(groups: list[Group]) -> list[Inflation]:
    """Every comparison group's inflation per noise model, rate and method, and over its methods; groups
    whose runs did not score the test split at every validation give none."""
    found = []
    for group in filter(is_comparison, groups):
        if not any(TEST_SELECTED in r.metrics for r in group.runs):
            continue
        table = pivot(group, "noise.rate")
        by_noise: dict[str, list] = defaultdict(list)
        for row in table.rows:
            by_noise[str(row.choice("noise") or "")].append(row)
        for noise, rows in by_noise.items():
            for rate in table.columns:
                pooled_test: dict[str, list[float]] = defaultdict(list)
                pooled_val: dict[str, list[float]] = defaultdict(list)
                each = []
                for row in rows:
                    test, val = by_seed(row, rate, TEST_SELECTED), by_seed(row, rate, VALIDATION_SELECTED)
                    seeds = set(test) & set(val)
                    if not seeds:
                        continue
                    for seed in seeds:
                        pooled_test[seed].append(test[seed])
                        pooled_val[seed].append(val[seed])
                    each.append(_inflation(group, noise, rate, row.method, test, val))
                if not each:
                    continue
                test = {seed: float(np.mean(v)) for seed, v in pooled_test.items()}
                val = {seed: float(np.mean(v)) for seed, v in pooled_val.items()}
                found.append(_inflation(group, noise, rate, EVERY_METHOD, test, val, len(each)))
                found += sorted(each, key=lambda i: i.method.casefold())
    return found


def _inflation(
    group: Group, noise: str, rate: Any, method: str, test: dict, val: dict, methods: int = 1
) -> Inflation:
    seeds = set(test) & set(val)
    return Inflation(
        group,
        noise,
        rate,
        method,
        float(np.mean([val[s] for s in seeds])),
        float(np.mean([test[s] for s in seeds])),
        paired({s: test[s] for s in seeds}, {s: val[s] for s in seeds}),
        methods,
    )


def markdown(found: list[Inflation]) -> str:
    """A table per data set and noise model: a row per method, a column per noise rate."""
    if not found:
        return ""
    out = [
        "## Test-set selection (PRISM's practice) against ours\n",
        "Each cell: test Recall@1 of the checkpoint selected on the validation split (ours) → of the epoch "
        "with the best test Recall@1 (what selecting on the test split, as PRISM's code does, reports), in "
        "%, and the inflation, the paired difference over seeds with its 95% interval. The first row "
        "averages every method per seed first. test_selection.csv has every number.\n",
    ]
    by_setting: dict[tuple[str, str], list[Inflation]] = defaultdict(list)
    for i in found:
        by_setting[(i.group.dataset, i.noise)].append(i)
    for (dataset, noise), rows in by_setting.items():
        rates = list(dict.fromkeys(i.rate for i in rows))
        out += [
            f"### {dataset}, {noise} noise\n",
            "| method | " + " | ".join(f"noise.rate={rate}" for rate in rates) + " |",
            "|---" * (len(rates) + 1) + "|",
        ]
        cells: dict[str, dict[Any, Inflation]] = defaultdict(dict)
        for i in rows:
            cells[i.method][i.rate] = i
        for method, by_rate in cells.items():
            label = (
                f"{method}, {max(i.methods for i in by_rate.values())} methods"
                if method == EVERY_METHOD
                else method
            )
            texts = [_cell(by_rate[rate]) if rate in by_rate else "" for rate in rates]
            out.append("| " + " | ".join(md_cell(text) for text in [label, *texts]) + " |")
        out.append("")
    return "\n".join(out) + "\n"


def _cell(i: Inflation) -> str:
    return (
        f"{format_number(i.validation_selected, VALIDATION_SELECTED)} → "
        f"{format_number(i.test_selected, VALIDATION_SELECTED)}: {interval_text(i.result)} "
        f"(n={i.result.n_seeds})"
    )


FIELDS = (
    *SETTING_FIELDS,
    "method",
    "methods",
    "validation_selected",
    "test_selected",
    "inflation",
    "ci_low",
    "ci_high",
    "n_seeds",
    "interval",
)


def write_csv(found: list[Inflation], path: Path) -> Path:
    """One line per setting and method (and the mean over methods); numbers as fractions."""
    with Path(path).open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        for i in found:
            writer.writerow(
                {
                    "figure": i.group.figure,
                    "dataset": i.group.dataset,
                    "noise": i.noise,
                    "noise_rate": i.rate,
                    "method": i.method,
                    "methods": i.methods,
                    "validation_selected": csv_number(i.validation_selected),
                    "test_selected": csv_number(i.test_selected),
                    "inflation": csv_number(i.result.effect),
                    "ci_low": csv_number(i.result.ci_low),
                    "ci_high": csv_number(i.result.ci_high),
                    "n_seeds": i.result.n_seeds,
                    "interval": i.result.interval,
                }
            )
    return Path(path)
