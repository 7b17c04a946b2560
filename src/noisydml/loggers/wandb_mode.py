"""W&B runs offline unless the user has set W&B up; a job never stops at a login prompt, and closes its W&B
run when it ends."""

from __future__ import annotations

import netrc
import os
import sys
from pathlib import Path
from urllib.parse import urlparse

from noisydml.utils.errors import BadInput

WANDB_HOST = "api.wandb.ai"


def choose_wandb_mode() -> str:
    """Set ``WANDB_MODE`` to ``offline`` unless the user chose a mode or has credentials; return it.

    Credentials are ``WANDB_API_KEY`` or the ``~/.netrc`` entry that ``wandb login`` writes (for
    ``WANDB_BASE_URL``'s host, a server of one's own, else W&B's). Offline runs land in the run directory and
    can be uploaded later with ``wandb sync``. ``WANDB_MODE=online`` without credentials is refused before
    the run starts (W&B's own refusal came as the run started, naming no way out).
    """
    if "WANDB_MODE" not in os.environ:
        os.environ["WANDB_MODE"] = "online" if _has_credentials() else "offline"
    if os.environ["WANDB_MODE"] == "online" and not _has_credentials():
        raise BadInput(
            f"WANDB_MODE=online logs to a W&B account, but none is logged in here (no WANDB_API_KEY, no "
            f"~/.netrc entry for {_host()}); run `wandb login`, or log offline (unset WANDB_MODE, or "
            "WANDB_MODE=offline; `wandb sync` uploads later), or drop W&B with logger=csv"
        )
    return os.environ["WANDB_MODE"]


def _host() -> str:
    return urlparse(os.environ.get("WANDB_BASE_URL") or f"https://{WANDB_HOST}").hostname or WANDB_HOST


def _has_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    path = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    try:
        return netrc.netrc(path).authenticators(_host()) is not None
    except (FileNotFoundError, netrc.NetrcParseError, PermissionError):
        return False


def finish_wandb() -> None:
    """Close the W&B run so the next job of a multirun starts its own (a run that logs to W&B has
    imported it)."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish()
