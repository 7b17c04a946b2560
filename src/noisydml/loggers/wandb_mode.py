"""W&B runs offline unless the user has set W&B up; a job never stops at a login prompt, and closes its W&B
run when it ends."""

from __future__ import annotations

import netrc
import os
import sys
from pathlib import Path

WANDB_HOST = "api.wandb.ai"


def choose_wandb_mode() -> str:
    """Set ``WANDB_MODE`` to ``offline`` unless the user chose a mode or has credentials; return it.

    Credentials are ``WANDB_API_KEY`` or the ``~/.netrc`` entry that ``wandb login`` writes.
    Offline runs land in the run directory and can be uploaded later with ``wandb sync``.
    """
    if "WANDB_MODE" not in os.environ:
        os.environ["WANDB_MODE"] = "online" if _has_credentials() else "offline"
    return os.environ["WANDB_MODE"]


def _has_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    path = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    try:
        return netrc.netrc(path).authenticators(WANDB_HOST) is not None
    except (FileNotFoundError, netrc.NetrcParseError, PermissionError):
        return False


def finish_wandb() -> None:
    """Close the W&B run so the next job of a multirun starts its own (a run that logs to W&B has
    imported it)."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish()
