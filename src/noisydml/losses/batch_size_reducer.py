"""Caffe's normalisation of a loss summed over a batch: the sum divided by the number of samples."""

from __future__ import annotations

import torch
from pytorch_metric_learning.reducers import BaseReducer


class BatchSizeReducer(BaseReducer):
    """The sum of the tuples' losses divided by the batch size N (the number of embeddings), whatever the
    number of tuples: the normalisation of Caffe's own metric losses (``ContrastiveLossLayer`` divides
    its sum over the batch by ``bottom[0]->num()``), under which Yu et al. (Caffe) set their lambda
    grid. Against PML's ``MeanReducer`` (the sum over the tuples divided by their number T) it weighs
    the tuple term by T / N, which a miner taking one negative per positive pair of a P x K batch puts
    between 0 and K - 1."""

    def element_reduction(self, losses: torch.Tensor, loss_indices, embeddings: torch.Tensor, labels):
        return losses.sum() / len(embeddings)

    def pos_pair_reduction(self, losses, *args):
        return self.element_reduction(losses, *args)

    def neg_pair_reduction(self, losses, *args):
        return self.element_reduction(losses, *args)

    def triplet_reduction(self, losses, *args):
        return self.element_reduction(losses, *args)
