"""``noisydml-eval ckpt_path=<checkpoint> [overrides]``: score a saved checkpoint without training, into a
run directory of its own with the same ``results.json`` fields as a trained run's.

A checkpoint in a run directory (``<run>/checkpoints/best.ckpt``) is built with that run's own overrides
(``.hydra/overrides.yaml``), so the network matches the weights; overrides given beside it apply after them
(``dataset=...`` to score it on another data set, ``metrics.recall_ks=[1,10]``). The scores land in
``outputs/evals/<name>/<time>/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from noisydml.run.checks.arguments import (
    check_arguments,
    check_evaluation_arguments,
    check_evaluation_folder,
)
from noisydml.run.checks.folders import check_checkpoint
from noisydml.run.cli import quoted, run_hydra, stored_overrides
from noisydml.utils.errors import BadInput
from noisydml.utils.run_directory import checkpoint_run

EVAL_DIR = "hydra.run.dir='outputs/evals/${name}/${now:%Y-%m-%d_%H-%M-%S_%f}'"


def eval_arguments(argv: list[str]) -> list[str]:
    """``argv`` with the checkpoint's run's stored overrides before it, the evaluation's own folder, and
    no resuming; refused when no ``ckpt_path=`` names a file."""
    given = [a.split("=", 1)[1] for a in argv if a.startswith("ckpt_path=")]
    if not given or given[-1] in ("", "null"):
        raise BadInput(
            "noisydml-eval needs ckpt_path=<a checkpoint>, "
            "e.g. ckpt_path=outputs/runs/.../checkpoints/best.ckpt"
        )
    checkpoint = check_checkpoint(given[-1])
    stored = []
    if (run_dir := checkpoint_run(checkpoint)) is not None:
        check_evaluation_arguments(argv, run_dir)
        given_keys = {a.split("=", 1)[0] for a in argv}
        stored = [
            o
            for o in stored_overrides(run_dir)
            if o.split("=", 1)[0] not in given_keys and not o.startswith("hydra.")
        ]
    rest = [a for a in argv if not a.startswith("ckpt_path=")]
    for given in (a.split("=", 1)[1].strip("'\"") for a in argv if a.startswith("hydra.run.dir=")):
        check_evaluation_folder(Path(given).expanduser(), checkpoint)
    folder = [] if any(a.startswith("hydra.run.dir=") for a in argv) else [EVAL_DIR]
    return [*stored, *rest, f"ckpt_path={quoted(checkpoint.resolve())}", "resume=never", *folder]


def main() -> None:
    """The ``noisydml-eval`` command."""
    try:
        arguments = eval_arguments(sys.argv[1:])
        check_arguments(arguments)
    except BadInput as error:
        sys.exit(str(error))
    sys.argv[1:] = arguments
    run_hydra()
