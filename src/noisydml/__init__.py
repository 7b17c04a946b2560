"""noisydml: deep metric learning under label noise, five papers under one protocol."""

__version__ = "0.1.0"
