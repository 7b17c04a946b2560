"""BDML's feature pipeline (Sec. 4): fixed features of any data set, PCA, then standardisation.

"(i) extract features by an unsupervised method; (ii) apply PCA to project data points onto a smaller
dimensional space; (iii) standardize features to standard Normal distribution" - then every method
(PCA alone, BLMNN, DML, BDML) learns or is scored on those vectors.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.utils.data import DataLoader

from noisydml.data.base import LabeledDataset, Splits, TensorDataset
from noisydml.utils.atomic import atomic_write

# Bumped when the cached arrays change meaning, so stale files are never read.
CACHE_FORMAT = 1


class ExtractedFeatures:
    """The ``source`` data set as fixed vectors: embedded once by a frozen ``extractor`` (or its own
    inputs, flattened, when there is none), projected by PCA to ``pca_dim`` and standardised.

    ``source`` and ``extractor`` are config nodes (``_target_`` plus arguments; Hydra passes them
    unbuilt, ``_recursive_: false``) so that their resolved text keys the cache. The extractor is
    a trunk that maps a batch of the source's items to one vector each (e.g.
    ``noisydml.models.torchvision_trunk`` with ``pretrained: true``); it runs in eval mode, without
    gradients, on the GPU when there is one, over the test-time view of both splits (no random crops).

    Extracted features are cached in ``cache_dir`` under a name keyed by the source config, the
    extractor config, the extractor's weights (a digest of its state dict, so a new checkpoint gives a
    new file) and the splits' labels; the file is written atomically, so concurrent jobs of a sweep at
    worst extract twice. PCA and standardisation are cheap and never cached.

    PCA (``pca_dim``) and the per-feature standardisation (zero mean, unit variance) are fitted on the
    training split only and applied to both: the test split must not shape its own features. The
    paper gives neither the PCA dimension nor whether the train split alone was used; fitting on
    training data only is the leak-free reading.
    """

    def __init__(
        self,
        source: Mapping,
        extractor: Mapping | None = None,
        pca_dim: int | None = None,
        standardize: bool = True,
        cache_dir: str | Path = "data/cache",
        batch_size: int = 256,
        name: str = "extracted",
    ):
        if pca_dim is not None and pca_dim < 1:
            raise ValueError(f"dataset.pca_dim={pca_dim} must be >= 1, or null to keep every feature")
        if batch_size < 1:
            raise ValueError(f"dataset.batch_size={batch_size} must be >= 1")
        self.source = _as_config(source, "source")
        self.extractor = None if extractor is None else _as_config(extractor, "extractor")
        self.pca_dim = pca_dim
        self.standardize = standardize
        self.cache_dir = Path(cache_dir)
        self.batch_size = batch_size
        self.name = name
        self.cache_path: Path | None = None

    def splits(self) -> Splits:
        source = instantiate(self.source).splits()
        # Unreadable images are dropped (or raise) before anything is keyed on the items.
        source.train.verify()
        source.test.verify()
        if self.extractor is None:
            train = self._inputs(source.train.eval_view())
            test = self._inputs(source.test)
        else:
            train, test = self._extracted(source)
        train, test = self._project(train, test)
        return Splits(
            train=TensorDataset(torch.from_numpy(train), source.train.labels),
            test=TensorDataset(torch.from_numpy(test), source.test.labels),
            query_mask=source.query_mask,
        )

    def _loader(self, dataset: LabeledDataset) -> DataLoader:
        return DataLoader(dataset, batch_size=self.batch_size, shuffle=False)

    def _inputs(self, dataset: LabeledDataset) -> np.ndarray:
        """Every item's input, flattened to one row."""
        return torch.cat([x.flatten(1) for x, _, _ in self._loader(dataset)]).numpy().astype(np.float32)

    def _extracted(self, source: Splits) -> tuple[np.ndarray, np.ndarray]:
        extractor: nn.Module = instantiate(self.extractor)
        self.cache_path = self.cache_dir / self._cache_name(extractor, source)
        if self.cache_path.is_file():
            with np.load(self.cache_path) as cached:
                return cached["train"], cached["test"]
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        extractor.to(device).eval()
        train, test = (
            self._embed(extractor, split, device) for split in (source.train.eval_view(), source.test)
        )
        with atomic_write(self.cache_path, "wb") as f:
            np.savez(f, train=train, test=test)
        return train, test

    def _embed(self, extractor: nn.Module, dataset: LabeledDataset, device: torch.device) -> np.ndarray:
        with torch.no_grad():
            parts = [extractor(x.to(device)).flatten(1).float().cpu() for x, _, _ in self._loader(dataset)]
        return torch.cat(parts).numpy()

    def _cache_name(self, extractor: nn.Module, source: Splits) -> str:
        """``<source>-<extractor>-<digest>.npz``, the digest of everything that decides the features."""
        digest = hashlib.sha256()
        digest.update(f"format {CACHE_FORMAT}\n".encode())
        for node in (self.source, self.extractor):
            digest.update(OmegaConf.to_yaml(node, resolve=True, sort_keys=True).encode())
        for key, value in sorted(extractor.state_dict().items()):
            digest.update(key.encode())
            buffer = io.BytesIO()
            np.save(buffer, value.detach().cpu().numpy())
            digest.update(buffer.getvalue())
        for labels in (source.train.labels, source.test.labels):
            digest.update(np.ascontiguousarray(labels).tobytes())
        source_name = self.source.get("name") or _short_target(self.source)
        extractor_name = self.extractor.get("arch") or _short_target(self.extractor)
        return f"{source_name}-{extractor_name}-{digest.hexdigest()[:16]}.npz"

    def _project(self, train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.pca_dim is not None:
            largest = min(train.shape)
            if self.pca_dim > largest:
                raise ValueError(
                    f"dataset.pca_dim={self.pca_dim} exceeds what {train.shape[0]} training vectors of "
                    f"{train.shape[1]} features allow; set it to at most {largest}"
                )
            # Exact PCA from the d x d covariance: fast when there are more samples than features.
            pca = PCA(n_components=self.pca_dim, svd_solver="covariance_eigh").fit(train)
            train, test = pca.transform(train), pca.transform(test)
        if self.standardize:
            # A constant feature keeps scale 1 (sklearn), so it stays 0 instead of becoming NaN.
            scaler = StandardScaler().fit(train)
            train, test = scaler.transform(train), scaler.transform(test)
        return train.astype(np.float32), test.astype(np.float32)


def _as_config(node: Mapping, key: str) -> DictConfig:
    config = node if isinstance(node, DictConfig) else OmegaConf.create(dict(node))
    if "_target_" not in config:
        raise ValueError(
            f"dataset.{key} has no _target_: give the {key} as a config node, e.g. "
            f"dataset@dataset.source=digits, or dataset.extractor={{_target_: ..., ...}}"
        )
    return config


def _short_target(node: DictConfig) -> str:
    return str(node["_target_"]).rsplit(".", 1)[-1]
