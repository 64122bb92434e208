"""Diagonal (mean-field) Gaussian posterior.

``q(theta) = N(mu, diag(d)^{-1})`` with a positive per-parameter precision
``d``. The Vprop / Vadam estimators keep ``d = N s + lambda``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from .._linalg import randn
from ._common import PosteriorMixin, is_scalar_precision, vector_prior_kl


class DiagonalGaussian(PosteriorMixin):
    """Gaussian with diagonal precision ``diag(d)``.

    Built by the estimators (``posterior_``); users read it.

    Parameters
    ----------
    mean : Tensor of shape (D,)
        Posterior mean.
    d : Tensor of shape (D,)
        Per-parameter precision (positive).

    Attributes
    ----------
    mean : ndarray of shape (D,)
        Posterior mean, in ``module_.parameters()`` order (a numpy copy).
    d : ndarray of shape (D,)
        Per-parameter precision (positive); the marginal variances are ``1 / d``.
    """

    family = "diagonal"

    def __init__(self, mean: Tensor, d: Tensor) -> None:
        self.mean_t = mean
        self.d_t = d

    @property
    def d(self) -> np.ndarray:
        """Per-parameter precision, shape ``(D,)`` (a numpy copy)."""
        return self.d_t.detach().cpu().numpy().copy()

    # --- tensor routines -------------------------------------------------
    def sample_t(
        self, n: int, generator: torch.Generator | None = None, prediction: bool = False, eps: Tensor | None = None
    ) -> Tensor:
        """Weight samples ``mu + eps / sqrt(d)`` as a tensor.

        ``eps ~ N(0, I)`` are the same draws, for the same generator state, as
        ``LowRankGaussian``'s of rank 0.

        Parameters
        ----------
        n : int
            Number of samples.
        generator : torch.Generator, default=None
            Source of the random draws (None: torch's global generator).
        prediction : bool, default=False
            Draws for a prediction: ``eps`` drawn in float32 and widened
            (``skbayes._linalg.randn``).
        eps : Tensor of shape (n, D), default=None
            Standard normal draws to use instead of drawing from ``generator``.

        Returns
        -------
        theta : Tensor of shape (n, D)
            Flat weight vectors drawn from the posterior.
        """
        mean = self.mean_t
        if eps is None:
            eps = randn((int(n), mean.shape[0]), mean, generator, prediction)
        return mean[None, :] + eps * torch.rsqrt(self.d_t)[None, :]

    def variance_t(self) -> Tensor:
        return 1.0 / self.d_t

    def precision_t(self) -> Tensor:
        return torch.diag(self.d_t)

    def logdet_precision_t(self) -> Tensor:
        return torch.log(self.d_t).sum()

    def solve_t(self, x: Tensor, shift: float = 0.0) -> Tensor:
        d = self.d_t + shift if shift else self.d_t
        return x / d if x.dim() == 1 else x / d[:, None]

    def kl_to_prior(self, prior_precision: float | Tensor) -> float:
        if not is_scalar_precision(prior_precision):
            return vector_prior_kl(prior_precision, self.mean_t, 1.0 / self.d_t, torch.log(self.d_t).sum())  # type: ignore[arg-type]  # not scalar: a Tensor
        lam = float(prior_precision)
        D = self.mean_t.shape[0]
        tr = (1.0 / self.d_t).sum()
        quad = (self.mean_t * self.mean_t).sum()
        return float(0.5 * (lam * (tr + quad) - D + torch.log(self.d_t).sum() - D * math.log(lam)))

    def _tensors(self) -> tuple[Tensor, ...]:
        return (self.mean_t, self.d_t)
