"""Checking in one room: every rule a run's input obeys, each written once, one module per kind of rule
(ARCHITECTURE.md's table), over one walk of the config (:mod:`~noisydml.run.checks.walk`) with one rule
type (:class:`noisydml.utils.checks.Rule`); :mod:`noisydml.run.preflight` runs them, cheapest first. This
package imports nothing itself: the command line reads its argument rules before torch loads."""
