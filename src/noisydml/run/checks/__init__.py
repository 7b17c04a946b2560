"""Checking in one room: every rule a run's input obeys, each written once, over one walk of the config
(:mod:`~noisydml.run.checks.walk`) with one rule type (:class:`noisydml.utils.checks.Rule`).

- :mod:`~noisydml.run.checks.keys`: the one table of keys whose consumer is a library that checks them late
  or not at all, and the project's own top-level keys.
- :mod:`~noisydml.run.checks.classes`: every node that builds an object against its class: its keys, their
  types, a library class's ranges; this package's classes check their own in their constructors, which
  run here before the data are read.
- :mod:`~noisydml.run.checks.identity`: a run's identity is what ran.
- :mod:`~noisydml.run.checks.folders`: a run writes only into its own folder.
- :mod:`~noisydml.run.checks.outcome`: only a real result is ``finished``; what the selection watches.
- :mod:`~noisydml.run.checks.library`: what only a library can say (the optimizer, the Trainer, the
  machine, the run's precision), its refusal turned into one line naming the key.

:mod:`noisydml.run.preflight` runs them in order, cheapest first. This package imports nothing itself:
the command line reads its folder rules before torch loads (:mod:`noisydml.run.numerics`).
"""
