"""Every valid triplet of the batch: the exhaustive baseline against which the 1-1 miners are compared."""

from __future__ import annotations

import torch
from pytorch_metric_learning.miners import BaseMiner
from pytorch_metric_learning.utils import loss_and_miner_utils as lmu


class AllTripletsMiner(BaseMiner):
    """Every (a, p, n) with a != p, y_a == y_p and y_a != y_n; distances play no part."""

    def mine(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor,
        ref_emb: torch.Tensor,
        ref_labels: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return lmu.get_all_triplets_indices(labels, ref_labels)


class RandomTripletsMiner(BaseMiner):
    """``num_triplets`` triplets drawn uniformly without replacement from every valid triplet of the
    batch (all of them when there are fewer); ``None`` draws as many as the batch has samples, as the
    random sampler of Roth et al.'s framework does (Levi et al.'s "random sampled triplets", Fig. 4).
    The draw uses torch's global generator."""

    def __init__(self, num_triplets: int | None = None, **kwargs):
        if num_triplets is not None and num_triplets < 1:
            raise ValueError(f"miner.num_triplets={num_triplets} must be >= 1, or null for the batch size")
        super().__init__(**kwargs)
        self.num_triplets = num_triplets

    def mine(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor,
        ref_emb: torch.Tensor,
        ref_labels: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        triplets = lmu.get_all_triplets_indices(labels, ref_labels)
        count = len(embeddings) if self.num_triplets is None else self.num_triplets
        chosen = torch.randperm(len(triplets[0]), device=labels.device)[:count]
        return tuple(t[chosen] for t in triplets)
