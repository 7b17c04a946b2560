"""The error a user can fix: bad input, refused before training with the key, the value and the fix."""

from __future__ import annotations

import errno

from hydra.errors import CompactHydraException


class BadInput(CompactHydraException, ValueError):
    """A config value, a data file or a run directory the run cannot use.

    Hydra prints a CompactHydraException as its message alone, without a traceback (the run writes the
    traceback to its ``error.log``; ``HYDRA_FULL_ERROR=1`` prints it too). A ValueError, so callers that
    catch bad values catch it.
    """


class Diverged(CompactHydraException, FloatingPointError):
    """A loss that is no longer finite: one line naming the step and the fix, printed without the
    training loop's traceback (it is in the run's ``error.log``)."""


class DiskFull(CompactHydraException, OSError):
    """No space left for a run's files (a full disk, a quota, a file-size limit): one line that names the
    file and how to go on, printed without the tracebacks of the writes it cut short (they are in the run's
    ``error.log``)."""

    def __str__(self) -> str:
        # The message alone, as a user reads it; OSError's own adds "[Errno 28]".
        return str(self.strerror)


# The errors of a write that found no space.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def no_space(error: BaseException) -> OSError | None:
    """The no-space error behind ``error`` (itself, or one it was raised from or while handling), if any."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in NO_SPACE:
            return error
        error = error.__cause__ or error.__context__
    return None
