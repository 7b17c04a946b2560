"""noisydml: deep metric learning under label noise, five papers under one protocol."""

from pathlib import Path

__version__ = "0.1.0"

# The Hydra config folder, conf/ at the root of the checkout the package is installed from (editable).
CONFIG_DIR = Path(__file__).resolve().parents[2] / "conf"
