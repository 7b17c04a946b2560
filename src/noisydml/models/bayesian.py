"""Bayes by Backprop (Blundell et al. 2015) layers and the BDML / BLMNN networks built from them.

BDML (Bayesian deep metric learning under noisy labels, Sec. 3.2) puts a Gaussian prior
``p(theta) = N(mu_0, V_0)`` on every weight and bias of an MLP (2 hidden layers of 512, tanh; Sec. 4)
and learns a diagonal Gaussian posterior ``q(theta | mu, rho) = N(mu, sigma^2)`` with
``sigma = log(1 + exp(rho))`` (Eq. 7), sampling ``theta = mu + sigma * eps`` at every training forward
pass so the loss is differentiable in ``mu`` and ``rho`` (Eq. 8-11 are what autograd computes).
Each layer exposes ``KL(q || p)`` in closed form; ``noisydml.losses.BayesianTripletLoss`` adds it.

Choices where the paper is silent (each configurable):

- the embedding width: "two fully-connected hidden layers of 512" then a linear output layer, of
  ``embedding_size`` (32, as ``backbone=mlp``, so the point-estimate DML baseline has the same shape);
- no L2 normalisation of the output: Eq. 2 is the plain squared Euclidean distance with margin 1;
- the posterior init: means as ``nn.Linear`` initialises its weights, ``rho = -5`` (sigma = 0.0067),
  so training starts near a point-estimate network;
- the test-time rule (``predict``): the paper reports 3-NN accuracy and mAP "of the model" without
  saying how the posterior is summarised. ``mean`` (default) embeds with the posterior means, the
  usual choice for a Bayes-by-Backprop embedding and the metric BLMNN reports (its posterior-mean
  transform); it is deterministic, so the k-NN reference and the test items share one metric.
  ``sample_average`` averages the embeddings of ``eval_samples`` sampled networks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from noisydml.models.embedding import EMBEDDING_SIZE
from noisydml.models.small import _ACTIVATIONS
from noisydml.utils.checks import check_value
from noisydml.utils.unread import Parts

PREDICT_RULES = ("mean", "sample_average")


def gaussian_kl(mu: torch.Tensor, sigma: torch.Tensor, prior_mean: float, prior_std: float) -> torch.Tensor:
    """``sum KL(N(mu, sigma^2) || N(prior_mean, prior_std^2))`` over the entries, in closed form:
    ``log(s / sigma) + (sigma^2 + (mu - m)^2) / (2 s^2) - 1/2`` per entry."""
    return (
        math.log(prior_std)
        - torch.log(sigma)
        + (sigma.square() + (mu - prior_mean).square()) / (2 * prior_std**2)
        - 0.5
    ).sum()


class BayesianLinear(nn.Module):
    """``y = x W^T + b`` with ``W ~ N(weight_mu, softplus(weight_rho)^2)`` entry-wise (BDML Eq. 7).

    ``forward(x, sample=True)`` draws one weight matrix per call (one network per mini-batch, as in
    Blundell et al.); ``sample=False`` uses the posterior means. The prior is ``N(prior_mean,
    prior_weight_std^2)`` on each weight and ``N(prior_mean, prior_bias_std^2)`` on each bias.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        prior_mean: float = 0.0,
        prior_weight_std: float = 1.0,
        prior_bias_std: float = 2.0,
        posterior_rho_init: float = -5.0,
    ):
        super().__init__()
        for key, value in (("prior_weight_std", prior_weight_std), ("prior_bias_std", prior_bias_std)):
            if not value > 0:
                raise ValueError(f"backbone.{key}={value} must be > 0 (the prior's standard deviation)")
        self.in_features, self.out_features = in_features, out_features
        self.prior_mean = prior_mean
        self.prior_weight_std = prior_weight_std
        self.prior_bias_std = prior_bias_std
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
        self.weight_rho = nn.Parameter(torch.full((out_features, in_features), posterior_rho_init))
        # nn.Linear's init: U(-1/sqrt(in), 1/sqrt(in)) for the weights and the bias.
        bound = 1 / math.sqrt(in_features)
        nn.init.uniform_(self.weight_mu, -bound, bound)
        if bias:
            self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
            self.bias_rho = nn.Parameter(torch.full((out_features,), posterior_rho_init))
        else:
            self.register_parameter("bias_mu", None)
            self.register_parameter("bias_rho", None)

    def forward(self, x: torch.Tensor, sample: bool = True) -> torch.Tensor:
        weight, bias = self.weight_mu, self.bias_mu
        if sample:
            weight = weight + F.softplus(self.weight_rho) * torch.randn_like(weight)
            if bias is not None:
                bias = bias + F.softplus(self.bias_rho) * torch.randn_like(bias)
        return F.linear(x, weight, bias)

    def kl_divergence(self) -> torch.Tensor:
        """``KL(q || p)`` of this layer's weights and bias, summed (the first term of BDML Eq. 5)."""
        kl = gaussian_kl(self.weight_mu, F.softplus(self.weight_rho), self.prior_mean, self.prior_weight_std)
        if self.bias_mu is not None:
            kl = kl + gaussian_kl(
                self.bias_mu, F.softplus(self.bias_rho), self.prior_mean, self.prior_bias_std
            )
        return kl

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias_mu is not None}, prior=N({self.prior_mean}, "
            f"{self.prior_weight_std}^2 | bias {self.prior_bias_std}^2)"
        )


class BayesianMLP(nn.Module):
    """Flatten, then ``BayesianLinear -> activation`` per width in ``hidden``, then a ``BayesianLinear``
    to ``embedding_size``: BDML's network (``hidden=(512, 512)``, tanh, prior std 1 / bias 2).

    An empty ``hidden`` leaves one linear map ``x -> Lx``: with ``bias=False``, a prior mean of 1e-5
    and variance 1e-3 it is BLMNN's linear metric (Wang & Tan 2018, with BDML Sec. 4.1's prior).

    In training mode every forward pass samples a new network. In eval mode ``predict`` decides:
    ``mean`` uses the posterior means, ``sample_average`` averages ``eval_samples`` sampled embeddings.
    """

    def __init__(
        self,
        in_features: int,
        hidden: Sequence[int] = (512, 512),
        embedding_size: int = 32,
        activation: str = "tanh",
        bias: bool = True,
        prior_mean: float = 0.0,
        prior_weight_std: float = 1.0,
        prior_bias_std: float = 2.0,
        posterior_rho_init: float = -5.0,
        predict: str = "mean",
        eval_samples: int = 10,
    ):
        super().__init__()
        if in_features < 1:
            raise ValueError(f"backbone.in_features={in_features} must be >= 1 (the flattened input size)")
        check_value(EMBEDDING_SIZE, embedding_size)
        hidden = [int(width) for width in hidden]
        if any(width < 1 for width in hidden):
            raise ValueError(f"backbone.hidden={hidden} must hold widths >= 1")
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"backbone.activation={activation!r} is unknown: choose one of {sorted(_ACTIVATIONS)}"
            )
        if predict not in PREDICT_RULES:
            raise ValueError(f"backbone.predict={predict!r} is not one of {PREDICT_RULES}")
        if eval_samples < 1:
            raise ValueError(f"backbone.eval_samples={eval_samples} must be >= 1")
        widths = [in_features, *hidden, embedding_size]
        self.layers = nn.ModuleList(
            BayesianLinear(
                width,
                next_width,
                bias=bias,
                prior_mean=prior_mean,
                prior_weight_std=prior_weight_std,
                prior_bias_std=prior_bias_std,
                posterior_rho_init=posterior_rho_init,
            )
            for width, next_width in zip(widths[:-1], widths[1:], strict=True)
        )
        self.activation = _ACTIVATIONS[activation]()
        self.embedding_size = embedding_size
        self.predict = predict
        self.eval_samples = eval_samples

    def unread_keys(self, parts: Parts) -> dict[str, str]:
        """``eval_samples`` where ``predict=mean`` tests the posterior means (``noisydml.utils.unread``)."""
        if self.predict != "mean":
            return {}
        return {
            "eval_samples": "is how many sampled networks a test averages, but {node}.predict=mean tests "
            "the posterior means, so nothing reads it; drop {key}, or average samples: "
            "{node}.predict=sample_average"
        }

    def embed(self, x: torch.Tensor, sample: bool) -> torch.Tensor:
        """One pass: a sampled network (``sample=True``) or the posterior-mean network."""
        h = x.flatten(1)
        for layer in self.layers[:-1]:
            h = self.activation(layer(h, sample=sample))
        return self.layers[-1](h, sample=sample)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            return self.embed(x, sample=True)
        if self.predict == "mean":
            return self.embed(x, sample=False)
        return torch.stack([self.embed(x, sample=True) for _ in range(self.eval_samples)]).mean(dim=0)

    def kl_divergence(self) -> torch.Tensor:
        """``KL(q || p)`` of all the network's weights and biases."""
        return sum(layer.kl_divergence() for layer in self.layers)
