"""noisydml: deep metric learning under label noise, five papers under one protocol."""

from pathlib import Path

__version__ = "0.2.0"

# The Hydra config folder: conf/ inside an installed wheel, else conf/ at the top of the checkout an
# editable install runs from.
_PACKAGED = Path(__file__).resolve().parent / "conf"
CONFIG_DIR = _PACKAGED if _PACKAGED.is_dir() else Path(__file__).resolve().parents[2] / "conf"
# The committed results of the reproductions (their runs.csv and stamp.json: the board a new method is set
# beside, ``noisydml-report --against <reproduction>``): results/ inside a wheel, else at the checkout's top.
_PACKAGED_RESULTS = Path(__file__).resolve().parent / "results"
RESULTS_DIR = (
    _PACKAGED_RESULTS if _PACKAGED_RESULTS.is_dir() else Path(__file__).resolve().parents[2] / "results"
)
