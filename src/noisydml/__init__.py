"""noisydml: deep metric learning under label noise, five papers under one protocol."""

from pathlib import Path

__version__ = "0.2.0"

# The Hydra config folder: conf/ inside an installed wheel, else conf/ at the top of the checkout an
# editable install runs from.
_PACKAGED = Path(__file__).resolve().parent / "conf"
CONFIG_DIR = _PACKAGED if _PACKAGED.is_dir() else Path(__file__).resolve().parents[2] / "conf"
