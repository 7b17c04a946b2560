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

from noisydml import CONFIG_DIR
from noisydml.data.check import PUBLISHED, Check, check_layout

# What reading a data set's folder reads of the config.
READ = ("dataset.", "paths.")


def dataset_check(dataset: str, overrides: Sequence[str] = ()) -> Check:
    """Read ``dataset`` as a run would, count its splits and open every image's header. An override of a key
    it does not read, or one the config lacks, is refused in one line."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.utils import instantiate

    from hydra_plugins.noisydml_sweeper.composition import ComposedOnce
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
        cfg = loader.compose("config", [], [f"dataset={dataset}", *overrides])
    return check_layout(dataset, instantiate(cfg.dataset))


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
