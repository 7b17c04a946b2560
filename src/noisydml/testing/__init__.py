"""Fault injection for tests of the unhappy paths (a run killed at a chosen step). Never part of a
run's default config; a test adds it with ``+callbacks.fault._target_=noisydml.testing.faults.KillAt``."""
