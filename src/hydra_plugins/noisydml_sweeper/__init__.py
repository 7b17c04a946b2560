"""noisydml's Hydra sweeper (``hydra/sweeper=noisydml``, the default in conf/hydra/default.yaml)."""
