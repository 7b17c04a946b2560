"""What a dashboard filters, groups and names runs by, from a run's config or its ``results.json`` (or, in
a running job, Hydra's record of it).

The resolved config has ~130 nested keys (every ``_target_``, every path) but not the choices a user thinks
in: these flat keys are those choices. The loggers write them at the top of a run's config, and
``noisydml-dashboard`` reads them from ``results.json`` of runs that logged nowhere but CSV, so a run looks
the same whichever way it reached a dashboard.

A run's method is named as the report names it (:func:`noisydml.utils.method_names.method_label`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from noisydml.utils.method_names import method_label

# Groups whose option is a choice a user makes per run (the rest, e.g. metrics=default, rarely change).
CHOICE_GROUPS = ("dataset", "backbone", "loss", "miner", "noise", "experiment")
# Overrides that say where or how a run logs, not what it computes: left out of its readable name.
UNNAMED_PREFIXES = (
    "hydra.",
    "hydra/",
    "paths.",
    "logger",
    "resume",
    "trainer.enable_progress_bar",
    "cpu_threads",
)


def choice_keys(config: Mapping, choices: Mapping[str, str | None]) -> dict:
    """The flat keys a run is filtered and grouped by: the option of each choice group (``loss: triplet``),
    the noise rate, the method's label and the seed."""
    keys = {group: choices.get(group) for group in CHOICE_GROUPS}
    noise = config.get("noise") or {}
    keys["noise_rate"] = noise.get("rate") if isinstance(noise, Mapping) else None
    keys["method"] = method_label(config, choices)
    keys["seed"] = config.get("seed")
    return keys


def logged_config(config: Mapping, choices: Mapping[str, str | None]) -> dict:
    """What a run hands its loggers: the flat choice keys at the top, where a dashboard's table filters
    and groups by them, and the whole resolved config under ``cfg``."""
    return {**choice_keys(config, choices), "cfg": dict(config)}


def run_name(overrides: Sequence[str], default: str) -> str:
    """A run's readable name: its own overrides (``miner=fixed_semihard noise.rate=0.4``), without those
    that only say where or how it logs; ``default`` (the config's ``name``) for a run of the defaults."""
    kept = [o for o in overrides if not o.lstrip("+~").startswith(UNNAMED_PREFIXES)]
    return " ".join(kept) or default


def job_name(default: str) -> str:
    """The running job's readable name, :func:`run_name` of its overrides in Hydra's record; ``default``
    where Hydra has none (a config composed in Python)."""
    if not HydraConfig.initialized():
        return default
    # As typed: an interpolation given as a value stays its text.
    return run_name(OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False), default)


def summary_fields(
    status: str,
    selection: Mapping | None = None,
    noise: Mapping | None = None,
    wall_time_s: float | None = None,
) -> dict:
    """The fields that say which checkpoint a run's test metrics came from and how the run went: the
    selected epoch (counted from 1, as the epoch lines are), the realised noise rate, the status and the
    wall time. Keys whose value the run never reached are left out."""
    fields = {"status": status}
    if selection and selection.get("epoch") is not None:
        fields["selected_epoch"] = int(selection["epoch"]) + 1
    if noise and noise.get("realized_rate") is not None:
        fields["realized_noise_rate"] = float(noise["realized_rate"])
    if wall_time_s is not None:
        fields["wall_time_s"] = float(wall_time_s)
    return fields


def wandb_group(group: str, multirun: bool, output_dir: str | Path, subdir: str | Path) -> str:
    """The W&B group of a run whose config says ``group``: that for a single run, ``<group>/<sweep
    folder's name>`` for a job of a sweep, whose folder is ``output_dir`` (``<sweep dir>/<subdir>``)."""
    return f"{group}/{sweep_folder(output_dir, subdir).name}" if multirun else group


def sweep_folder(output_dir: str | Path, subdir: str | Path) -> Path:
    """The sweep's folder of a sweep job whose folder is ``<sweep dir>/<subdir>``; ``subdir`` may have
    several parts (``method=le2019/triplet`` names a job folder inside a folder)."""
    return Path(output_dir).parents[len(Path(subdir).parts) - 1]
