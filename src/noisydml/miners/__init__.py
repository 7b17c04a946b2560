"""Miners: ``miner(embeddings, labels) -> (anchors, positives, negatives)``, PML's interface.

Batch-hard, distance-weighted and multi-similarity mining are PML's, targeted directly from
``conf/miner/``.
"""

from noisydml.miners.all_triplets import AllTripletsMiner, RandomTripletsMiner
from noisydml.miners.easy_positive import EasyPositiveMiner, NegativeRule, RandomPositiveMiner
from noisydml.miners.semihard import FixedSemihardMiner, RandomSemihardMiner, SemihardPerPairMiner

__all__ = [
    "AllTripletsMiner",
    "EasyPositiveMiner",
    "NegativeRule",
    "RandomPositiveMiner",
    "FixedSemihardMiner",
    "RandomSemihardMiner",
    "RandomTripletsMiner",
    "SemihardPerPairMiner",
]
