"""The keys a built object does not read: its own keys that its other settings, or the run's other parts,
leave unused. Each class says it of itself (``unread_keys``); the run refuses those of them given for it
(:func:`noisydml.run.checks.data.check_unread`), so that no value is recorded as the run's without having
been used. A value a protocol or an experiment sets for every method it runs is a default, not the run's
choice, and is not refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Parts:
    """What a class may read to say which of its keys are unused: the model (an ``EmbeddingModule``, its
    ``backbone``, ``loss`` and ``miner``), the data module with its noisy labels drawn, whether the run
    trains on the CPU, and the training steps it takes (None: bounded by no count of epochs)."""

    model: Any
    datamodule: Any
    on_cpu: bool
    steps: int | None = None


@runtime_checkable
class ReadsItsKeys(Protocol):
    """A class that knows which of its keys go unread.

    ``unread_keys`` maps a parameter's name (``""``: the object itself, e.g. a callback that would log
    nothing) to why nothing reads it and the fix. ``{key}`` in the text stands for the key in the config
    (``backbone.eval_samples``), ``{node}`` for the object's own (``backbone``): the same class may be built
    under another node (``noise.backbone``)."""

    def unread_keys(self, parts: Parts) -> dict[str, str]: ...


def no_flips(parts: Parts) -> dict[str, str]:
    """What a callback that scores how well the flipped labels are found says of itself where the run's
    noise flips none of them (or every one): it would log nothing."""
    flipped = parts.datamodule.training_set().flipped
    if 0 < int(flipped.sum()) < len(flipped):
        return {}
    return {
        "": "scores how well the flipped labels are found, but this run's noise flips "
        f"{int(flipped.sum())} of {len(flipped)}, so it would log nothing; drop it, or add noise, "
        f"e.g. noise=uniform noise.rate=0.2"
    }
