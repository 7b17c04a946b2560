"""ProxyNCA (Movshovitz-Attias et al. 2017) with one proxy per training class, sized from the data."""

from __future__ import annotations

import torch
from pytorch_metric_learning import losses

from noisydml.core.hooks import TrainingSet
from noisydml.losses.proxies import ClassProxies


class ProxyNCALoss(ClassProxies, losses.ProxyNCALoss):
    """PML's ``ProxyNCALoss``, with PML's constructor, whose proxies may also be made at ``setup``
    (:class:`~noisydml.losses.proxies.ClassProxies`).

    Per sample x of class y, ``-log softmax_y(-s d(x, p_c))`` over the proxies p_c, d the distance
    (squared Euclidean between unit vectors, PML's default) and s PML's ``softmax_scale``. PML's
    denominator sums over every proxy, the positive one included (the bounded form of ProxyNCA++,
    Teh et al. 2020); Movshovitz-Attias et al.'s Eq. leaves the positive proxy out. The proxies start
    from PML's initialisation (standard normal).
    """

    option = "proxy_nca"

    def setup(self, train_set: TrainingSet) -> None:
        super().setup(train_set)
        # PML's class ids of the proxies, which it builds in its constructor.
        self.proxy_labels = torch.arange(self.num_classes)
