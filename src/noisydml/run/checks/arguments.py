"""The command line, before Hydra starts or writes anything: an override it cannot parse, an unknown group
option (with the closest one), a run's value override on a key its config lacks (with the closest one), a
sweep's values given without ``-m``, a sweep value list that is empty, a ``name=`` that is too long for a
folder or leads out of ``outputs/runs/``, a run or sweep folder that cannot be written or lies in another
run's, and a search's arguments. This module loads no torch: the command line runs it before the numerics are
chosen (:mod:`noisydml.numerics`)."""

from __future__ import annotations

import difflib
import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.object_type import ObjectType
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException, OverrideParseException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.noisydml_sweeper.composition import ComposedOnce
from hydra_plugins.noisydml_sweeper.noisydml_sweeper import sweep_values
from noisydml import CONFIG_DIR
from noisydml.run.checks.folders import check_folder_argument
from noisydml.run.checks.walk import ABSENT
from noisydml.utils.checks import check_writable
from noisydml.utils.errors import BadInput
from noisydml.utils.metric_names import better
from noisydml.utils.run_directory import RunDir, is_run

# The longest file name most file systems take: name= is a folder of the run's path.
NAME_MAX = 255
# What only a sweep reads: without -m Hydra ignores it without a word.
SWEEP_GROUPS = ("hydra/launcher", "hydra/sweeper")
SWEEP_KEYS = ("hydra.launcher", "hydra.sweeper")
# Hydra's settings a run relies on (conf/hydra/default.yaml), each with the value it must keep and why.
HYDRA_FIXED = {
    "hydra.output_subdir": (
        "null",
        "a run writes its .hydra/ itself, once its folder is known to hold no other run's files",
    ),
    "hydra.job.chdir": (
        "false",
        "a run reads the config's relative paths (data, outputs, caches) from the folder it started in",
    ),
}


def check_arguments(argv: list[str]) -> None:
    """The overrides (the module's list but a search's), refused in one line before Hydra starts, where it
    would refuse them with a traceback or a list, or accept them and fail later."""
    parser = OverridesParser.create()
    sweep = any(a in SWEEP_FLAGS for a in argv)
    # The longest "key=value" of each override a sweep job's folder is named by (conf/hydra/default.yaml).
    job_name_parts = []
    # How many jobs the command line's own sweeps make (an experiment's sweep is its own).
    jobs = 1
    # The overrides that do not name a sweep job's folder, as conf/hydra/default.yaml lists them.
    hydra_config = yaml.safe_load((CONFIG_DIR / "hydra" / "default.yaml").read_text())
    excluded = hydra_config["job"]["config"]["override_dirname"]["exclude_keys"]
    for argument in (a for a in argv if "=" in a and not a.startswith("-")):
        try:
            (override,) = parser.parse_overrides([argument])
        except OverrideParseException as error:
            raise BadInput(
                f"{argument} cannot be read ({str(error).splitlines()[0]}); {_unread(argument, argv)}"
            ) from None
        key = override.key_or_group
        try:
            values = (
                sweep_values(override)
                if override.is_sweep_override()
                else [override.get_value_element_as_str()]
            )
        except BadInput:
            raise
        except HydraException:
            # An interval (an Optuna search space) has no values to list; its sweeper checks it.
            continue
        named = values
        if not key.startswith("hydra"):
            jobs *= len(named)
        if isinstance(override.value(), list):
            # Several options of one group at once (logger=[csv,wandb,mlflow]): each must be one.
            values = [str(v) for v in override.value()]
        if (CONFIG_DIR / key).is_dir() and not key.startswith("hydra") and not override.is_delete():
            for value in values:
                _check_option(key, value, argv)
        if override.is_sweep_override() and not sweep:
            # Hydra refuses it over four lines, naming three readings; the run means one of them.
            raise BadInput(
                f"{argument} is a sweep over {key}'s values, which runs only with -m: noisydml -m "
                f"{argument} ...; for one run give one value (a list is {key}=[a,b], a string with commas "
                f"\"{key}='a,b'\")"
            )
        if not sweep and (key in SWEEP_GROUPS or key.startswith(tuple(f"{k}." for k in SWEEP_KEYS))):
            raise BadInput(
                f"{argument} is read only by a sweep (its sweeper or launcher), and this command runs one "
                f"job without one: run it as a sweep with -m, e.g. noisydml -m {argument} ..., or drop it"
            )
        if key in HYDRA_FIXED and any(v.lower() not in (HYDRA_FIXED[key][0], "none") for v in values):
            kept, why = HYDRA_FIXED[key]
            raise BadInput(f"{argument} is not a setting noisydml runs with: {why}; drop it ({key}={kept})")
        if key == "name" and any(not v.strip() or not Path(v).parts for v in values):
            # name=. and name=./ name no folder either: the run would land in outputs/runs/<time>.
            empty = "is empty" if any(not v.strip() for v in values) else "names no folder"
            raise BadInput(
                f"{argument} {empty}, but a run's folder is outputs/runs/<name>/<time> and its report and "
                "W&B group go by it: the run would land among the names' folders; give a name, e.g. "
                "name=mylab"
            )
        if key == "name" and any(Path(v).is_absolute() or ".." in Path(v).parts for v in values):
            raise BadInput(
                f"name={values[0]} leads out of outputs/runs/, where a run's folder is <name>/<time>: its "
                "files would land beside or over other runs'; give a name without '..' or a leading '/'"
            )
        if key == "name" and sweep and "${" in argument:
            raise BadInput(
                f"{argument} is resolved by each job of the sweep with its own values, but the "
                "sweep's folder, outputs/sweeps/<name>/, is named once: the jobs would scatter over "
                "folders apart from their sweep's; give a plain name=, the job folders tell the values apart"
            )
        if key == "hydra/launcher" and sweep and "slurm" in values:
            _check_cluster()
        if key == "name" and any(len(v.encode()) > NAME_MAX for v in values):
            raise BadInput(
                f"name={values[0][:40]}... is longer than the {NAME_MAX} bytes a folder name may have (runs "
                "go in outputs/runs/<name>/); use a shorter name="
            )
        if key in ("hydra.run.dir", "hydra.sweep.dir") and not override.is_sweep_override():
            check_writable(Path(values[0]).expanduser(), key, f"{key}=...", keep=False)
            # The value itself, unquoted ('a,b=c' names a sweep job's folder).
            check_folder_argument(key, Path(str(override.value())).expanduser())
        if not key.startswith("hydra") and key not in excluded:
            prefix = argument[: len(argument) - len(argument.lstrip("+~"))]
            job_name_parts.append(max(len(f"{prefix}{key}={v}".encode()) for v in named or [""]))
    _check_job_folder_name(argv, job_name_parts, sweep)
    _check_sweep_subdir(argv, sweep, jobs)
    _check_keys(argv)


def _unread(argument: str, argv: list[str]) -> str:
    """The fix for an override Hydra's grammar cannot read: a tuple is a list to Hydra, a list the shell
    split at its spaces is one argument, anything else quoted for Hydra."""
    key, value = argument.split("=", 1)
    if value.startswith("(") and value.endswith(")"):
        return f"Hydra writes a sequence as a list: {key}=[{value[1:-1]}]"

    def opened(text: str) -> int:
        return sum(text.count(o) - text.count(c) for o, c in ("[]", "{}"))

    if opened(value) > 0:
        later = argv[argv.index(argument) + 1 :]
        for end in range(1, len(later) + 1):
            if opened(" ".join([value, *later[:end]])) <= 0:
                parts = [value, *later[:end]]
                return (
                    f"the shell split '{key}={' '.join(parts)}' at its spaces; write it without them, "
                    f"{key}={''.join(parts)}, or quote the whole argument"
                )
        shut = "]" * max(value.count("[") - value.count("]"), 0) + "}" * max(
            value.count("{") - value.count("}"), 0
        )
        return f"it opens a list or node it does not close; e.g. {key}={value.rstrip(',')}{shut}"
    return f"quote a value with spaces, brackets or non-ASCII characters for Hydra, e.g. \"{key}='{value}'\""


def _check_cluster() -> None:
    """``hydra/launcher=slurm`` submits each job with ``sbatch`` to a SLURM controller: both answer here."""
    reason = "sbatch is not on PATH" if shutil.which("sbatch") is None else None
    if reason is None:
        try:
            found = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=60)
            said = (found.stderr or found.stdout).strip().splitlines() or [f"exit {found.returncode}"]
            reason = f"no SLURM controller answers ({said[-1]})" if found.returncode else None
        except (OSError, subprocess.TimeoutExpired) as error:
            reason = f"no SLURM controller answers ({error})"
    if reason is not None:
        raise BadInput(
            f"hydra/launcher=slurm submits the sweep's jobs to a SLURM cluster, but {reason}; run the sweep "
            "where SLURM is (a cluster's login node), or drop hydra/launcher=slurm to run the jobs here"
        )


def _check_job_folder_name(argv: list[str], parts: list[int], sweep: bool) -> None:
    """In a sweep each job's folder is named by its overrides: refuse a sweep whose longest job folder name
    no file system takes, before any job runs (it failed with a traceback as the first job started)."""
    named_otherwise = any(a.startswith("hydra.sweep.subdir=") for a in argv)
    longest = sum(parts) + max(len(parts) - 1, 0)
    if sweep and not named_otherwise and longest > NAME_MAX:
        raise BadInput(
            f"a sweep job's folder is named by its overrides, and the longest would be {longest} bytes, more "
            f"than the {NAME_MAX} a folder name may have; name the job folders by number with "
            "'hydra.sweep.subdir=${hydra.job.num}', or shorten the overrides"
        )


def _check_sweep_subdir(argv: list[str], sweep: bool, jobs: int) -> None:
    """Each job of a sweep writes a folder of its own: a ``hydra.sweep.subdir`` that interpolates nothing
    names one folder for every job of a sweep the command line gives several (``jobs``)."""
    given = [a.split("=", 1)[1] for a in argv if a.startswith("hydra.sweep.subdir=")]
    if sweep and given and "${" not in given[-1] and jobs > 1:
        raise BadInput(
            f"hydra.sweep.subdir={given[-1]} names every job's folder the same, so the sweep's {jobs} jobs "
            "would share one (the second refused there as another run's, or skipped as finished); name each "
            "by its number or its overrides, e.g. 'hydra.sweep.subdir=${hydra.job.num}', or drop it"
        )


def _check_keys(argv: list[str]) -> None:
    """A run's value overrides, each on a key its composed config has (a typo without ``+`` is refused in one
    line naming the keys there: :func:`~hydra_plugins.noisydml_sweeper.composition.no_such_key`), composed
    as the sweeper composes a job. For a sweep, its config without the swept overrides (which Hydra composes
    first) and its first job; the sweeper composes and checks every job so again. A search's key pinned to
    one value is refused (:func:`_check_searched`). Anything else Hydra refuses it says itself."""
    given = [a for a in argv if ("=" in a or a.startswith("~")) and not a.startswith("-")]
    parsed = OverridesParser.create().parse_overrides(given)
    if any(o.is_sweep_override() and not o.is_discrete_sweep() for o in parsed):
        return
    task = [(a, o) for a, o in zip(given, parsed, strict=True) if not o.is_hydra_override()]
    unswept = [a for a, o in task if not o.is_sweep_override()]
    first = [f"{o.get_key_element()}={sweep_values(o)[0]}" if o.is_sweep_override() else a for a, o in task]
    hydra_overrides = _searchpath(tuple(argv)) + [
        a for a, o in zip(given, parsed, strict=True) if o.is_hydra_override() and not _is_searchpath(a)
    ]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        loader = ComposedOnce(GlobalHydra.instance().config_loader())
        for overrides in [unswept, first] if first != unswept else [first]:
            try:
                cfg = loader.compose("config", hydra_overrides, overrides) if overrides else None
            except BadInput:
                raise
            except Exception:
                return
            if cfg is not None and overrides == unswept:
                _check_searched(cfg, parsed)


def _check_searched(cfg: DictConfig, given: list) -> None:
    """A search (a sweeper with a ``direction``: Optuna's) over a key the command line gives one value: the
    sweeper takes the value as fixed and drops the key from the search, so every trial would run it and
    the study would choose among runs alike."""
    sweeper = OmegaConf.select(cfg, "hydra.sweeper", default=None)
    if not isinstance(sweeper, DictConfig) or "direction" not in sweeper or not sweeper.get("params"):
        return
    for override in given:
        key = override.get_key_element()
        if key in sweeper.params and not override.is_sweep_override() and not override.is_hydra_override():
            space = sweeper.params[key]
            raise BadInput(
                f"the search (hydra.sweeper.params) searches {key} over {space}, but {override.input_line} "
                f"pins it: every trial would run {key}={override.get_value_element_as_str()}, and the study "
                f"would choose among runs alike; drop {override.input_line}, or search other values, e.g. "
                f"'{key}={space}'"
            )


def _check_option(group: str, option: str, argv: list[str]) -> None:
    """``group=option`` names a config of the package's ``conf/`` or of a folder the command line adds to
    Hydra's search path (``hydra.searchpath=[...]``, ``--config-dir``), as Hydra will look for it."""
    if option == "null" or (CONFIG_DIR / group / f"{option}.yaml").is_file():
        return
    options = group_options(group, tuple(argv))
    if option in options:
        return
    close = difflib.get_close_matches(option, options, n=1, cutoff=0.5)
    hint = f"; did you mean {group}={close[0]}?" if close else ""
    shown = ", ".join(options) if len(options) <= 20 else f"the {len(options)} files of conf/{group}/"
    raise BadInput(f"{group}={option} is not an option{hint} (options: {shown})")


@functools.cache
def group_options(group: str, argv: tuple[str, ...]) -> list[str]:
    """The options of ``group`` on Hydra's search path as the command line ``argv`` sets it: the package's
    ``conf/``, then ``hydra.searchpath`` (the command line's, else the primary config's) and a
    ``--config-dir`` folder."""
    overrides = _searchpath(argv)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()

        def options(path: str) -> list[str]:
            # A folder inside a group holds options too: method=le2019/triplet.
            listed = loader.get_group_options(path, ObjectType.CONFIG, "config", overrides)
            folders = loader.get_group_options(path, ObjectType.GROUP, "config", overrides)
            return [*listed, *(f"{sub}/{o}" for sub in folders for o in options(f"{path}/{sub}"))]

        return sorted(options(group))


def _searchpath(argv: tuple[str, ...]) -> list[str]:
    """The ``hydra.searchpath`` override the command line ``argv`` amounts to: its own, with the folders of
    ``--config-dir`` added (none if it has neither)."""
    overrides = [a for a in argv if _is_searchpath(a)]
    extra = _config_dirs(argv)
    if extra:
        given = OverridesParser.create().parse_overrides(overrides)[0].value() if overrides else []
        entries = [*(given or []), *(f"file://{Path(d).expanduser().resolve()}" for d in extra)]
        overrides = [f"hydra.searchpath=[{','.join(entries)}]"]
    return overrides


def _is_searchpath(argument: str) -> bool:
    """``argument`` sets Hydra's search path (``hydra.searchpath=``, with or without ``+``)."""
    return argument.lstrip("+").startswith("hydra.searchpath=")


def _config_dirs(argv: tuple[str, ...]) -> list[str]:
    """The folders of ``--config-dir``/``-cd`` (``-cd X``, ``--config-dir=X``)."""
    found = []
    for i, argument in enumerate(argv):
        flag, _, value = argument.partition("=")
        if flag in ("--config-dir", "-cd"):
            found.append(value or (argv[i + 1] if i + 1 < len(argv) else ""))
    return [d for d in found if d]


SWEEP_FLAGS = ("-m", "--multirun")
DIRECTIONS = ("maximize", "minimize")


def check_search_arguments(argv: list[str]) -> None:
    """A search (``hparams_search=``, an Optuna study of many runs) is a sweep: without ``-m`` Hydra would
    run one job of the defaults and report it as if searched; its budget and direction are checked before
    the first trial."""
    values = {a.split("=", 1)[0].lstrip("+~"): a.split("=", 1)[1] for a in argv if "=" in a}
    search = values.get("hparams_search")
    if search not in (None, "null") and not any(a in SWEEP_FLAGS for a in argv):
        raise BadInput(
            f"hparams_search={search} is a search, a study of many runs: run it as a sweep with -m, e.g. "
            f"noisydml -m hparams_search={search}"
        )
    if params := [a for a in argv if a.lstrip("+~").startswith("hydra.sweeper.params.")]:
        key = params[0].split("=", 1)[0].lstrip("+~").removeprefix("hydra.sweeper.params.")
        raise BadInput(
            f"{params[0]}: a search's space is given on the key it searches, not below "
            f"hydra.sweeper.params (Hydra takes no sweep of its own config, and splits {key} at each dot); "
            f"e.g. -m 'hparams_search=... {key}=choice(1,2)', or interval(1,4), range(1,5)"
        )
    trials = values.get("hydra.sweeper.n_trials")
    if trials is not None and not (trials.isdigit() and int(trials) >= 1):
        raise BadInput(
            f"hydra.sweeper.n_trials={trials} is not a number of trials; give one >= 1, e.g. "
            "hydra.sweeper.n_trials=12"
        )
    direction = values.get("hydra.sweeper.direction")
    if direction is not None and direction not in DIRECTIONS:
        raise BadInput(
            f"hydra.sweeper.direction={direction} is not an option; use one of: {', '.join(DIRECTIONS)} "
            "(the validation metric is a score: maximize)"
        )


def check_search_direction(cfg: DictConfig) -> None:
    """A search (Optuna's sweeper) runs the way its metric improves: ``minimize`` on a score would search
    for the worst trial and report it as the best."""
    hydra = HydraConfig.get() if HydraConfig.initialized() else None
    direction = OmegaConf.select(hydra, "sweeper.direction", default=None) if hydra else None
    metric = cfg.get("optimized_metric")
    if not isinstance(direction, str) or not metric:
        return
    wanted = "maximize" if better(metric) == "max" else "minimize"
    if direction != wanted:
        raise BadInput(
            f"hydra.sweeper.direction={direction} searches for the worst trial: optimized_metric={metric} "
            f"is better {'higher' if wanted == 'maximize' else 'lower'}; use hydra.sweeper.direction={wanted}"
        )


class CheckSearchSpace(Callback):
    """A search's space (its config's ``hydra.sweeper.params`` and the command line's, as Optuna merges
    them) checked before its first trial: each value of a choice or a range and each end of an interval,
    composed as a trial's run (the others at the search's fixed values) and checked as the sweeper checks
    a grid's jobs (:func:`~noisydml.run.checks.config.check_job`). A bad value would otherwise fail the
    trial that drew it, after the trials before it had trained."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweeper = OmegaConf.select(config, "hydra.sweeper", default=None)
        if not isinstance(sweeper, DictConfig) or "direction" not in sweeper:
            return
        params = [f"{key}={value}" for key, value in (sweeper.get("params") or {}).items()]
        task = list(OmegaConf.to_container(config.hydra.overrides.task))
        space = {o.get_key_element(): o for o in OverridesParser.create().parse_overrides(params + task)}
        fixed = [o.input_line for o in space.values() if not o.is_sweep_override()]
        from noisydml.run.checks.config import check_job
        from noisydml.utils.quiet import silence_known_noise

        silence_known_noise()
        loader = ComposedOnce(GlobalHydra.instance().config_loader())
        hydra_overrides = list(OmegaConf.to_container(config.hydra.overrides.hydra))
        tried = [
            (o.input_line, f"{k}={v}")
            for k, o in space.items()
            if o.is_sweep_override()
            for v in _space_values(o)
        ]
        for space_of, value in [("", ""), *tried]:
            overrides = [*fixed, value] if value else fixed
            try:
                cfg = loader.compose(config.hydra.job.config_name, hydra_overrides, overrides)
                if cfg is not None and not value:
                    _check_searched_keys(cfg, space, config)
                if cfg is not None:
                    check_job(cfg)
            except BadInput as bad:
                where = (
                    f"the search's space {space_of} holds {value}" if value else "the search's fixed values"
                )
                raise SystemExit(f"{where}, refused before any trial ran: {bad}") from None


def _check_searched_keys(cfg: DictConfig, space: dict[str, Any], config: DictConfig) -> None:
    """Each key the search draws is one its runs' config has: a search for one method's parameter, run
    with another method, would have every trial refused for a key the user never typed."""
    choices = OmegaConf.select(config, "hydra.runtime.choices", default=None) or {}
    search = choices.get("hparams_search")
    for key, override in space.items():
        if not override.is_sweep_override() or override.key_or_group != key or key.startswith("hydra."):
            continue
        if override.is_add() or OmegaConf.select(cfg, key, default=ABSENT) is not ABSENT:
            continue
        node, _, leaf = key.rpartition(".")
        chosen = choices.get(node.split(".")[0]) if node else None
        named = f"hparams_search={search} " if search else ""
        raise BadInput(
            f"the search {named}draws {key}, but {node or 'the config'}"
            f"{f' ({node}={chosen})' if chosen else ''} has no key {leaf} in this run's config; run the "
            "search with the method it tunes (its file says which), or choose a search for this method"
        )


def _space_values(override: Any) -> list[str]:
    """The values of a search's space that a check tries: a choice's or a range's each, an interval's ends
    (Optuna draws between them)."""
    if override.is_interval_sweep():
        return [str(override.value().start), str(override.value().end)]
    return sweep_values(override)


# What an evaluation (``noisydml-eval``) reads beyond its checkpoint's run's config: how it scores, which
# data set and where its files are, where it runs and records. Sections take any key below them.
EVALUATION_SECTIONS = ("metrics", "paths", "logger", "hydra", "hydra/launcher")
EVALUATION_KEYS = (
    *("ckpt_path", "dataset", "dataset.root", "name", "tags", "cpu_threads", "numerics"),
    *("data.eval_batch_size", "data.num_workers", "data.pin_memory", "data.score_train"),
    *("trainer", "trainer.accelerator", "trainer.devices", "trainer.precision"),
)


def check_evaluation_arguments(argv: list[str], run_dir: Path) -> None:
    """An evaluation keeps the config its checkpoint's run (``run_dir``) trained with, but for what it
    reads itself: any other key would be recorded as the evaluation's without having been used (the noise,
    the loss), or would score another split, part of which the network trained on (a data set's split
    keys), unless the evaluation scores another data set, whose keys they then are. A value the run
    trained with is its own."""
    record = RunDir(run_dir).read_results() or {}
    trained = OmegaConf.create(record.get("config") or {})
    trained_on = (record.get("choices") or {}).get("dataset")
    scored = [a.split("=", 1)[1] for a in argv if a.split("=", 1)[0] == "dataset"]
    another = bool(scored) and trained_on is not None and scored[-1] != trained_on
    parser = OverridesParser.create()
    for argument in (a for a in argv if "=" in a and not a.startswith("-")):
        key = argument.split("=", 1)[0].lstrip("+~")
        if key in EVALUATION_KEYS or any(key.startswith(f"{s}.") or key == s for s in EVALUATION_SECTIONS):
            continue
        if another and key.startswith("dataset."):
            continue
        (override,) = parser.parse_overrides([argument])
        if not override.is_delete() and OmegaConf.select(trained, key, default=ABSENT) == override.value():
            continue
        why = (
            "it splits the data otherwise: part of the samples it would test were trained on"
            if key.startswith("dataset.")
            else "an evaluation does not read it, yet would record it as its own"
        )
        settable = ", ".join((*EVALUATION_KEYS[1:], *EVALUATION_SECTIONS[:-1]))
        raise BadInput(
            f"noisydml-eval: {argument} departs from the config {run_dir} trained with ({why}); drop it "
            f"(an evaluation sets only {settable})"
        )


def check_evaluation_folder(folder: Path, checkpoint: Path) -> None:
    """An evaluation starts its folder over (``resume=never``): a training run's folder, the checkpoint's
    own above all, would lose its checkpoints and files to it. An earlier evaluation of the same
    checkpoint's folder is its own."""
    if not is_run(folder):
        return
    record = RunDir(folder).read_results() or {}
    evaluated = (record.get("config") or {}).get("ckpt_path")
    if evaluated is not None and Path(evaluated).resolve() == checkpoint.resolve():
        return
    whose = (
        "the run that wrote the checkpoint"
        if folder.resolve() == checkpoint.resolve().parent.parent
        else "another run"
    )
    raise BadInput(
        f"noisydml-eval: hydra.run.dir={folder} is {whose}, whose checkpoints and files an evaluation would "
        "replace; leave hydra.run.dir out (the scores go in outputs/evals/<name>/<time>) or give a new folder"
    )
