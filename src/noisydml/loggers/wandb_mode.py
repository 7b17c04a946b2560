"""W&B runs offline unless the user has set W&B up; a job never stops at a login prompt, and closes its W&B
run when it ends."""

from __future__ import annotations

import difflib
import netrc
import os
import sys
import typing
from pathlib import Path
from urllib.parse import urlparse

from noisydml.utils.errors import BadInput

WANDB_HOST = "api.wandb.ai"
# The modes W&B documents, where its settings cannot be asked for theirs.
WANDB_MODES = ("online", "offline", "disabled")


def choose_wandb_mode() -> str:
    """Set ``WANDB_MODE`` to ``offline`` unless the user chose a mode or has credentials; return it.

    Credentials are ``WANDB_API_KEY`` or the ``~/.netrc`` entry that ``wandb login`` writes (for
    ``WANDB_BASE_URL``'s host, a server of one's own, else W&B's). Offline runs land in the run directory and
    can be uploaded later with ``wandb sync``. ``WANDB_MODE=online`` without credentials is refused before
    the run starts (W&B's own refusal came as the run started, naming no way out).
    """
    if "WANDB_MODE" not in os.environ:
        os.environ["WANDB_MODE"] = "online" if _has_credentials() else "offline"
    check_wandb_mode(os.environ["WANDB_MODE"])
    if os.environ["WANDB_MODE"] == "online" and not _has_credentials():
        raise BadInput(
            f"WANDB_MODE=online logs to a W&B account, but none is logged in here (no WANDB_API_KEY, no "
            f"~/.netrc entry for {_host()}); run `wandb login`, or log offline (unset WANDB_MODE, or "
            "WANDB_MODE=offline; `wandb sync` uploads later), or drop W&B with logger=csv"
        )
    return os.environ["WANDB_MODE"]


def check_wandb_mode(mode: str) -> None:
    """``WANDB_MODE`` is a mode W&B takes, refused naming the variable (W&B's own refusal, as its run
    starts, names none)."""
    modes = _wandb_modes()
    if mode not in modes:
        closest = difflib.get_close_matches(mode.lower(), modes, n=1) or ["offline"]
        raise BadInput(
            f"WANDB_MODE={mode or repr(mode)} is not a mode W&B takes (one of: {', '.join(modes)}); e.g. "
            f"WANDB_MODE={closest[0]}, or unset WANDB_MODE to log offline unless W&B is set up"
        )


def _wandb_modes() -> tuple[str, ...]:
    """The values W&B's settings take for ``mode``."""
    try:
        from wandb.sdk.wandb_settings import Settings

        return typing.get_args(Settings.model_fields["mode"].annotation) or WANDB_MODES
    except (ImportError, AttributeError, KeyError):
        return WANDB_MODES


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
