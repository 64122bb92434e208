"""Mean-field Gaussian with softplus-parameterised standard deviations: the posterior
of Bayes by Backprop."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .._linalg import randn
from ._common import PosteriorMixin, is_scalar_precision


def inverse_softplus(s: Tensor) -> Tensor:
    """``rho`` with ``softplus(rho) = s`` (stable for small and large ``s > 0``)."""
    return s + torch.log(-torch.expm1(-s))


def diag_gaussian_kl(mean: Tensor, sigma: Tensor, prior_precision: float | Tensor) -> Tensor:
    """``KL(N(mean, diag(sigma^2)) || N(0, prior_precision^{-1} I))`` as a tensor (differentiable)."""
    var = sigma * sigma
    if not is_scalar_precision(prior_precision):
        lam = prior_precision
        return 0.5 * (lam * (var + mean * mean) - 1.0 - torch.log(lam) - 2.0 * torch.log(sigma)).sum()  # type: ignore[arg-type]  # not scalar: a Tensor
    lam = float(prior_precision)
    return 0.5 * (lam * (var + mean * mean) - 1.0 - math.log(lam) - 2.0 * torch.log(sigma)).sum()


class SoftplusGaussian(PosteriorMixin):
    """Mean-field Gaussian ``N(mu, diag(sigma^2))`` with ``sigma = softplus(rho)``.

    The posterior family of Bayes by Backprop. ``rho`` is unconstrained, so a
    gradient step on ``(mu, rho)`` always gives a valid distribution. Built by the
    estimators (``posterior_``); users read it.

    Parameters
    ----------
    mean : Tensor of shape (D,)
        Posterior mean ``mu``.
    rho : Tensor of shape (D,)
        Unconstrained scale parameters.

    Attributes
    ----------
    mean : ndarray of shape (D,)
        Posterior mean ``mu``, in ``module_.parameters()`` order.
    rho : ndarray of shape (D,)
        Unconstrained scale parameters.
    sigma : ndarray of shape (D,)
        Posterior standard deviations ``softplus(rho)``.
    """

    family = "meanfield-softplus"

    def __init__(self, mean: Tensor, rho: Tensor) -> None:
        self.mean_t = mean
        self.rho_t = rho

    @classmethod
    def from_variance(cls, mean: Tensor, var: Tensor) -> SoftplusGaussian:
        """The posterior with given mean and marginal variances.

        Parameters
        ----------
        mean : Tensor of shape (D,)
            Posterior mean.
        var : Tensor of shape (D,)
            Marginal variances (positive).

        Returns
        -------
        posterior : SoftplusGaussian
            ``N(mean, diag(var))`` with ``rho = softplus^{-1}(sqrt(var))``.
        """
        return cls(mean, inverse_softplus(var.sqrt()))

    @property
    def sigma_t(self) -> Tensor:
        """Posterior standard deviations ``softplus(rho)`` (a tensor)."""
        return F.softplus(self.rho_t)

    @property
    def rho(self) -> np.ndarray:
        """Unconstrained scale parameters, shape ``(D,)`` (a numpy copy)."""
        return self.rho_t.detach().cpu().numpy().copy()

    @property
    def sigma(self) -> np.ndarray:
        """Posterior standard deviations ``softplus(rho)``, shape ``(D,)``."""
        return self.sigma_t.detach().cpu().numpy()

    # --- tensor routines -------------------------------------------------
    def sample_t(self, n: int, generator: torch.Generator | None = None, prediction: bool = False) -> Tensor:
        mu = self.mean_t
        eps = randn((int(n), mu.shape[0]), mu, generator, prediction)
        return mu + self.sigma_t * eps

    def variance_t(self) -> Tensor:
        s = self.sigma_t
        return s * s

    def precision_t(self) -> Tensor:
        return torch.diag(1.0 / self.variance_t())

    def covariance_apply_t(self, x: Tensor) -> Tensor:
        v = self.variance_t()
        return x * v if x.dim() == 1 else x * v[:, None]

    def covariance(self, max_size: int = 5000) -> np.ndarray:
        self._check_dense(max_size)
        with torch.no_grad():
            return torch.diag(self.variance_t()).cpu().numpy()

    def kl_to_prior(self, prior_precision: float | Tensor) -> float:
        with torch.no_grad():
            return float(diag_gaussian_kl(self.mean_t, self.sigma_t, prior_precision))

    def _tensors(self) -> tuple[Tensor, ...]:
        return (self.mean_t, self.rho_t)
