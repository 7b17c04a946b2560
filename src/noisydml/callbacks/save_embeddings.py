"""``embeddings.npz``: a run's test embeddings, written by a Lightning callback
(``callbacks=save_embeddings``)."""

from __future__ import annotations

import os

import numpy as np
import pytorch_lightning as pl

from noisydml.core.embedded import Embedded
from noisydml.utils.atomic import atomic_write
from noisydml.utils.run_directory import RunDir


class SaveEmbeddings(pl.Callback):
    """Writes the test embeddings the module scored (``EmbeddingModule.test_embedded``) to the run
    directory, with their labels and, where the test set has them, the image files: the report draws
    them (Levi et al. Fig. 2) and a retrieval grid."""

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        embedded: Embedded | None = getattr(pl_module, "test_embedded", None)
        if embedded is None or not trainer.is_global_zero:
            return
        arrays = {"embeddings": embedded.embeddings, "labels": embedded.labels}
        paths = getattr(trainer.datamodule.splits.test, "paths", None)
        if paths is not None:
            arrays["paths"] = np.asarray([os.path.abspath(paths[i]) for i in embedded.indices])
        with atomic_write(RunDir(trainer.default_root_dir).embeddings, "wb") as f:
            np.savez(f, **arrays)
