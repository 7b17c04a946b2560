"""Read the records of a W&B run file (``run-<id>.wandb``) for assertions, with the package's reader
(:mod:`noisydml.loggers.wandb_records`)."""

from __future__ import annotations

import json
from pathlib import Path

from noisydml.loggers.wandb_records import records

__all__ = ["logged_config", "logged_metrics", "records"]


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


def logged_metrics(path: Path) -> dict[str, float]:
    """Every history value logged in the run, the last value per key."""
    values = {}
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            values.update({_key(item): json.loads(item.value_json) for item in record.history.item})
    return values


def logged_config(path: Path) -> dict:
    config = {}
    for record in records(path):
        if record.WhichOneof("record_type") == "config":
            config.update({_key(item): json.loads(item.value_json) for item in record.config.update})
    return config
