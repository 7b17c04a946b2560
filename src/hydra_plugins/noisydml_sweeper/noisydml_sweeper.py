"""Hydra's basic sweep (the cartesian product of the comma-separated overrides, ``hydra.sweeper.params``
first, jobs in the same order and numbered alike), every job checked before any job runs, and each job
composed from the configs merged for its group choices (:mod:`~hydra_plugins.noisydml_sweeper.composition`).

Hydra's basic sweeper composes every job's config once to check that it composes before launching, and the
launcher composes it again to run it: two full compositions a job, a tenth of a small job's CPU time
(``scripts/bench/small_jobs.py``). This one checks each job's values too, as the run's pre-flight does before
building anything (``noise.rate=0.1,abc`` stops the sweep before its first job trains), from the configs
merged once per set of group choices; jobs that differ only in their seed are composed and checked once,
their seeds by the seed's rule. Interval and range sweeps (an Optuna search space) are the Optuna sweeper's.

``hydra.sweeper.grids`` runs several products in one sweep: each named grid's keys over ``params``, one grid
after another, so that one experiment can sweep two sets of methods at two lists of seeds (a comparison's
focused methods at its registered seeds, the others at five). A child experiment changes one grid by name
(``hydra.sweeper.grids.focused.seed``), or drops one (``hydra.sweeper.grids.focused=null``: a grid
traded for a budget, or run in another process); a job two grids both give runs once.
"""

import itertools
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, RangeSweep
from hydra.core.plugins import Plugins
from hydra.errors import HydraException
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

from hydra_plugins.noisydml_sweeper.composition import ComposedOnce
from noisydml.utils.errors import BadInput

log = logging.getLogger(__name__)

# The sweepers whose jobs are the product of the overrides' values (``NoisydmlSweeper.jobs``): Hydra's basic
# one and this one.
PRODUCT_SWEEPERS = (
    "hydra._internal.core_plugins.basic_sweeper.BasicSweeper",
    "hydra_plugins.noisydml_sweeper.noisydml_sweeper.NoisydmlSweeper",
)


@dataclass
class NoisydmlSweeperConf:
    _target_: str = "hydra_plugins.noisydml_sweeper.noisydml_sweeper.NoisydmlSweeper"
    max_batch_size: int | None = None
    params: dict[str, str] | None = None
    # Each a mapping like params, or null (dropped); typed loosely so that a child experiment can change one
    # key of a grid (OmegaConf cannot merge into a typed optional mapping of mappings).
    grids: dict[str, Any] | None = None


ConfigStore.instance().store(
    group="hydra/sweeper", name="noisydml", node=NoisydmlSweeperConf, provider="noisydml"
)


class NoisydmlSweeper(Sweeper):
    def __init__(
        self,
        max_batch_size: int | None = None,
        params: dict[str, str] | None = None,
        grids: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.max_batch_size = max_batch_size
        self.params = params or {}
        self.grids = grids or {}
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.launcher = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        hydra_context = HydraContext(
            config_loader=ComposedOnce(hydra_context.config_loader), callbacks=hydra_context.callbacks
        )
        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        try:
            jobs = self.expand(self.params, arguments, parser, self.grids)
            # Before the sweep's folder is written: a sweep refused leaves nothing to continue.
            self.validate_batch_is_legal(jobs)
        except BadInput as bad:
            # One line, as a single run's refusal: Hydra would add its HYDRA_FULL_ERROR hint.
            if os.environ.get("HYDRA_FULL_ERROR"):
                raise
            sys.exit(str(bad))
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        size = self.max_batch_size if self.max_batch_size not in (None, -1) else max(len(jobs), 1)
        if size < 1:
            raise HydraException(f"hydra.sweeper.max_batch_size={size} must be a positive number of jobs")
        returns = []
        for start in range(0, len(jobs), size):
            results = self.launcher.launch(jobs[start : start + size], initial_job_idx=start)
            for result in results:
                # Reading it raises a job's error, as Hydra's basic sweeper does.
                _ = result.return_value
            returns.append(results)
        return returns

    @staticmethod
    def expand(
        params: Mapping[str, Any],
        arguments: Sequence[str],
        parser: OverridesParser | None = None,
        grids: Mapping[str, Mapping[str, Any] | None] | None = None,
    ) -> list[list[str]]:
        """The jobs of a sweep of ``params`` (``hydra.sweeper.params``) and the command line's ``arguments``:
        the params first, the command line after them (:meth:`jobs`). With ``grids``
        (``hydra.sweeper.grids``), each grid's jobs in turn, its keys over the params' (in their place, new
        keys after them), a job already given by an earlier grid left out. What a sweep ran can be expanded
        again from its multirun.yaml (the report, the interrupted-sweep summary) with the same order."""
        parser = parser or OverridesParser.create()
        found: list[list[str]] = []
        kept = [grid for grid in (grids or {}).values() if grid is not None]
        for grid in kept if grids else [{}]:
            merged = {**params, **grid}
            given = [*(f"{k}={v}" for k, v in merged.items()), *arguments]
            earlier = {tuple(job) for job in found}
            found += [
                job
                for job in NoisydmlSweeper.jobs(parser.parse_overrides(given))
                if tuple(job) not in earlier
            ]
        return found

    @staticmethod
    def expand_sweeper(sweeper: Mapping[str, Any], arguments: Sequence[str], parser=None) -> list[list[str]]:
        """:meth:`expand` of a sweeper's config node (multirun.yaml's ``hydra.sweeper``)."""
        return NoisydmlSweeper.expand(
            sweeper.get("params") or {}, arguments, parser, sweeper.get("grids") or None
        )

    @staticmethod
    def jobs(overrides: list[Override]) -> list[list[str]]:
        """Each job's overrides: the product of every override's values, the later override of a key
        replacing an earlier one in its place (as Hydra's basic sweeper orders them)."""
        values: dict[str, list[str]] = {}
        for override in overrides:
            key = override.get_key_element()
            if not override.is_sweep_override():
                values[key] = [f"{key}={override.get_value_element_as_str()}"]
            elif override.is_discrete_sweep():
                values[key] = [f"{key}={value}" for value in sweep_values(override)]
            else:
                raise BadInput(
                    f"{key}: the noisydml sweeper does not support sweep type {override.value_type.name} "
                    "(it takes comma-separated values, range() and choice()); use hydra/sweeper=optuna"
                )
        return [list(job) for job in itertools.product(*values.values())]

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        """Compose each job (from the configs merged for its group choices) and check its values as its
        run's pre-flight does before building anything (:func:`noisydml.run.checks.config.check_job`), so
        that a job that cannot be composed, or a bad value of a later job, stops the sweep before the first
        job runs; the refusal names the job. Jobs that run on this machine (the basic launcher) are checked
        against their data too, as their run's pre-flight checks them once built (``data.K`` against the
        classes' sizes, the first batch through loss and miner). Jobs that differ only in their seed are
        composed once: a seed changes no rule but its own range, checked for each."""
        from noisydml.run.checks.config import check_job, check_seed
        from noisydml.utils.quiet import silence_known_noise

        assert self.hydra_context is not None and self.config is not None
        silence_known_noise()
        loader = self.hydra_context.config_loader
        parser = OverridesParser.create(config_loader=loader)
        checked, seeds = set(), {}
        # Jobs on this machine are checked against their data too (a cluster's may lie on its nodes only).
        local = type(self.launcher).__name__ == "BasicLauncher"
        for number, overrides in enumerate(batch):
            # A job's overrides are "key=value" lines (jobs()); Hydra's grammar reads a seed's value once.
            seed = [o for o in overrides if o.startswith("seed=")]
            others = tuple(o for o in overrides if not o.startswith("seed="))
            try:
                if others in checked and seed:
                    if seed[-1] not in seeds:
                        seeds[seed[-1]] = parser.parse_overrides(seed[-1:])[0].value()
                    check_seed(seeds[seed[-1]])
                else:
                    checked.add(others)
                    check_job(loader.load_sweep_config(self.config, list(overrides)), data=local)
            except BadInput as bad:
                raise BadInput(
                    f"job {number} ({' '.join(overrides)}), before any job of the sweep ran: {bad}"
                ) from None
        self._check_folders(batch, loader)

    def _check_folders(self, batch: Sequence[Sequence[str]], loader: Any) -> None:
        """Each job writes a folder of its own (``hydra.sweep.subdir``, as its job will resolve it): two in
        one would have the second refused there as another config's run after the first trained, or skipped
        as the same run (a repeated value, ``seed=0,0``) and counted twice."""
        assert self.config is not None
        subdir = OmegaConf.to_container(self.config.hydra.sweep, resolve=False).get("subdir")
        named = self.config.hydra.job.config.override_dirname
        folders: dict[str, int] = {}
        for number, overrides in enumerate(batch):
            if subdir == "${hydra.job.override_dirname}":
                # Hydra's get_overrides_dirname, on the "key=value" lines jobs() gives.
                kept = sorted(
                    o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in named.exclude_keys
                )
                folder = named.item_sep.join(kept).replace("=", named.kv_sep)
            else:
                job = loader.load_sweep_config(self.config, list(overrides))
                with open_dict(job):
                    job.hydra.job.num = number
                folder = str(job.hydra.sweep.subdir)
            if (first := folders.setdefault(folder, number)) == number:
                continue
            shown = " ".join(batch[number])
            if sorted(batch[first]) == sorted(batch[number]):
                raise BadInput(
                    f"job {number} ({shown}) repeats job {first}: the same run twice, which would be skipped "
                    "as done and counted twice; give each value once"
                )
            raise BadInput(
                f"jobs {first} and {number} ({shown}) would write one folder, {folder} (hydra.sweep.subdir="
                f"{subdir}), where the second is refused as another config's run after the first trained; "
                "name each job's folder by what differs: drop hydra.sweep.subdir (named by the overrides), "
                "or 'hydra.sweep.subdir=${hydra.job.num}'"
            )


def sweep_values(override: Override) -> list[str]:
    """A swept override's values; refused when it has none (``range(0,0)``, a step of 0), which would make
    a sweep of no job that ends at once, saying nothing."""
    key = override.get_key_element()
    given = override.input_line or key
    try:
        values = list(override.sweep_string_iterator())
    except ValueError as error:
        raise BadInput(
            f"{given} cannot be expanded ({error}); e.g. {key}=range(0,5) or {key}=0,1,2"
        ) from None
    if not values:
        raise BadInput(
            f"{given} expands to no value, so the sweep would run no job; give at least one, e.g. "
            f"{key}=range(0,5) or {key}=0,1,2"
        )
    if isinstance(sweep := override.value(), RangeSweep) and any("." in v for v in values):
        # A float range adds its step in binary: 0.1 + 0.2 is 0.30000000000000004, which would name the job's
        # folder and be recorded as another setting than 0.3, and its end may come out below its stop.
        rounded = [round(float(v), 12) for v in values]
        stop, rising = round(float(sweep.stop), 12), float(sweep.step) > 0
        values = [repr(v) for v in rounded if (v < stop if rising else v > stop)]
    return values
