"""An image file that cannot be decoded: what PIL raises for it, and the error the project raises instead.

A leaf of ``noisydml.data``: both the image lists (``images``) and their decoded cache (``image_cache``)
decode files, and both import it, so neither imports the other for it.
"""

from __future__ import annotations

from pathlib import Path

# What PIL raises for a file it cannot identify, a truncated or broken header, or a missing file.
PIL_ERRORS = (OSError, SyntaxError)


class UnreadableImageError(OSError):
    """An image file that PIL cannot open."""

    def __init__(self, path: str | Path, error: Exception):
        super().__init__(
            f"cannot read image {path}: {error}. Replace the file, or set dataset.skip_unreadable=true "
            f"to drop unreadable images before training."
        )
        self.path = str(path)
