"""Experiment loggers beyond Lightning's own: a CSV logger that a resumed run continues, a W&B logger laid
out for W&B's runs table (a group per sweep, the job's overrides as its name, flat choice keys, a summary of
how the run went), W&B's mode (online with an account, offline without), MLflow's metric names,
TensorBoard's HParams row of a run, and the report as a W&B artifact beside its runs; the fields every
dashboard names and groups a run by, its method named as the report names it (``run_fields``).
``conf/logger/`` selects the loggers."""
