"""Miners: ``miner(embeddings, labels) -> (anchors, positives, negatives)``, PML's interface.

Batch-hard mining is PML's ``BatchHardMiner``, targeted directly from ``conf/miner/batch_hard.yaml``.
"""

from noisydml.miners.all_triplets import AllTripletsMiner
from noisydml.miners.semihard import FixedSemihardMiner, RandomSemihardMiner

__all__ = ["AllTripletsMiner", "FixedSemihardMiner", "RandomSemihardMiner"]
