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
