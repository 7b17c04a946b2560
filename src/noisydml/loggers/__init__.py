"""Experiment loggers beyond Lightning's own: a CSV logger that a resumed run continues, and W&B's mode
(online with an account, offline without). ``conf/logger/`` selects them."""
