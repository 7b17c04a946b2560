"""Instance-dependent label noise (Chen et al., "Beyond Class-Conditional Assumption: A Primary Attempt to
Combat Instance-Dependent Label Noise", AAAI 2021, Sec. 5.1; their released generator
``mnist_gen_dependent.py``): a label is wrong where the sample looks like another class.

Their rule: train a classifier on the clean training labels, average its softmax over the training
samples after each of its epochs, and for each sample take the most likely class other than its own and
that class's averaged probability; the ``round(rate * N)`` samples with the highest such probability flip,
each to that class. Flips land on the class boundaries, towards the adjacent class, and the rate is exact.
Given the averaged softmax the flips are deterministic; the softmax depends on the classifier, its
training and its seed, which the config names (``classifier``, ``epochs``, ``batch_size``, ``lr``,
``momentum``, ``seed``: SGD with momentum and cross-entropy, their MNIST settings by default).

Chen et al. keep ``int(rate * N)`` (truncated; at rate 0 their slice ``[-0:]`` would flip every sample)
and break ties in the probability by NumPy's unstable argsort; here the count rounds half to even, as every
count of this package, and ties go to the lower index.

Training the classifier costs seconds to minutes, so its averaged softmax is cached per training split,
classifier, seed and numerics mode: in memory for the jobs of a sweep in one process, and in ``cache_dir``
on disk for the jobs of other processes, so every method of a comparison trains on the same labels.
"""

from __future__ import annotations

import copy
import hashlib
import io
import logging
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from noisydml.noise.models import (
    NoisyLabels,
    _check_labels,
    _check_rate,
    _check_seed,
    _round_half_even,
    warn_high_rate,
)
from noisydml.noise.protocols import TrainingSplit
from noisydml.numerics import in_force
from noisydml.utils.atomic import atomic_write
from noisydml.utils.checks import INF, Rule, check_value

log = logging.getLogger(__name__)

# The classifier when the config names none: an MLP on the flattened inputs.
DEFAULT_HIDDEN = (256, 256)

_MEMORY: dict[str, np.ndarray] = {}


class InstanceDependentNoise:
    """Flip the ``round(rate * N)`` samples whose most likely wrong class is most likely, each to that
    class, by a classifier's softmax averaged over its training epochs (see the module docstring).

    ``classifier`` is a trunk (a module with ``out_features``, as those of ``noisydml.models``) that a
    linear layer to the classes is put on; None: an MLP of two hidden layers of 256 (ReLU) on the flattened
    inputs. Its weights are drawn again from ``seed`` whoever built it. ``report`` says how well the
    classifier fitted and whether its softmax came from the cache.
    """

    def __init__(
        self,
        rate: float,
        seed: int,
        classifier: nn.Module | None = None,
        epochs: int = 20,
        batch_size: int = 64,
        lr: float = 0.01,
        momentum: float = 0.5,
        cache_dir: str | Path | None = None,
    ):
        self.rate = _check_rate("noise.rate", rate)
        # Flips go to one chosen class each, so the rate has no uniform bound; past one half it is said.
        warn_high_rate("noise.rate", self.rate)
        _check_seed(seed)
        self.seed = seed
        check_value(Rule("noise.epochs", int, 1, example="noise.epochs=20"), epochs)
        check_value(Rule("noise.batch_size", int, 1, example="noise.batch_size=64"), batch_size)
        check_value(Rule("noise.lr", float, 0, INF, open_low=True, example="noise.lr=0.01"), lr)
        check_value(Rule("noise.momentum", float, 0, 1, example="noise.momentum=0.5"), momentum)
        if classifier is not None and getattr(classifier, "out_features", None) is None:
            raise ValueError(
                f"noise.classifier {type(classifier).__name__} has no out_features (the width the class "
                "layer is put on): use a trunk of noisydml.models, e.g. {_target_: noisydml.models.LeNet}"
            )
        self.classifier = classifier
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = float(lr)
        self.momentum = float(momentum)
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.report: dict = {}

    def apply(self, labels: np.ndarray, probabilities: np.ndarray) -> NoisyLabels:
        """The noisy labels from each sample's averaged class probabilities (one column per class, in
        sorted class order)."""
        labels = _check_labels(labels)
        classes, class_index = np.unique(labels, return_inverse=True)
        probabilities = np.asarray(probabilities, dtype=np.float64)
        if probabilities.shape != (len(labels), len(classes)):
            raise ValueError(
                f"instance-dependent noise needs one probability per sample and class, shape "
                f"{(len(labels), len(classes))}; got {probabilities.shape}"
            )
        if len(classes) < 2:
            raise ValueError(
                f"InstanceDependentNoise needs at least 2 classes; the labels hold {len(classes)}"
            )
        other = probabilities.copy()
        other[np.arange(len(labels)), class_index] = -np.inf
        candidate = other.argmax(axis=1)
        strength = other[np.arange(len(labels)), candidate]
        count = int(_round_half_even(np.asarray(self.rate * len(labels))))
        # Highest first; among equal probabilities the lower index first (a stable sort of the negation).
        flipped = np.argsort(-strength, kind="stable")[:count]
        observed = labels.copy()
        observed[flipped] = classes[candidate[flipped]]
        self.report.update(
            flips=count, weakest_flip_probability=float(strength[flipped].min()) if count else None
        )
        return NoisyLabels(np.arange(len(labels)), labels.copy(), observed)

    def apply_to(self, train: TrainingSplit) -> NoisyLabels:
        """The noisy labels of a training split: its classifier's averaged softmax (trained, or cached),
        then the rule."""
        labels = _check_labels(train.labels)
        _, class_index = np.unique(labels, return_inverse=True)
        inputs = _inputs(train)
        key = self._key(inputs, class_index)
        probabilities, source = self._cached(key)
        if probabilities is None:
            probabilities = self._train(inputs, class_index)
            self._store(key, probabilities)
            source = "trained"
        accuracy = float((probabilities.argmax(axis=1) == class_index).mean())
        self.report = {"softmax": source, "cache_key": key[:16], "averaged_softmax_accuracy": accuracy}
        log.info(
            "instance-dependent noise: softmax %s (averaged over %d epochs, training accuracy %.3f)",
            source,
            self.epochs,
            accuracy,
        )
        return self.apply(labels, probabilities)

    def _key(self, inputs: torch.Tensor, class_index: np.ndarray) -> str:
        """What the averaged softmax depends on: the inputs, the labels, the classifier, its training and the
        numerics mode it computed in."""
        digest = hashlib.sha256()
        digest.update(inputs.numpy().tobytes())
        digest.update(str(tuple(inputs.shape)).encode())
        digest.update(class_index.astype(np.int64).tobytes())
        settings = (repr(self._network(inputs, int(class_index.max()) + 1)), self.epochs, self.batch_size)
        # The softmax's last bits, and with them the flips at the boundary, depend on the kernels that
        # computed it: a classifier trained under numerics=strict is not one trained under avx2.
        settings += (self.lr, self.momentum, self.seed, torch.__version__, _device().type, in_force())
        digest.update(repr(settings).encode())
        return digest.hexdigest()

    def _cached(self, key: str) -> tuple[np.ndarray | None, str]:
        if key in _MEMORY:
            return _MEMORY[key], "cached in memory"
        path = self._path(key)
        if path is not None and path.exists():
            with np.load(path) as stored:
                _MEMORY[key] = stored["probabilities"]
            return _MEMORY[key], f"cached in {path}"
        return None, ""

    def _store(self, key: str, probabilities: np.ndarray) -> None:
        _MEMORY[key] = probabilities
        path = self._path(key)
        if path is not None:
            buffer = io.BytesIO()
            np.savez(buffer, probabilities=probabilities)
            with atomic_write(path, "wb") as f:
                f.write(buffer.getvalue())

    def _path(self, key: str) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / "instance_dependent" / f"{key[:32]}.npz"

    def _network(self, inputs: torch.Tensor, num_classes: int) -> nn.Module:
        """The classifier: the trunk (a copy), or the default MLP, under a linear layer to the classes,
        its weights drawn from ``seed``."""
        if self.classifier is None:
            trunk, width = _default_trunk(int(np.prod(inputs.shape[1:]))), DEFAULT_HIDDEN[-1]
        else:
            trunk, width = copy.deepcopy(self.classifier), int(self.classifier.out_features)
        network = nn.Sequential(trunk, nn.Linear(width, num_classes))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            for module in network.modules():
                if hasattr(module, "reset_parameters"):
                    module.reset_parameters()
        return network

    def _train(self, inputs: torch.Tensor, class_index: np.ndarray) -> np.ndarray:
        """Chen et al.'s generator: SGD on the clean labels, the softmax of every sample after each epoch,
        averaged over the epochs."""
        device = _device()
        network = self._network(inputs, int(class_index.max()) + 1).to(device)
        targets = torch.from_numpy(class_index.astype(np.int64))
        optimizer = torch.optim.SGD(network.parameters(), lr=self.lr, momentum=self.momentum)
        generator = torch.Generator().manual_seed(self.seed)
        total = np.zeros((len(targets), int(class_index.max()) + 1))
        for _ in range(self.epochs):
            network.train()
            for batch in torch.randperm(len(targets), generator=generator).split(self.batch_size):
                loss = nn.functional.cross_entropy(
                    network(inputs[batch].to(device)), targets[batch].to(device)
                )
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            network.eval()
            with torch.no_grad():
                parts = [
                    network(part.to(device)).softmax(dim=1).double().cpu() for part in inputs.split(1024)
                ]
            total += torch.cat(parts).numpy()
        return total / self.epochs


def _default_trunk(width: int) -> nn.Module:
    layers: list[nn.Module] = [nn.Flatten()]
    for hidden in DEFAULT_HIDDEN:
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    return nn.Sequential(*layers)


def _inputs(train: TrainingSplit) -> torch.Tensor:
    """Every training input with the test transform (no random crop or flip), stacked in split order."""
    loader = DataLoader(train.eval_view(), batch_size=1024, shuffle=False)
    return torch.cat([x.float() for x, _, _ in loader])


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
