"""The LightningDataModule: a data set's splits, label noise on the training split, P x K batches."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
from torch.utils.data import DataLoader, Dataset, default_collate
from torch.utils.data.distributed import DistributedSampler

from noisydml.core.hooks import TrainingSet, hooks_of
from noisydml.data.base import LabeledDataset, Splits
from noisydml.data.sampler import SMALL_CLASS_POLICIES, PKSampler
from noisydml.noise import NoisyLabels, summarize
from noisydml.noise.protocols import SplitNoise
from noisydml.utils.atomic import atomic_write
from noisydml.utils.checks import Rule, check_fraction, check_value
from noisydml.utils.errors import BadInput
from noisydml.utils.random_state import streams_kept
from noisydml.utils.unread import Parts

# Second words of the seeds of the draws that hide labels and hold out the validation split, so they are
# independent of each other and of the sampler's (seed, epoch) streams.
_UNLABELED_STREAM = 0x554E4C42
_VALIDATION_STREAM = 0x56414C49

VAL_SPLITS = ("auto", "class_disjoint", "stratified")
VAL_LABELS = ("observed", "true")
SCORE_TRAIN = (None, "true", "observed")
# The batch's shape, the loaders' sizes and what a class smaller than K does.
RULES = (
    Rule("data.P", int, 2, example="data.P=10"),
    Rule("data.K", int, 2, example="data.K=6"),
    Rule("data.batches_per_epoch", int, 1, optional=True, example="data.batches_per_epoch=100"),
    Rule("data.eval_batch_size", int, 1, example="data.eval_batch_size=512"),
    Rule("data.num_workers", int, 0, example="data.num_workers=4"),
    Rule("data.small_classes", str, options=SMALL_CLASS_POLICIES),
)


class NoisyTrainSet(Dataset):
    """The training samples a run trains on, with their observed labels.

    Items are ``(input, observed label, index into the data set's training split)``: the index is
    stable across noise models and toplines, so per-sample state can be keyed by it.
    """

    def __init__(self, base: LabeledDataset, noisy: NoisyLabels, labels: np.ndarray):
        self.base = base
        self.noisy = noisy
        self.labels = labels

    def __len__(self) -> int:
        return len(self.noisy.indices)

    def __getitem__(self, position: int):
        index = int(self.noisy.indices[position])
        return self.base.load(index), int(self.labels[position]), index


class MetricDataModule(pl.LightningDataModule):
    """Builds the splits once, applies the noise model to the training labels, serves P x K batches.

    Observed training labels are remapped to ``0..C-1`` (proxy and classification losses index by
    label); ``labels.csv`` keeps the data set's own class ids. The test split is never touched by noise.

    ``unlabeled_fraction`` > 0 hides the labels of that fraction of the training samples, after the noise
    is drawn (so every method in a sweep shares the noisy labels of the samples it sees), stratified by
    true class (round half to even per class) and seeded by ``seed``. Hidden samples leave the batches, the
    hooks' ``indices`` and the classification metrics' reference set; semi-supervised losses get them as
    ``TrainingSet.unlabeled``, and ``unlabeled.csv`` records them beside ``labels.csv``.

    ``val_fraction`` > 0 holds out a validation split from the training split, for model selection that
    never reads the test split. It is carved **after** the noise is drawn on the whole training split, so
    the held-out part is as noisy as the rest and the training part keeps exactly the noisy labels it has
    without a validation split. ``val_split`` says how: ``class_disjoint`` holds out
    ``round(val_fraction * C)`` whole classes (the zero-shot protocols: validation classes are never
    trained on, as test classes are not), ``stratified`` holds out ``round(val_fraction * n_c)`` samples of
    every class (same-class protocols, e.g. BDML's 10% hold-out), ``auto`` takes the data set's own
    protocol: class-disjoint when its test classes are not training classes, stratified when they are.
    Classes are the observed labels, which are all a user selecting a model has; for the same reason the
    validation split is scored by its observed labels (``val_labels=true`` scores it by the true ones, a
    diagnostic). The draw is seeded by ``seed``; ``validation.csv`` records the held-out samples.
    ``test_at_validation`` also scores the test split at every validation (``test_epoch/...``), to show
    what selecting on the test split, as some papers did, would report.

    ``score_train`` also scores the samples trained on, with the test transform, after the test split
    (``test_train/...``): by their ``true`` labels (clean of noise, and in the terms the test split is
    scored by where the data set trains on others: the digits of Levi et al.'s even/odd "train digits"
    columns, Omniglot's letters of their Table 4), or by the ``observed`` ones; None (default) does not.
    """

    def __init__(
        self,
        dataset,
        noise,
        P: int,
        K: int,
        batches_per_epoch: int | None = None,
        small_classes: str = "error",
        eval_batch_size: int = 256,
        num_workers: int = 0,
        pin_memory: bool = False,
        seed: int = 0,
        unlabeled_fraction: float = 0.0,
        val_fraction: float = 0.0,
        val_split: str = "auto",
        val_labels: str | bool = "observed",
        test_at_validation: bool = False,
        score_train: str | bool | None = None,
        filter=None,
    ):
        super().__init__()
        values = (P, K, batches_per_epoch, eval_batch_size, num_workers, small_classes)
        for rule, value in zip(RULES, values, strict=True):
            check_value(rule, value)
        check_fraction("data.unlabeled_fraction", unlabeled_fraction, example=0.5)
        check_fraction("data.val_fraction", val_fraction, example=0.1)
        if val_split not in VAL_SPLITS:
            raise ValueError(f"data.val_split={val_split!r} is not one of {VAL_SPLITS}")
        # true and false on the command line or in YAML arrive as booleans: data.val_labels=true scores by
        # the true labels (false: the observed ones), data.score_train=true as the option true (false: null).
        if isinstance(val_labels, bool):
            val_labels = "true" if val_labels else "observed"
        if val_labels not in VAL_LABELS:
            raise ValueError(f"data.val_labels={val_labels!r} is not one of {VAL_LABELS}")
        if isinstance(score_train, bool):
            score_train = "true" if score_train else None
        if score_train not in SCORE_TRAIN:
            raise ValueError(f"data.score_train={score_train!r} is not one of null, true, observed")
        self.dataset = dataset
        self.noise = noise
        self.P, self.K = P, K
        self.batches_per_epoch = batches_per_epoch
        self.small_classes = small_classes
        self.eval_batch_size = eval_batch_size
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.seed = seed
        self.unlabeled_fraction = unlabeled_fraction
        self.val_fraction = val_fraction
        self.val_split = val_split
        self.val_labels = val_labels
        self.test_at_validation = test_at_validation
        self.score_train = score_train
        self.filter = filter
        self.splits: Splits | None = None
        self.train_set: NoisyTrainSet | None = None
        self.unlabeled_set: NoisyTrainSet | None = None
        self.val_set: NoisyTrainSet | None = None
        # The samples data.filter dropped, so that a run's files hold every noisy label drawn.
        self.filtered: NoisyLabels | None = None

    def unread_keys(self, parts: Parts) -> dict[str, str]:
        """The keys this run's split, method and machine leave unused (``noisydml.utils.unread``)."""
        unread = {}
        held_out = (
            "holds none out, so nothing reads it; drop {key}, or hold one out, e.g. {node}.val_fraction=0.1"
        )
        if self.val_set is None:
            unread["val_labels"] = (
                f"says how the validation split is scored, but {{node}}.val_fraction=0 {held_out}"
            )
            unread["val_split"] = (
                f"says how the validation split is drawn, but {{node}}.val_fraction=0 {held_out}"
            )
        if self.unlabeled_fraction and not hooks_of(parts.model.loss).reads_unlabeled():
            unread["unlabeled_fraction"] = (
                "hides that share of the training labels for a semi-supervised method, but the loss "
                f"({type(parts.model.loss).__name__}) reads no unlabeled sample, so the run would train on "
                "the rest alone; drop {key}, or use a loss that reads them, e.g. loss=semi_adapted_triplet"
            )
        if self.pin_memory and parts.on_cpu:
            unread["pin_memory"] = (
                "pins batches in memory for their copy to a GPU, but this run trains on the CPU, so nothing "
                "reads it; drop {key}"
            )
        return unread

    def setup(self, stage: str | None = None) -> None:
        """Read the data set and draw the noisy labels; idempotent, and cheap after the first call."""
        if self.train_set is not None:
            self._match_trainer()
            return
        self.splits = self.dataset.splits()
        # Before the noise is drawn: dropping unreadable files changes the indices it is drawn over.
        self.skipped_inputs = self.splits.train.verify() + self.splits.test.verify()
        for name, split in (("training", self.splits.train), ("test", self.splits.test)):
            if len(split) == 0:
                # Whatever data set: a run trained or scored on nothing would end in a library's error (or
                # a record of metrics over no sample).
                root = getattr(self.dataset, "root", None)
                where = f" at dataset.root={root}" if root is not None else ""
                raise BadInput(
                    f"the data set {type(self.dataset).__name__}{where}: its {name} split is empty (its "
                    "folder, file or split keys leave it no sample); check dataset.root and the split "
                    "keys, e.g. with noisydml-check-data"
                )
        # Most models need only the labels; an imported list matches image paths, k-means clusters features.
        # The process's random streams are left as the noise model found them: what it takes from them (its
        # classifier trained, or its softmax read from a cache) changes nothing that training draws after.
        with streams_kept():
            if isinstance(self.noise, SplitNoise):
                noisy = self.noise.apply_to(self.splits.train)
            else:
                noisy = self.noise.apply(self.splits.train.labels)
        drawn = noisy.observed
        if self.val_fraction > 0:
            held_out = self._held_out(noisy.observed)
            validation = _subset(noisy, held_out)
            scored_by = validation.observed if self.val_labels == "observed" else validation.true
            self.val_set = NoisyTrainSet(self.splits.train.eval_view(), validation, scored_by)
            noisy = _subset(noisy, ~held_out)
        if self.filter is not None:
            kept = self.filter.keep(self.splits.train.eval_view(), noisy)
            self.filtered = _subset(noisy, ~kept)
            noisy = _subset(noisy, kept)
        _, contiguous = np.unique(noisy.observed, return_inverse=True)
        labels = contiguous.astype(np.int64)
        if self.unlabeled_fraction > 0:
            hidden = self._hidden(noisy.true)
            unlabeled = np.full(hidden.sum(), -1, dtype=np.int64)
            self.unlabeled_set = NoisyTrainSet(self.splits.train, _subset(noisy, hidden), unlabeled)
            noisy, labels = _subset(noisy, ~hidden), labels[~hidden]
        self.train_set = NoisyTrainSet(self.splits.train, noisy, labels)
        # Built here, not in train_dataloader, so a bad P/K fails before the Trainer starts.
        try:
            self.sampler = self._sampler()
        except ValueError as error:
            # What took samples away before the sampler, and each one's fix.
            removed = {}
            if self.val_fraction > 0:
                removed[f"data.val_fraction={self.val_fraction}"] = "lower data.val_fraction"
            if self.filter is not None:
                removed["data.filter"] = (
                    f"keep data.K per class through the filter: data.filter.min_per_class={self.K}"
                )
            if not removed or not str(error).startswith(("data.K=", "data.P=")) or not self._draws(drawn):
                # The batch's shape itself does not fit the training split: the sampler's error says so.
                raise
            # The batch's shape is fine; what is left to train on after validation (and a filter) is not.
            raise ValueError(
                f"{' and '.join(removed)} {'leave' if len(removed) > 1 else 'leaves'} too little to train on "
                f"({error}); {', or '.join(removed.values())}"
            ) from error

    @property
    def resolved_val_split(self) -> str:
        """``val_split`` with ``auto`` replaced by the data set's protocol (needs ``setup``)."""
        if self.val_split != "auto":
            return self.val_split
        shared = np.intersect1d(self.splits.train.labels, self.splits.test.labels)
        return "stratified" if len(shared) else "class_disjoint"

    def _held_out(self, observed: np.ndarray) -> np.ndarray:
        """Mask of the training samples held out for validation (see the class docstring)."""
        rng = np.random.default_rng([self.seed, _VALIDATION_STREAM])
        classes = np.unique(observed)
        if self.resolved_val_split == "class_disjoint":
            count = int(np.rint(round(self.val_fraction * len(classes), 9)))
            if count < 2 or len(classes) - count < 2:
                raise BadInput(_disjoint_refusal(self.val_fraction, count, len(classes), self.P))
            return np.isin(observed, rng.choice(classes, size=count, replace=False))
        held_out = np.zeros(len(observed), dtype=bool)
        for c in classes:
            members = np.flatnonzero(observed == c)
            count = int(np.rint(round(self.val_fraction * len(members), 9)))
            held_out[rng.choice(members, size=count, replace=False)] = True
        if held_out.sum() < 2:
            raise ValueError(
                f"data.val_fraction={self.val_fraction} holds out {held_out.sum()} training samples "
                f"(round(fraction x class size) of each class); raise it, or set data.val_fraction=0 for none"
            )
        return held_out

    def _hidden(self, true: np.ndarray) -> np.ndarray:
        """Mask of the samples whose labels are hidden: round(fraction * n_c) of every true class c."""
        rng = np.random.default_rng([self.seed, _UNLABELED_STREAM])
        hidden = np.zeros(len(true), dtype=bool)
        for c in np.unique(true):
            members = np.flatnonzero(true == c)
            count = int(np.rint(round(self.unlabeled_fraction * len(members), 9)))
            hidden[rng.choice(members, size=count, replace=False)] = True
        return hidden

    def _match_trainer(self) -> None:
        """Rebuild the sampler for the Trainer's processes when it was built before the Trainer existed.

        Under DDP, ``train`` sets the data up (one process) before the Trainer starts; the Trainer's own
        ``setup`` call comes before the module's, whose hooks read the epoch length from the sampler.
        """
        if self.trainer is None:
            return
        processes = (self.trainer.world_size, self.trainer.global_rank)
        if (self.sampler.num_replicas, self.sampler.rank) != processes:
            self.sampler = self._sampler()

    def _draws(self, labels: np.ndarray) -> bool:
        """Whether the sampler could draw its P x K batches from ``labels`` (the whole training split)."""
        try:
            self._sampler(np.unique(labels, return_inverse=True)[1])
        except ValueError:
            return False
        return True

    def check_processes(self, processes: int) -> None:
        """The sampler draws its P x K batches in each of ``processes`` processes (a DDP run's, whose Trainer
        this module is set up before): checked before they start, it is refused once, in one line."""
        if processes > 1:
            self._sampler(replicas=processes)

    def _sampler(self, labels: np.ndarray | None = None, replicas: int | None = None) -> PKSampler:
        replicas, rank = replicas or 1, 0
        if self.trainer is not None:
            replicas, rank = self.trainer.world_size, self.trainer.global_rank
        return PKSampler(
            self.train_set.labels if labels is None else labels,
            P=self.P,
            K=self.K,
            batches_per_epoch=self.batches_per_epoch,
            seed=self.seed,
            small_classes=self.small_classes,
            num_replicas=replicas,
            rank=rank,
        )

    @property
    def noisy(self) -> NoisyLabels:
        return self.train_set.noisy

    @property
    def query_mask(self) -> np.ndarray | None:
        return self.splits.query_mask

    @property
    def num_train_classes(self) -> int:
        return int(self.train_set.labels.max()) + 1

    def noise_summary(self) -> dict:
        """The noise of the samples trained on (the validation split's is in ``validation_summary``)."""
        summary = summarize(self.noisy)
        # What an imported list matched, or which classes small clusters dissolved.
        if getattr(self.noise, "report", None):
            summary["details"] = self.noise.report
        if self.filter is not None:
            summary["filter"] = self.filter.report
        if self.unlabeled_set is not None:
            summary["num_unlabeled"] = len(self.unlabeled_set)
        return summary

    def validation_summary(self) -> dict | None:
        """How the validation split was drawn and what it holds; None without one."""
        if self.val_set is None:
            return None
        held = self.val_set.noisy
        summary = {
            "split": self.resolved_val_split,
            "fraction": self.val_fraction,
            "labels": self.val_labels,
            "num_samples": len(held.indices),
            "num_classes": len(np.unique(held.observed)),
            "realized_noise_rate": float(np.mean(held.observed != held.true)),
        }
        if summary["split"] == "class_disjoint":
            summary["classes"] = np.unique(held.observed).tolist()
        return summary

    @property
    def validation_stages(self) -> list[str]:
        """The metric prefix of each of ``val_dataloader``'s loaders, in order."""
        return ["val"] * (self.val_set is not None) + ["test_epoch"] * self.test_at_validation

    def training_set(self) -> TrainingSet:
        """What a method's hooks may know about the training data (see ``noisydml.core.hooks``)."""
        return TrainingSet(
            num_indices=len(self.splits.train),
            indices=self.noisy.indices,
            labels=self.train_set.labels,
            flipped=self.noisy.observed != self.noisy.true,
            num_classes=self.num_train_classes,
            batches_per_epoch=self.sampler.batches_per_epoch,
            unlabeled=self.unlabeled_set,
        )

    def first_batch(self) -> tuple:
        """K samples of each of the first P classes of the training set, as the sampler draws a batch."""
        labels = self.train_set.labels
        classes = sorted(set(labels.tolist()))[: self.P]
        positions = [p for c in classes for p in (labels == c).nonzero()[0][: self.K]]
        return default_collate([self.train_set[int(p)] for p in positions])

    def reference_dataloader(self) -> DataLoader:
        """The samples trained on, with the test transform and their observed class ids.

        For metrics that classify test items against training embeddings (nearest class mean, k-NN).
        """
        reference = NoisyTrainSet(self.splits.train.eval_view(), self.noisy, self.noisy.observed)
        return self._loader(reference)

    def scored_train_dataloader(self) -> DataLoader | None:
        """The samples trained on, with the test transform, labelled as ``score_train`` says; None when
        the training split is not scored."""
        if self.score_train is None:
            return None
        labels = self.noisy.observed
        if self.score_train == "true":
            fine = self.splits.train_eval_labels
            labels = self.noisy.true if fine is None else fine[self.noisy.indices]
        return self._loader(NoisyTrainSet(self.splits.train.eval_view(), self.noisy, labels))

    def train_dataloader(self) -> DataLoader:
        self._match_trainer()
        if self.trainer is not None and self.trainer.fit_loop.restarting:
            # Resumed from a mid-epoch checkpoint: continue with the batch after the last one trained on.
            self.sampler.resume_at(self.trainer.fit_loop.epoch_loop.batch_progress.current.completed)
        return DataLoader(
            self.train_set,
            batch_sampler=self.sampler,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            persistent_workers=self.num_workers > 0,
        )

    def val_dataloader(self) -> list[DataLoader]:
        loaders = {"val": lambda: self._loader(self.val_set), "test_epoch": self._eval_loader}
        return [loaders[stage]() for stage in self.validation_stages]

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader()

    def _eval_loader(self) -> DataLoader:
        return self._loader(self.splits.test)

    def _loader(self, dataset: Dataset) -> DataLoader:
        # Under DDP each rank embeds a share (padded to equal sizes); the module gathers the shares
        # and drops the padding by index.
        sampler = None
        if self.trainer is not None and self.trainer.world_size > 1:
            sampler = DistributedSampler(
                dataset, self.trainer.world_size, self.trainer.global_rank, shuffle=False
            )
        return DataLoader(
            dataset,
            batch_size=self.eval_batch_size,
            sampler=sampler,
            shuffle=False,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
        )

    def write_labels(
        self, path: Path, unlabeled_path: Path, validation_path: Path, filtered_path: Path
    ) -> None:
        """``index,true,observed`` for every training sample the run trained on with its label (``path``);
        with hidden labels, ``unlabeled_path`` lists the others (``observed`` is the label that was
        hidden); with a validation split, ``validation_path`` the held-out samples; with a filter,
        ``filtered_path`` the samples it dropped. Together they hold every noisy label drawn."""
        _write_labels(path, self.noisy)
        if self.filtered is not None:
            _write_labels(filtered_path, self.filtered)
        if self.unlabeled_set is not None:
            _write_labels(unlabeled_path, self.unlabeled_set.noisy)
        if self.val_set is not None:
            _write_labels(validation_path, self.val_set.noisy)


def _disjoint_refusal(fraction: float, count: int, classes: int, P: int) -> str:
    """Why ``data.val_fraction=fraction`` draws no class-disjoint validation split of ``classes`` training
    classes (it holds out ``count``; the split needs 2 and training 2 left), with a value that draws one:
    the count nearest ``count`` that does, and the ``data.P`` the classes left allow."""
    held = f"data.val_fraction={fraction} holds out {count} of the {classes} training classes"
    if count < 2:
        held += "; a class-disjoint validation split needs at least 2, and 2 left to train on"
    else:
        held += f", leaving {classes - count} to train on; a batch draws at least 2 classes"
    other = "data.val_split=stratified (a share of every class), or data.val_fraction=0 for none"
    if classes < 4:
        return f"{held}: with {classes} no class-disjoint split is possible; use {other}"
    target = min(max(count, 2), classes - 2)
    left = classes - target
    value = next(
        f
        for digits in range(1, 10)
        if int(np.rint(round((f := round(target / classes, digits)) * classes, 9))) == target
    )
    batch = f" data.P={left}" if left < P else ""
    return f"{held}: e.g. data.val_fraction={value}{batch} (holds out {target}, leaves {left}), or {other}"


def _subset(noisy: NoisyLabels, mask: np.ndarray) -> NoisyLabels:
    return NoisyLabels(noisy.indices[mask], noisy.true[mask], noisy.observed[mask])


def _write_labels(path: Path, noisy: NoisyLabels) -> None:
    with atomic_write(path) as f:
        # csv's default line end is CRLF; LF like every other text file of a run.
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["index", "true", "observed"])
        rows = zip(noisy.indices.tolist(), noisy.true.tolist(), noisy.observed.tolist(), strict=True)
        writer.writerows(rows)
