"""A run from the command line to ``results.json``: the ``noisydml`` command (:mod:`noisydml.run.cli`),
the checks and builds before training (:mod:`noisydml.run.preflight`), training and testing
(:mod:`noisydml.run.train`), checkpoint selection, and the line a sweep prints per job."""
