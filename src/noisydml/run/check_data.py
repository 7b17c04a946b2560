"""``noisydml-check-data``: check a data set's folder against its published layout and image counts, and
list missing or unreadable images, on a login node before a GPU job is spent finding out.

    noisydml-check-data cub                          # under paths.data_dir (NOISYDML_DATA_DIR, conf/local/)
    noisydml-check-data sop paths.data_dir=/datasets # any override of the run's config
    noisydml-check-data inshop dataset.root=/scratch/InShop
    noisydml-check-data cars98n                      # PRISM's download beside the Cars196 release

The data set is composed and read exactly as a run reads it (``dataset=<name>`` plus the overrides), so
a folder this command passes is one a run can train on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from noisydml import CONFIG_DIR
from noisydml.data.check import PUBLISHED, Check, check_layout

if TYPE_CHECKING:
    from omegaconf import DictConfig

# What reading a data set's folder reads of the config.
READ = ("dataset.", "paths.")


def dataset_check(dataset: str, overrides: Sequence[str] = ()) -> Check:
    """Read ``dataset`` as a run would, count its splits and open every image's header. An override of a key
    it does not read, one the config lacks, a key or value the data set's class does not take, and any
    other refusal to build it are refused in one line naming the key, as a run refuses them."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import OverrideParseException

    from hydra_plugins.noisydml_sweeper.composition import ComposedOnce
    from noisydml.run.checks.classes import check_classes
    from noisydml.utils.errors import BadInput

    for override in overrides:
        if not override.lstrip("+~").startswith(READ):
            raise BadInput(
                f"{override}: noisydml-check-data reads the data set's folder, so only its keys "
                f"({', '.join(f'{r}*' for r in READ)}); drop it"
            )
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        loader = ComposedOnce(GlobalHydra.instance().config_loader())
        try:
            cfg = loader.compose("config", [], [f"dataset={dataset}", *overrides])
        except OverrideParseException as error:
            bad = next((o for o in overrides if "=" not in o and not o.startswith("~")), None)
            what = f"{bad}: an override is key=value" if bad else str(error).splitlines()[0]
            raise BadInput(f"{what}; give one, e.g. dataset.root=/data") from error
    # A key or value the data set's class does not take, named before any folder is read.
    check_classes(cfg)
    return layout_report(dataset, cfg.dataset)


def layout_report(dataset: str, node: DictConfig) -> Check:
    """:func:`check_layout` of the data set ``node`` (the config at ``dataset``) builds. Its own refusal (a
    layout file missing, a folder it cannot split) says what to fix and is raised as it is; any other (a
    library's: torchvision's, Hydra's) is one line naming the key it refused, found by building the data
    set and its splits again without each key (:func:`noisydml.run.checks.library.library_error`)."""
    from hydra.utils import instantiate

    from noisydml.run.checks.library import instantiation_cause, library_error

    try:
        return check_layout(dataset, instantiate(node))
    except Exception as error:
        cause = instantiation_cause(error)
        if not isinstance(cause, Exception):
            raise
        if _raised_here(cause) and isinstance(cause, (OSError, ValueError, KeyError)):
            raise cause from error
        raise library_error("dataset", node, lambda n: instantiate(n).splits(), cause) from error


def _raised_here(error: BaseException) -> bool:
    """Whether ``error`` was raised in noisydml's own code (its message names the key or file to fix)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and str(tb.tb_frame.f_globals.get("__name__", "")).split(".")[0] == "noisydml"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="noisydml-check-data",
        description="Check a data set's folder against its published layout and image counts.",
        epilog="Exit status 0: the folder is as published; 1: it is not (the output says how).",
    )
    parser.add_argument(
        "dataset", nargs="?", choices=sorted(PUBLISHED), help="the dataset= option a run would use"
    )
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value", help="config overrides, e.g. paths.data_dir=/datasets"
    )
    args = parser.parse_args(argv)
    if args.dataset is None:
        # argparse would call the optional overrides required too.
        parser.error(
            "give the data set to check, e.g. noisydml-check-data cub (one of: "
            f"{', '.join(sorted(PUBLISHED))})"
        )
    try:
        result = dataset_check(args.dataset, args.overrides)
    except (OSError, ValueError, KeyError) as error:
        # A layout file missing or malformed: the message names it and the layout expected.
        # A data set's own message names it already.
        message = str(error)
        print(
            message if message.startswith(f"{args.dataset}: ") else f"{args.dataset}: {message}",
            file=sys.stderr,
        )
        return 1
    print(result.text())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
