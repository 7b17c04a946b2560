"""Which training steps Lightning's loggers write: the steps at which a logged value is read."""

from __future__ import annotations

import pytorch_lightning as pl


def is_logging_step(trainer: pl.Trainer) -> bool:
    """Whether Lightning's loggers write the values of the current training step: its own rule
    (``trainer.log_every_n_steps``, or a stop), a private property (pytorch-lightning is pinned in
    constraints.txt)."""
    return trainer._logger_connector.should_update_logs
