"""The error a user can fix: bad input, refused before training with the key, the value and the fix."""

from __future__ import annotations

from hydra.errors import CompactHydraException


class BadInput(CompactHydraException, ValueError):
    """A config value, a data file or a run directory the run cannot use.

    Hydra prints a CompactHydraException as its message alone, without a traceback (the run writes the
    traceback to its ``error.log``; ``HYDRA_FULL_ERROR=1`` prints it too). A ValueError, so callers that
    catch bad values catch it.
    """
