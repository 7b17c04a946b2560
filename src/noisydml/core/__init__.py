"""The training core: the method protocol (:mod:`noisydml.core.hooks`), the LightningModule that trains any
backbone with any loss and miner (:mod:`noisydml.core.embedding_module`), and seeding. It receives built
objects and knows no data set, loss or miner by name."""
