"""Proxy-Anchor loss (Kim et al. 2020) with one proxy per training class, sized from the data."""

from __future__ import annotations

from pytorch_metric_learning import losses

from noisydml.losses.proxies import ClassProxies


class ProxyAnchorLoss(ClassProxies, losses.ProxyAnchorLoss):
    """PML's ``ProxyAnchorLoss`` (Kim et al. 2020, Eq. 4), with PML's constructor, whose proxies may also be
    made at ``setup`` (:class:`~noisydml.losses.proxies.ClassProxies`).

    ``1/|P+| sum_{p in P+} log(1 + sum_{x in X_p+} e^{-alpha (s(x, p) - delta)})
    + 1/|P| sum_{p in P} log(1 + sum_{x in X_p-} e^{alpha (s(x, p) + delta)})``, s the cosine
    similarity, P+ the proxies with a positive in the batch; PML's ``margin`` is delta.

    The proxies' initialisation is PML's (Kaiming normal, fan out; BSPML: "initialized using a normal
    distribution"). Kim et al. train them 100 times faster than the network (``module.loss_lr`` =
    100 x ``optimizer.lr``).
    """

    option = "proxy_anchor"

    def __init__(
        self,
        num_classes: int | None = None,
        embedding_size: int | None = None,
        margin: float = 0.1,
        alpha: float = 32.0,
        **kwargs,
    ):
        super().__init__(num_classes, embedding_size, margin=margin, alpha=alpha, **kwargs)
