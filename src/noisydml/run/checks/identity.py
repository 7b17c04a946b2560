"""A run's identity is what ran: an experiment's labels (``name``, ``report.figure``, ``report.dataset``)
describe what its file composes, so a run that departs from it is refused under them (:func:`check_identity`)
unless it carries labels of its own (``name=`` and ``report.figure=``), which file it elsewhere.

Every key is part of what a run is, except those of :data:`FREE`: the replicate (``seed``) and where and how
a run runs, which cannot change what it computes. What the experiment fixes is read from it composed alone
(``experiment=<x>``) with the group options its sweep varies as the run chose them (a method brings its loss
and miner); what its sweep varies (``hydra.sweeper.params`` and ``grids``) takes the sweep's values, or those
its tuning declares (``tune.at``, and the keys ``tune.space`` searches for the run's method). A debug run
(``debug=``, a Lightning flag that runs part of the data) is recorded as no result, so it is not held to it.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterator
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.noisydml_sweeper.noisydml_sweeper import NoisydmlSweeper
from noisydml import CONFIG_DIR
from noisydml.run.checks.walk import ABSENT, given_keys, leaves, raw, shown, target_nodes
from noisydml.run.selection import debug_mode
from noisydml.utils.errors import BadInput
from noisydml.utils.method_names import PACKAGE_SOURCES, method_file, method_groups, methods, sources_of

# The groups whose option names what a run is: its data, its noise, its method (a loss and a miner). A
# departure in another group (optimizer=sgd) is named by the key it changes (optimizer._target_).
IDENTITY_GROUPS = ("dataset", "noise", "method", "loss", "miner", "backbone")
# The keys free under an experiment's labels: the replicate a report pairs runs by (``seed``; an
# experiment that sweeps it holds it to its values), and where and how a run runs, recorded beside its
# results but never changing what it computes: its folders and labels (name, figure, tags), logging and
# progress, the CPU threads and numerics mode, the accelerator, loader workers, checkpoints kept to
# resume, a saved embedding, a clock that ends it as ``stopped``, the weights it evaluates
# (``evaluated``) and what scripts/reproduce.py reads (``tune``). Several processes are not free: each
# draws its own batch.
FREE = (
    "seed",
    "name",
    "report.figure",
    "tags",
    "hydra",
    "paths",
    "resume",
    "resume_from",
    "cpu_threads",
    "numerics",
    "ckpt_path",
    "tune",
    "logger",
    "noise.cache_dir",
    "data.num_workers",
    "trainer.accelerator",
    "trainer.default_root_dir",
    "trainer.enable_progress_bar",
    "trainer.enable_model_summary",
    "trainer.log_every_n_steps",
    "trainer.benchmark",
    "trainer.deterministic",
    "trainer.plugins",
    "trainer.max_time",
    "module.channels_last",
    "module.compile",
    "callbacks.checkpoint",
    "callbacks.save_embeddings",
    "callbacks.model_summary",
)


def check_identity(cfg: DictConfig, choices: dict[str, str]) -> None:
    """Refuse a run of ``experiment=`` whose config departs from the experiment's in a key outside
    :data:`FREE`, or in a swept key off its sweep's values, unless the run carries labels of its own."""
    experiment = choices.get("experiment")
    if not experiment or debug_mode(cfg, choices):
        return
    searchpath = tuple(HydraConfig.get().searchpath) if HydraConfig.initialized() else ()
    swept = _experiment(str(experiment), (), searchpath)[2]
    # The groups the experiment sweeps (method=, noise=) as this run chose them: what they bring with them
    # (a method's loss and miner) is then the experiment's too.
    pinned = tuple((group, str(choices[group])) for group in sorted(swept) if choices.get(group) is not None)
    own, own_choices, _ = _experiment(str(experiment), pinned, searchpath)
    if all(raw(cfg, label, None) != raw(own, label, None) for label in ("name", "report.figure")):
        return
    # The experiment's labels the run still carries (a name given alone leaves it the figure).
    kept = [key for key in ("name", "report.figure") if raw(cfg, key, None) == raw(own, key, None)]
    labels = " and ".join(f"{key.split('.')[-1]} {_label(cfg, key)}" for key in kept)
    tune = raw(own, "tune", None) or {}
    tuned = (tune.get("space") or {}).get(choices.get("method")) or {}
    # The study's own settings (tune.at), at their values: a study's trial runs at them.
    at = {str(key): str(value) for key, value in (tune.get("at") or {}).items()}
    typed = given_keys()
    for key, values in swept.items():
        given = str(choices[key]) if key in choices else shown(OmegaConf.select(cfg, key, default=None))
        if key in at:
            values = (*values, at[key])
        if _number(given) not in {_number(v) for v in values}:
            if key not in typed:
                # Not given: a single run of a sweep has the config's value, which the sweep replaces.
                raise BadInput(
                    f"experiment={experiment} sweeps {key} over {_listed(values)}, which a single run leaves "
                    f"at the config's {key}={given}; run the experiment with -m, or give one of its values, "
                    f"e.g. {key}={values[0]}"
                )
            raise BadInput(
                f"experiment={experiment} sweeps {key} over {_listed(values)}, but {key}={given} was given, "
                f"which would file another run under the experiment's {labels}; choose one of them, or "
                "label the run as your own with name=<name> report.figure=<paper>/<what>"
            )
    for key in _seeded(own):
        if (ours := raw(cfg, key, None)) != raw(own, key, None):
            raise BadInput(
                f"experiment={experiment} draws {key} from seed (${{seed}}), but {key}={shown(ours)} was "
                f"given: the run would be filed at seed={raw(cfg, 'seed', None)} under the experiment's "
                f"{labels}, its {key.split('.')[0]} seeded otherwise; drop {key}={shown(ours)} (seed= sets "
                "it), or label the run as your own with name=<name> report.figure=<paper>/<what>"
            )
    for key, theirs, ours in _departures(cfg, choices, own, own_choices):
        # The experiment's sweep varies the key, or a group or node above it (noise frees noise.rate).
        parts = key.split(".")
        if any(".".join(parts[:i]) in swept for i in range(1, len(parts) + 1)) or key in tuned:
            continue
        if key in at and _number(shown(ours)) == _number(at[key]):
            continue
        what = f"sets no {key}" if theirs is ABSENT else f"is {key}={shown(theirs)}"
        given = f"~{key}" if ours is ABSENT else f"{key}={shown(ours)}"
        raise BadInput(
            f"experiment={experiment} {what}, but {given} was given, which would file another run under "
            f"the experiment's {labels}; drop {given} to run the experiment, or label the run as your own "
            "with name=<name> report.figure=<paper>/<what>"
        )


def _departures(
    cfg: DictConfig, choices: dict[str, str], own: DictConfig, own_choices: dict[str, Any]
) -> Iterator[tuple[str, Any, Any]]:
    """``(key, the experiment's value, the run's)`` for each key outside :data:`FREE` on which they
    differ, the group options first."""
    for group in IDENTITY_GROUPS:
        if str(choices.get(group)) != str(own_choices.get(group)):
            yield group, own_choices.get(group), choices.get(group)
    if str(choices.get("dataset")) != str(own_choices.get("dataset")):
        return
    theirs, ours = dict(_keys(own)), dict(_keys(cfg))
    for key in sorted(set(theirs) | set(ours)):
        if theirs.get(key, ABSENT) != ours.get(key, ABSENT):
            yield _outermost(key, own, cfg)


def _outermost(key: str, own: DictConfig, cfg: DictConfig) -> tuple[str, Any, Any]:
    """A departure at ``key`` named where it starts: the first key on its path that is not a mapping on
    both sides (``data.filter``, null in one and a node in the other), with both values there."""
    parts = key.split(".")
    for end in range(1, len(parts) + 1):
        at = ".".join(parts[:end])
        theirs, ours = raw(own, at), raw(cfg, at)
        if not (isinstance(theirs, dict) and isinstance(ours, dict)):
            return at, theirs, ours
    return key, raw(own, key), raw(cfg, key)


def _seeded(cfg: DictConfig) -> Iterator[str]:
    """The keys that follow ``seed`` (``${seed}``: the noise's, the sampler's), whose runs a report pairs by
    ``seed``: a run's must follow it as its experiment's do, whatever else the sweep varies."""
    for key, value in _keys(cfg):
        if value == "${seed}":
            yield key


def _keys(cfg: DictConfig) -> Iterator[tuple[str, Any]]:
    """``(dotted key, value as written)`` of every leaf of the config outside :data:`FREE`."""
    for section in cfg:
        if str(section) not in FREE:
            for key, value in leaves(raw(cfg, str(section)), str(section)):
                if not any(key == free or key.startswith(f"{free}.") for free in FREE):
                    yield key, value


def _listed(values: tuple[str, ...]) -> str:
    """A sweep's values as typed, or the first and last of many."""
    return ",".join(values) if len(values) <= 12 else f"{len(values)} values ({values[0]}, ..., {values[-1]})"


def _number(value: str) -> str:
    """A value as the sweep compares it: ``0.50`` and ``5e-1`` as ``0.5``."""
    try:
        return repr(float(value))
    except ValueError:
        return value


def _label(cfg: DictConfig, key: str) -> Any:
    """The run's label at ``key`` as it resolves (a protocol derives it from the experiment's name)."""
    try:
        return OmegaConf.select(cfg, key)
    except Exception:
        return raw(cfg, key, None)


@functools.cache
def _experiment(
    experiment: str, pinned: tuple[tuple[str, str], ...], searchpath: tuple[str, ...] = ()
) -> tuple[DictConfig, dict[str, Any], dict[str, tuple[str, ...]]]:
    """The experiment composed with nothing but the ``pinned`` group options of its sweep: its config, its
    group options and each key its sweep varies with the values it takes. ``searchpath``: the run's
    ``hydra.searchpath``, where the experiment and its options may be a user's."""
    overrides = [f"experiment={experiment}", *(f"{group}={option}" for group, option in pinned)]
    if searchpath:
        overrides.append(f"hydra.searchpath=[{','.join(searchpath)}]")
    if GlobalHydra.instance().is_initialized():
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    else:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose("config", overrides=overrides, return_hydra_config=True)
    choices = dict(cfg.hydra.runtime.choices)
    params = OmegaConf.select(cfg, "hydra.sweeper.params", default=None) or {}
    grids = OmegaConf.select(cfg, "hydra.sweeper.grids", default=None) or {}
    swept: dict[str, tuple[str, ...]] = {}
    # A key of several grids takes the values of each (a comparison's focused and exploratory methods).
    for sweep in (params, *(grid for grid in grids.values() if grid is not None)):
        for key, value in sweep.items():
            values = (job[0].split("=", 1)[1] for job in NoisydmlSweeper.expand({key: value}, []))
            name = str(key).lstrip("+~")
            swept[name] = tuple(dict.fromkeys((*swept.get(name, ()), *values)))
    return cfg, choices, swept


def check_method(cfg: DictConfig, choices: dict[str, str]) -> None:
    """A method (``method=``, the package's or one on the run's search path) is its groups' options
    (``override /loss: bspml``): one of them replaced on the command line would record another method's
    run under the method's name, so it is refused. The baselines a report compares the run's method with
    (``report.baselines``) are methods."""
    sources = (
        sources_of(HydraConfig.get().runtime.config_sources) if HydraConfig.initialized() else PACKAGE_SOURCES
    )
    baselines = OmegaConf.select(cfg, "report.baselines", default=None) or []
    known = methods(sources) if baselines else []
    for baseline in baselines:
        if str(baseline) not in known:
            close = difflib.get_close_matches(str(baseline), known, n=1)
            raise BadInput(
                f"report.baselines names {baseline}, which is no method= option (a report compares the run's "
                f"method with its baselines' runs by that name); give method names, e.g. "
                f"report.baselines=[{close[0] if close else known[0]}]"
            )
    method = choices.get("method")
    if not method:
        return
    for group, option in method_groups(method, sources).items():
        given = str(choices.get(group, option))
        if given != option:
            raise BadInput(
                f"method={method} is {group}={option}, but {group}={given} was given, which would record "
                f"a {given} run as {method}; drop {group}={given} to run the method, or drop method= to "
                f"run {group}={given} on its own"
            )
    # An object the method's file builds beside its groups' (the kNN filter's data.filter): removed or
    # built from another class, the run is no run of the method (its settings stay the run's to tune).
    for path, own in target_nodes(OmegaConf.create(method_file(method, sources))):
        target, node = str(own["_target_"]), raw(cfg, path, None)
        built = node.get("_target_") if isinstance(node, (dict, DictConfig)) else None
        if str(built) != target:
            given = f"{path}._target_={built}" if built is not None else f"{path}={shown(node)}"
            raise BadInput(
                f"method={method} builds {path} ({target.rsplit('.', 1)[-1]}), but {given} was given, which "
                f"would record a run without it as {method}; drop {given} to run the method, or drop method= "
                "to run without it"
            )
