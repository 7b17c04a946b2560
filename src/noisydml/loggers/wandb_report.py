"""A report on runs that logged to W&B, as a W&B artifact beside them.

``noisydml-report`` logs the report's folder (``report.md``, ``report.html``, ``figures/``, the CSVs) as an
artifact of type ``report``, from a run of job type ``report`` in each W&B project and group its runs
logged to (a sweep's ``<name>/<sweep folder>``), so that a sweep's group holds its report beside its runs.
W&B's mode is the runs' (:mod:`noisydml.loggers.wandb_mode`): offline without an account, the report's run
then in ``<report>/wandb/`` for ``wandb sync``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from noisydml.loggers.run_fields import wandb_group
from noisydml.loggers.wandb_mode import choose_wandb_mode
from noisydml.utils.quiet import quiet_wandb
from noisydml.utils.run_directory import RunDir

REPORT = "report"
# libyaml's loader where PyYAML was built with it: hydra.yaml is long and a sweep has many.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Place(NamedTuple):
    """Where a run logged to W&B."""

    entity: str | None
    project: str
    group: str


def wandb_places(run_dirs: Iterable[Path]) -> list[Place]:
    """Each W&B entity, project and group the runs in ``run_dirs`` logged to, once, in the order first met
    (from each run's ``results.json`` and ``.hydra/hydra.yaml``); runs that logged to no W&B add none."""
    places = []
    for run_dir in run_dirs:
        place = _place(RunDir(run_dir))
        if place is not None and place not in places:
            places.append(place)
    return places


def log_report(directory: Path, run_dirs: Iterable[Path]) -> list[str]:
    """Log the report in ``directory`` as an artifact in each of :func:`wandb_places`; return a line per
    W&B run logged, saying where (none when no run logged to W&B, or with ``WANDB_MODE=disabled``)."""
    places = wandb_places(run_dirs)
    mode = choose_wandb_mode() if places else "disabled"
    if mode == "disabled":
        return []
    quiet_wandb()
    import wandb

    name = re.sub(r"[^\w.-]", "-", f"{REPORT}-{directory.name}")
    # The report's own W&B runs (offline ones, for wandb sync) are not part of the report.
    files = [
        path
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.relative_to(directory).parts[0] != "wandb"
    ]
    lines = []
    for place in places:
        run = wandb.init(
            entity=place.entity,
            project=place.project,
            group=place.group,
            job_type=REPORT,
            name=f"{REPORT} {directory.name}",
            dir=directory,
        )
        artifact = wandb.Artifact(name, type=REPORT, description=f"noisydml-report's {directory}")
        for path in files:
            artifact.add_file(str(path), name=path.relative_to(directory).as_posix())
        run.log_artifact(artifact)
        upload = f"; upload it with: wandb sync {Path(run.dir).parent}" if mode == "offline" else ""
        run.finish()
        lines.append(f"W&B ({mode}): artifact {name} in project {place.project}, group {place.group}{upload}")
    return lines


def _place(run: RunDir) -> Place | None:
    config = (run.read_results() or {}).get("config") or {}
    loggers = config.get("logger") or {}
    logger = next(
        (
            node
            for node in loggers.values()
            if isinstance(node, Mapping) and str(node.get("_target_", "")).endswith("WandbLogger")
        ),
        None,
    )
    if logger is None:
        return None
    group = str(logger.get("group") or config.get("name"))
    hydra = {}
    if run.hydra_config.is_file():
        with run.hydra_config.open() as f:
            hydra = (yaml.load(f, Loader=_LOADER) or {}).get("hydra") or {}
    if hydra.get("mode") == "MULTIRUN":
        try:
            # The sweep's job folder, as the run named its group (sweep.subdir is an interpolation).
            subdir = OmegaConf.select(OmegaConf.create({"hydra": hydra}), "hydra.sweep.subdir")
            group = wandb_group(group, True, hydra["runtime"]["output_dir"], subdir)
        except (OmegaConfBaseException, KeyError, TypeError):
            pass
    return Place(logger.get("entity"), str(logger.get("project")), group)
